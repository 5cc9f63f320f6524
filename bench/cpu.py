"""CPU time by process group (the bridge, the gateway, PostgreSQL, this bench, everything
else on the machine), read from /proc, to say where the work of a turn goes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
Groups = dict[str, Callable[[], set[int]]]


def _stat(pid: int) -> tuple[int, float]:
    """(parent pid, CPU seconds used) of a live process; (0, 0.0) if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0.0
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def children(parent: int) -> set[int]:
    """`parent` and its direct children (PostgreSQL's postmaster and its backends)."""
    pids = {parent}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _stat(int(entry.name))[0] == parent:
            pids.add(int(entry.name))
    return pids


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores)."""
    first = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in first]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / TICK


class CpuMeter:
    """CPU seconds per group between `start()` and `stop()`; "other" is the machine's busy
    time outside every group (other work on a shared machine). A process that joins a group
    meanwhile (a backend PostgreSQL starts as the gateway's pool grows) counts from zero; one
    that ended meanwhile is lost to "other"."""

    def __init__(self, groups: Groups) -> None:
        self.groups = groups
        self._begin: dict[str, dict[int, float]] = {}
        self._machine = 0.0

    def _read(self) -> dict[str, dict[int, float]]:
        return {name: {pid: _stat(pid)[1] for pid in find()} for name, find in self.groups.items()}

    def start(self) -> None:
        self._begin = self._read()
        self._machine = machine_busy()

    def stop(self) -> dict[str, float]:
        end, machine = self._read(), machine_busy() - self._machine
        spent = {
            name: sum(used - self._begin[name].get(pid, 0.0) for pid, used in pids.items())
            for name, pids in end.items()
        }
        spent["other"] = machine - sum(spent.values())
        return spent
