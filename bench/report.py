"""Figures, the printed table and `bench/results.json`."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HOW_TO_READ = """\
How to read this. Every row is measured twice in this one run, with the live wake-up (the bridge
as shipped: a Realtime subscription wakes it, reads only catch up) and with `--poll-only
--interval 2` (the reference design); `live/poll` is their ratio, which holds on a loaded
machine where the absolute numbers don't (other work shows in the CPU table's `other` column).
Latency runs from the person's REST insert (clock read just before it) to the webhook's POST
arriving, and to the reply reaching the person's own Realtime socket, as the app sees it; one
message at a time, each after the previous one's ack; poll-only messages go at a random moment
of the 2 s cycle. p99 is nearest-rank: with few samples it is the slowest. "Mid-turn" is a second
message sent 0.2 s into a 1 s turn, timed from that turn's answer to the second message's POST.
Throughput is a closed loop through one bridge process and an instant webhook: per agent one
message in flight, the next sent the moment the person sees the reply, counted over a window.
Idle cost is what a host's bridge asks of the relay while nobody writes, counted by a proxy
between the bridge and the gateway (HTTP requests; websocket frames it sends), scaled to a
minute. Memory is the bridge's VmHWM after the idle window. Isolation is the other agents'
median latency while one agent's webhook takes 10 s per turn, against the same agents with
none slow. `target` is DESIGN §6's goal for the live column, where it states one. The
supabase-js table is the official web client, unchanged (vsn 2.0.0), subscribed with the
person's token to one thread's inserts: from the REST insert to its callback, beside the live
bridge's own insert → POST and insert → reply figures. The smaller tables say where the time
goes: each segment's median (from the bridge's own events), what one turn asks of the relay and
how fast the relay answers, and CPU per turn by process. Every rate limit in yui_limits was
raised for the run (SQL as the superuser): these are speeds, not throttles."""


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def median(values: list[float]) -> float | None:
    return percentile(values, 50) if values else None


@dataclass
class Figure:
    key: str
    label: str
    unit: str
    live: float
    poll_only: float
    samples: dict[str, int] = field(default_factory=dict)
    how: str = ""
    target: str = ""  # DESIGN §6's goal for the live figure, if it states one

    @property
    def ratio(self) -> float | None:
        return self.live / self.poll_only if self.poll_only else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "ratio_is": "live / poll_only"}


def machine(postgres: str) -> dict[str, Any]:
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(int(mem) / 2**20, 1),
        "python": platform.python_version(),
        "postgresql": postgres,
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_at_start": list(os.getloadavg()),
    }


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def table(figures: list[Figure], title: str) -> Table:
    grid = Table(title=title, title_justify="left")
    grid.add_column("figure")
    grid.add_column("unit")
    for name in ("live", "poll-only", "live/poll"):
        grid.add_column(name, justify="right")
    grid.add_column("n live/poll", justify="right")
    grid.add_column("target", justify="right")
    for fig in figures:
        counts = f"{fig.samples.get('live', '')} / {fig.samples.get('poll_only', '')}"
        grid.add_row(
            fig.label,
            fig.unit,
            _number(fig.live),
            _number(fig.poll_only),
            _ratio(fig.ratio),
            counts,
            fig.target,
        )
    return grid


def breakdown_table(rows: dict[str, dict[str, float | None]], title: str) -> Table:
    grid = Table(title=title, title_justify="left")
    grid.add_column("segment (median, ms)")
    grid.add_column("live", justify="right")
    grid.add_column("poll-only", justify="right")
    for segment, values in rows.items():
        grid.add_row(segment, _number(values.get("live")), _number(values.get("poll_only")))
    return grid


def requests_table(rows: dict[str, dict[str, float]], turns: int) -> Table:
    grid = Table(
        title=f"What one live turn asks of the relay ({turns} turns through a timing proxy)",
        title_justify="left",
    )
    grid.add_column("request (bridge → relay)")
    grid.add_column("per turn", justify="right")
    grid.add_column("relay answers in (median, ms)", justify="right")
    for kind, row in rows.items():
        grid.add_row(kind, f"{row['per_turn']:.2f}", _number(row["median_ms"]))
    return grid


def cpu_table(rows: dict[str, dict[str, float]]) -> Table:
    grid = Table(
        title="CPU per turn in the throughput loops (ms of CPU per turn, by process)",
        title_justify="left",
    )
    grid.add_column("loop")
    groups = list(next(iter(rows.values())))
    for group in groups:
        grid.add_column(group, justify="right")
    for loop, row in rows.items():
        grid.add_row(loop, *(_number(row[g]) for g in groups))
    return grid


def turn_cost_table(rows: dict[str, dict[str, float]], turns: int) -> Table:
    """PostgreSQL's side of one turn, fresh thread against a long one, from its own counters."""
    grid = Table(
        title=f"What one turn costs PostgreSQL ({turns} turns each, per turn)",
        title_justify="left",
    )
    grid.add_column("per turn")
    threads = list(rows)
    for thread in threads:
        grid.add_column(thread, justify="right")
    grid.add_column("long/fresh", justify="right")
    fresh, long = (rows[t] for t in threads)
    for key in fresh:
        grid.add_row(key, *(_number(rows[t][key]) for t in threads),
                     _ratio(long[key] / fresh[key] if fresh[key] else None))  # fmt: skip
    return grid


