"""`make bench` works: its whole code path in the tiny `--quick` mode prints the table and writes
every figure to results.json. No timed assertion: speed goals live only in the printed table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.figures import ROWS

# `bench.run` starts a relay of its own (PostgreSQL included), through no conftest fixture.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_prints_the_table_and_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "live wake-up against poll-only" in done.stdout
    assert "How to read this" in done.stdout
    results = json.loads(out.read_text())
    assert set(results["figures"]) == set(ROWS)
    for key, figure in results["figures"].items():
        assert figure["unit"], key
        assert figure["label"] in done.stdout, key
        for mode in ("live", "poll_only"):
            assert isinstance(figure[mode], int | float), (key, mode)
    at_scale = results["scale"]
    assert at_scale["agents"] == 20 and "20 agents on one host" in done.stdout
    assert at_scale["turns_per_s"] > 0 and at_scale["requests_per_turn"] > 0
    machine = results["machine"]
    assert {"cores", "ram_gib", "python", "postgresql", "date"} <= set(machine)
    started = re.search(r"starting a relay in (\S+) ", done.stderr)
    assert started and not Path(started[1]).exists()  # the relay and its files are gone
