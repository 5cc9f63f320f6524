"""How long `yui` takes to start and finish, as a person at a shell sees it: the wall time of
`yui --help` and `yui status --help` (no command module is imported for either), and of a
real `yui send` and `yui app say` to the run's relay (each imports what it needs, reads its
files and makes its requests). Each is a fresh process, run `count` times, one at a time.

The commands find the relay from its own record in the run's home, with no $YUI_URL: the way
a newcomer runs them.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from bench.relay import YUI
from bench.report import percentile

TARGET_MS = {"yui --help": "< 150", "yui status --help": "< 150"}


def _timed(home: Path, args: list[str], count: int) -> list[float]:
    env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"}
    env.pop("YUI_URL", None)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run([*YUI, *args], env=env, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def measure(home: Path, state: Path, count: int) -> dict[str, Any]:
    """Each command's p50 and p90 in ms: `home` holds the run's relay, `state` a paired host."""
    _timed(home, ["app", "signup", "startup-bench"], 1)
    _timed(home, ["app", "add-agent", "Startup"], 1)
    commands = {
        "yui --help": ["--help"],
        "yui status --help": ["status", "--help"],
        "yui send": ["send", "startup bench", "--state", str(state)],
        "yui app say": ["app", "say", "startup bench"],
    }
    rows = {}
    for name, args in commands.items():
        times = _timed(home, args, count)
        rows[name] = {
            "p50_ms": percentile(times, 50),
            "p90_ms": percentile(times, 90),
            "samples": len(times),
            "target_ms": TARGET_MS.get(name, ""),
        }
    return rows


def table(rows: dict[str, Any]) -> Table:
    """The startup figures, beside the bridge's in the same run."""
    grid = Table(title="The command line: a fresh process each time, wall ms", title_justify="left")
    for name, justify in (("command", "left"), ("p50", "right"), ("p90", "right")):
        grid.add_column(name, justify=justify)  # type: ignore[arg-type]
    grid.add_column("n", justify="right")
    grid.add_column("target", justify="right")
    for name, row in rows.items():
        grid.add_row(
            name,
            f"{row['p50_ms']:.0f}",
            f"{row['p90_ms']:.0f}",
            str(row["samples"]),
            row["target_ms"],
        )
    return grid