def sdk_table(row: dict[str, Any], figures: list[Figure]) -> Table | str:
    """Realtime through supabase-js beside the bridge's own live figures (or why it wasn't
    measured)."""
    if "skipped" in row:
        return f"Realtime through supabase-js: not measured ({row['skipped']})"
    grid = Table(
        title=f"Realtime through the official client ({row['client']}), beside the bridge's",
        title_justify="left",
    )
    for name in ("figure", "p50 (ms)", "p99 (ms)", "n"):
        grid.add_column(name, justify="left" if name == "figure" else "right")
    grid.add_row(
        "insert → supabase-js callback (the person's channel, filtered by agent)",
        _number(row["p50_ms"]),
        _number(row["p99_ms"]),
        str(row["samples"]),
    )
    by_key = {f.key: f for f in figures}
    for label, key in (
        ("insert → webhook POST", "latency_post"),
        ("insert → reply visible", "latency_visible"),
    ):
        p50, p99 = by_key[f"{key}_p50"], by_key[f"{key}_p99"]
        grid.add_row(
            f"{label} (live bridge)", _number(p50.live), _number(p99.live), str(p50.samples["live"])
        )
    return grid


def show(report: dict[str, Any], figures: list[Figure], console: Console) -> None:
    m = report["machine"]
    console.print(
        f"Yui bridges bench, {m['date']}: {m['cores']} cores, {m['ram_gib']} GiB RAM, "
        f"Python {m['python']}, PostgreSQL {m['postgresql']}, load {m['load_average_at_start']}"
        f"{' (quick mode: tiny samples, not a measurement)' if report['quick'] else ''}",
        markup=False,
    )
    console.print(table(figures, "Targets (DESIGN §6), live wake-up against poll-only"))
    console.print(sdk_table(report["realtime_js"], figures), markup=False, highlight=False)
    for key, title in (
        ("latency_breakdown", "Where a message's time goes (latency series, one at a time)"),
        ("throughput_breakdown", "Where a turn's time goes under load (many-agent loop)"),
    ):
        console.print(breakdown_table(report[key], title))
    console.print(requests_table(report["turn_requests"], report["plan"]["profile"]))
    console.print(cpu_table(report["cpu_ms_per_turn"]))
    if "turn_cost" in report:
        console.print(turn_cost_table(report["turn_cost"], report["plan"]["turn_cost"]))
    for line in report["notes"]:
        console.print("- " + line, markup=False, highlight=False)
    console.print(HOW_TO_READ, markup=False, highlight=False)


def write(path: Path, report: dict[str, Any], figures: list[Figure]) -> None:
    data = {**report, "figures": {f.key: f.as_json() for f in figures}}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
