"""A thousand agents on one host (issue 21, item 6): what one live bridge serving them asks of
the relay while nobody writes, its memory, and then one turn for every agent at once.

They belong to a person of their own, so the other phases' person keeps their 200 agents and
their costs. The bridge talks to the relay through a counting proxy, as in the idle phase.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from bench.bridge import BridgeProcess
from bench.measure import REPLY_TIMEOUT
from bench.proxy import CountingProxy
from bench.relay import Person, Relay, pair_host
from bench.report import percentile
from bench.watch import ReplyWatch

SENDERS = 8  # the person's threads writing the thousand messages


def measure(
    relay: Relay, root: Path, webhook: str, count: int, settle: float, window: float
) -> dict[str, Any]:
    """Pair `count` agents, count the live bridge's requests over `window` idle seconds (after
    `settle`), then send each agent one message and time them all."""
    person = relay.signup("Scale person")
    started = time.monotonic()
    host = pair_host(person, root / "hosts", "scale", count)
    paired_s = time.monotonic() - started
    watch = ReplyWatch(relay.url, relay.anon_key, person.token)
    proxy = CountingProxy(relay.port)
    bridge = BridgeProcess(
        root, host.state, proxy.url, webhook, poll_only=False, anon_key=relay.anon_key
    )
    try:
        bridge.ready(timeout=120)
        time.sleep(settle)
        proxy.reset()
        time.sleep(window)
        idle = proxy.snapshot()[0]
        rss_kib = bridge.peak_rss_kib()
        proxy.reset()
        turns = _one_turn_each(person, watch, host.ids)
        asked = proxy.snapshot()[0]
    finally:
        bridge.stop()
        proxy.close()
        watch.close()
    http = sum(n for kind, n in idle.items() if not kind.startswith("websocket "))
    turn_requests = sum(n for kind, n in asked.items() if not kind.startswith("websocket "))
    return {
        "agents": count,
        "pairing_s": paired_s,
        "idle_requests_per_min": http * 60 / window,
        "idle_requests": dict(idle),
        "idle_peak_rss_mib": rss_kib / 1024,
        "turns_per_s": turns["turns_per_s"],
        "turn_p50_ms": turns["p50_ms"],
        "turn_p99_ms": turns["p99_ms"],
        "requests_per_turn": turn_requests / count,
    }


def _one_turn_each(person: Person, watch: ReplyWatch, agent_ids: list[str]) -> dict[str, float]:
    """One message to every agent, from SENDERS threads at once; insert → reply visible."""
    sent: dict[str, float] = {}
    todo = list(agent_ids)
    lock = threading.Lock()

    def send() -> None:
        while True:
            with lock:
                if not todo:
                    return
                agent_id = todo.pop()
            at = time.time()
            row = person.say(agent_id)
            with lock:
                sent[row] = at

    first = time.time()
    threads = [threading.Thread(target=send) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen = {row: watch.wait(row, REPLY_TIMEOUT) for row in list(sent)}
    last = max(seen.values())
    times = [(seen[row] - at) * 1000 for row, at in sent.items()]
    return {
        "turns_per_s": len(seen) / (last - first),
        "p50_ms": percentile(times, 50),
        "p99_ms": percentile(times, 99),
    }


def table(row: dict[str, Any]) -> Table:
    grid = Table(
        title=f"{row['agents']:,} agents on one host, one live bridge", title_justify="left"
    )
    grid.add_column("figure")
    grid.add_column("value", justify="right")
    grid.add_column("target", justify="right")
    kinds = Counter(row["idle_requests"])
    asked = ", ".join(f"{kind} ×{n}" for kind, n in kinds.most_common()) or "nothing"
    for name, value, target in (
        ("idle: HTTP requests to the relay a minute", f"{row['idle_requests_per_min']:.1f}", "≤ 5"),
        ("idle: bridge peak RSS (MiB)", f"{row['idle_peak_rss_mib']:.1f}", "≤ 80"),
        ("one turn each: turns/s", f"{row['turns_per_s']:.1f}", ""),
        ("one turn each: insert → reply visible p50 (ms)", f"{row['turn_p50_ms']:.0f}", ""),
        ("one turn each: insert → reply visible p99 (ms)", f"{row['turn_p99_ms']:.0f}", ""),
        ("one turn each: relay requests per turn", f"{row['requests_per_turn']:.2f}", "≤ 4"),
        ("pairing them all (s)", f"{row['pairing_s']:.0f}", ""),
        ("idle: what was asked", asked, ""),
    ):
        grid.add_row(name, value, target)
    return grid
