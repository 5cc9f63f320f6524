"""From measurements to figures: every row of the table, per bridge mode, with its unit."""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure import Idle, Isolation, Sample, Throughput
from bench.report import Figure, median, percentile

MODES = ("live", "poll_only")


@dataclass
class ModeRun:
    """Everything measured with one bridge mode."""

    latency: list[Sample]
    mid_turn: list[float]  # seconds
    one: Throughput
    many: Throughput
    isolation: Isolation
    idle: tuple[Idle, Idle]  # 1 agent, many agents
    a2a: list[float]  # seconds from insert to the A2A agent's first byte (`yui run-a2a`)


# key → (label, unit, how it is measured); `{many}` is the many-agent host's size.
ROWS: dict[str, tuple[str, str, str]] = {
    "latency_post_p50": (
        "insert → webhook POST, p50",
        "ms",
        "person's REST insert (clock read just before) to the webhook's POST arriving",
    ),
    "latency_post_p99": ("insert → webhook POST, p99", "ms", "as above, nearest-rank p99"),
    "latency_visible_p50": (
        "insert → reply visible, p50",
        "ms",
        "person's insert to the reply arriving on the person's Realtime socket",
    ),
    "latency_visible_p99": ("insert → reply visible, p99", "ms", "as above, nearest-rank p99"),
    "a2a_first_byte_p50": (
        "insert → A2A agent's first byte, p50",
        "ms",
        "person's insert to `yui run-a2a`'s message reaching an a2a-sdk 1.3 agent (its request's "
        "first byte)",
    ),
    "a2a_first_byte_p99": ("insert → A2A agent's first byte, p99", "ms", "as above, p99"),
    "mid_turn_p50": (
        "message sent mid-turn: turn's answer → its POST, p50",
        "ms",
        "a 2nd message sent 0.2 s into a 1 s turn: from the bridge's answer event to its POST",
    ),
    "throughput_one": (
        "throughput, 1 agent (closed loop)",
        "turns/s",
        "next message the moment the previous reply is visible; replies seen in the window",
    ),
    "throughput_many": (
        "throughput, {many} agents (closed loop)",
        "turns/s",
        "one message in flight per agent, all agents at once; replies seen in the window",
    ),
    "idle_requests_many": (
        "idle: HTTP requests to the relay, {many} agents",
        "req/min",
        "HTTP requests the bridge sent through a counting proxy, nobody writing",
    ),
    "idle_requests_one": (
        "idle: HTTP requests to the relay, 1 agent",
        "req/min",
        "as above, a host with one agent",
    ),
    "idle_frames_many": (
        "idle: websocket frames sent, {many} agents",
        "frames/min",
        "frames the bridge sent on its Realtime socket (join, heartbeats, token renewals)",
    ),
    "rss_idle_one": (
        "idle bridge peak RSS (VmHWM), 1 agent",
        "MiB",
        "/proc/<pid>/status VmHWM after the idle window",
    ),
    "rss_idle_many": (
        "idle bridge peak RSS (VmHWM), {many} agents",
        "MiB",
        "/proc/<pid>/status VmHWM after the idle window",
    ),
    "isolation_baseline_p50": (
        "others' p50 visible, no slow agent",
        "ms",
        "insert → reply visible, one at a time, round-robin over the other agents",
    ),
    "isolation_slow_p50": (
        "others' p50 visible, one agent 10 s/turn",
        "ms",
        "the same while the first agent's webhook takes 10 s per turn, back to back",
    ),
    "isolation_slowdown": (
        "isolation: beside-slow p50 ÷ no-slow p50",
        "×",
        "1.0 means a slow agent costs the others nothing",
    ),
}


# DESIGN §6's goal for a row, where it states one (live column)
TARGETS = {
    "latency_post_p50": "≪ 50",
    "latency_visible_p50": "≪ 50",
    "latency_post_p99": "< 200",
    "latency_visible_p99": "< 200",
    "throughput_one": "100s",
    "throughput_many": "100s",
    "idle_requests_many": "a handful",
    "isolation_slowdown": "1.0",
}


