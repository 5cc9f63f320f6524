"""How long `yui` takes to start and finish, as a person at a shell sees it: the wall time of
`yui --help` and `yui status --help` (no command module is imported for either), and of a
real `yui send` and `yui app say` to the run's relay (each imports what it needs, reads its
files and makes its requests). Each is a fresh process, run `count` times, one at a time.

The commands find the relay from its own record in the run's home, with no $YUI_URL: the way
a newcomer runs them. Each is run once untimed first with bytecode caching on (as a shell has
it), so a checkout's stale .pyc files aren't counted. Beside them, the floor of this machine:
a click program of two commands printing its `--help`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from bench.relay import YUI
from bench.report import percentile

TARGET_MS = {"yui --help": "< 150", "yui status --help": "< 150"}

CLICK_FLOOR = """
import click
@click.group()
def cli():
    "A group."
@cli.command()
def one():
    "A command."
cli()
"""
"""The least a click command line costs to start here: what `yui --help` is measured against."""


def _run(home: Path, command: list[str]) -> float:
    """Run `command` as a person at a shell would; its wall time in ms."""
    env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"}
    env.pop("YUI_URL", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1000


def _timed(home: Path, command: list[str], count: int) -> list[float]:
    _run(home, command)  # untimed: writes the .pyc files a stale checkout lacks
    return [_run(home, command) for _ in range(count)]


def measure(home: Path, state: Path, count: int) -> dict[str, Any]:
    """Each command's p50 and p90 in ms: `home` holds the run's relay, `state` a paired host."""
    _run(home, [*YUI, "app", "signup", "startup-bench"])
    _run(home, [*YUI, "app", "add-agent", "Startup"])
    commands = {
        "floor: a click program's --help": [sys.executable, "-c", CLICK_FLOOR, "--help"],
        "yui --help": [*YUI, "--help"],
        "yui status --help": [*YUI, "status", "--help"],
        "yui send": [*YUI, "send", "startup bench", "--state", str(state)],
        "yui app say": [*YUI, "app", "say", "startup bench"],
    }
    rows = {}
    for name, command in commands.items():
        times = _timed(home, command, count)
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