def ms(seconds: list[float]) -> list[float]:
    return [s * 1000 for s in seconds]


def _visible(samples: list[Sample]) -> list[float]:
    return ms([s.visible - s.sent for s in samples])


def values(run: ModeRun) -> dict[str, tuple[float, int]]:
    """Every figure's value for one mode, with the number of samples behind it."""
    post = ms([s.post - s.sent for s in run.latency])
    seen = _visible(run.latency)
    base = percentile(_visible(run.isolation.baseline), 50)
    beside = percentile(_visible(run.isolation.beside_slow), 50)
    n_lat, n_iso = len(run.latency), len(run.isolation.baseline)
    idle_one, idle_many = run.idle
    return {
        "latency_post_p50": (percentile(post, 50), n_lat),
        "latency_post_p99": (percentile(post, 99), n_lat),
        "latency_visible_p50": (percentile(seen, 50), n_lat),
        "latency_visible_p99": (percentile(seen, 99), n_lat),
        "a2a_first_byte_p50": (percentile(ms(run.a2a), 50), len(run.a2a)),
        "a2a_first_byte_p99": (percentile(ms(run.a2a), 99), len(run.a2a)),
        "mid_turn_p50": (percentile(ms(run.mid_turn), 50), len(run.mid_turn)),
        "throughput_one": (run.one.per_second, run.one.turns),
        "throughput_many": (run.many.per_second, run.many.turns),
        "idle_requests_many": (idle_many.http_per_minute, idle_many.http),
        "idle_requests_one": (idle_one.http_per_minute, idle_one.http),
        "idle_frames_many": (idle_many.frames_per_minute, idle_many.frames),
        "rss_idle_one": (idle_one.peak_rss_kib / 1024, 1),
        "rss_idle_many": (idle_many.peak_rss_kib / 1024, 1),
        "isolation_baseline_p50": (base, n_iso),
        "isolation_slow_p50": (beside, n_iso),
        "isolation_slowdown": (beside / base, n_iso),
    }


def figures(runs: dict[str, ModeRun], many: int) -> list[Figure]:
    per_mode = {mode: values(runs[mode]) for mode in MODES}
    rows = []
    for key, (label, unit, how) in ROWS.items():
        (live, n_live), (poll, n_poll) = per_mode["live"][key], per_mode["poll_only"][key]
        samples = {"live": n_live, "poll_only": n_poll}
        target = TARGETS.get(key, "")
        rows.append(Figure(key, label.format(many=many), unit, live, poll, samples, how, target))
    return rows


# segment → (from, to): fields of a Sample
SEGMENTS: dict[str, tuple[str, str]] = {
    "person's insert answered": ("sent", "inserted"),
    "insert → bridge starts the turn (its `turn` event)": ("sent", "turn"),
    "turn → webhook POST arrives": ("turn", "post"),
    "POST → reply visible to the person": ("post", "visible"),
    "  (POST → the bridge's `reply` event: written)": ("post", "reply"),
    "insert → reply visible (total)": ("sent", "visible"),
}


def cpu_per_turn(runs: dict[str, ModeRun], many: int) -> dict[str, dict[str, float]]:
    """CPU ms per turn by process group, for each throughput loop (drained turns included)."""
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        for label, loop in (("1 agent", runs[mode].one), (f"{many} agents", runs[mode].many)):
            turns = max(1, len(loop.samples))
            out[f"{label}, {mode}"] = {k: v * 1000 / turns for k, v in loop.cpu.items()}
    return out


def breakdown(samples: dict[str, list[Sample]]) -> dict[str, dict[str, float | None]]:
    """The median of each segment of a message's life, per mode, in ms (the bridge's events
    carry its own clock; it is the same machine's)."""
    out: dict[str, dict[str, float | None]] = {}
    for segment, (start, end) in SEGMENTS.items():
        out[segment] = {}
        for mode, series in samples.items():
            gaps = [
                (b - a) * 1000
                for s in series
                if (a := getattr(s, start)) is not None and (b := getattr(s, end)) is not None
            ]
            out[segment][mode] = median(gaps)
    return out
