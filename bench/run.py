"""`make bench`: one run on a relay of its own that prints the DESIGN §6 table, live wake-up
against `--poll-only --interval 2`, and writes bench/results.json.

    python -m bench.run [--quick] [--out PATH]

Everything stays on loopback; the relay, its PostgreSQL and every file are removed at the end,
also on Ctrl-C, SIGTERM or the run's own deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import gateways, report, scale, sdk_js, startup, turn_cost, web
from bench.a2a import A2AAgent, first_bytes
from bench.bridge import BridgeProcess
from bench.cpu import CpuMeter, children
from bench.figures import MODES, ModeRun, breakdown, cpu_per_turn, figures, ms
from bench.measure import (
    Idle,
    Side,
    isolation,
    latency,
    mid_turn,
    state_edit_ms,
    throughput,
)
from bench.proxy import CountingProxy
from bench.relay import BIG, Host, Person, Relay, free_port, pair_host
from bench.watch import ReplyWatch
from bench.webhook import Webhook

RESULTS = Path(__file__).resolve().parent / "results.json"


@dataclass(frozen=True)
class Plan:
    """How much to measure: the full run, or a tiny one that only proves the code path."""

    quick: bool
    many: int  # agents on the many-agent host
    latency: dict[str, int]  # messages per series
    window: dict[str, float]  # seconds per throughput window
    isolation: dict[str, int]  # messages per isolation series
    mid_turn: int  # messages sent mid-turn
    idle_window: float
    settle: float  # seconds an idle bridge runs before counting starts
    slow_seconds: float
    profile: int  # live turns timed through a proxy, request by request
    a2a: dict[str, int]  # messages per A2A first-byte series
    sdk_js: int  # messages timed through supabase-js's Realtime
    web: int  # cold loads of the web app in Chromium
    startup: int  # runs of each `yui` command timed from a fresh process
    turn_cost: int  # turns on a fresh thread and on a 20,000-row one, counted by PostgreSQL
    scale: int  # agents on one host: idle, then one turn each
    deadline: float  # the whole run, seconds

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls(
                quick=True,
                many=5,
                latency={"live": 5, "poll_only": 2},
                window={"live": 1.5, "poll_only": 2},
                isolation={"live": 2, "poll_only": 1},
                mid_turn=1,
                idle_window=4,
                settle=1,
                slow_seconds=10,
                profile=3,
                a2a={"live": 3, "poll_only": 1},
                sdk_js=5,
                web=2,
                startup=3,
                turn_cost=3,
                scale=20,
                deadline=180,
            )
        return cls(
            quick=False,
            many=100,
            latency={"live": 150, "poll_only": 20},
            window={"live": 8, "poll_only": 10},
            isolation={"live": 20, "poll_only": 8},
            mid_turn=3,
            idle_window=60,
            settle=5,
            slow_seconds=10,
            profile=15,
            a2a={"live": 40, "poll_only": 10},
            sdk_js=100,
            web=20,
            startup=20,
            turn_cost=30,
            scale=1000,
            deadline=900,
        )


@dataclass
class Bench:
    """The run's relay, person, webhook and hosts."""

    plan: Plan
    root: Path
    relay: Relay
    person: Person
    watch: ReplyWatch
    hook: Webhook
    one: Host
    many: Host
    one_idle: Host  # second hosts, so the live and poll-only idle bridges run side by side
    many_idle: Host

    @contextlib.contextmanager
    def bridge(self, host: Host, mode: str, url: str | None = None) -> Iterator[BridgeProcess]:
        process = BridgeProcess(
            self.root,
            host.state,
            url or self.relay.url,
            self.hook.url,
            poll_only=mode == "poll_only",
            anon_key=self.relay.anon_key,
        )
        try:
            process.ready()
            yield process
        except Exception:
            print(f"bench: bridge {host.name} {mode} log:\n{process.tail()}", file=sys.stderr)
            raise
        finally:
            process.stop()

    def side(self, bridge: BridgeProcess) -> Side:
        return Side(self.person, self.watch, self.hook, bridge)


STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"bench: {time.monotonic() - STARTED:5.0f} s  {text}", file=sys.stderr, flush=True)


def setup(plan: Plan, root: Path) -> Bench:
    """Start the relay, lift its limits, sign a person up and pair the hosts."""
    relay = Relay(root, free_port())
    say(f"starting a relay in {root} on port {relay.port}")
    relay.start()
    os.environ.update(YUI_HOME=str(root), YUI_ANON_KEY=relay.anon_key)
    relay.raise_limits()
    person = relay.signup("Bench person")
    hosts = root / "hosts"
    say(f"pairing 2 × 1 + 2 × {plan.many} agents")
    one, one_idle = (pair_host(person, hosts, name, 1) for name in ("one", "one-idle"))
    many, many_idle = (pair_host(person, hosts, name, plan.many) for name in ("many", "many-idle"))
    watch = ReplyWatch(relay.url, relay.anon_key, person.token)
    return Bench(plan, root, relay, person, watch, Webhook(), one, many, one_idle, many_idle)


def meter(bench: Bench, bridge: BridgeProcess) -> CpuMeter:
    """CPU by process: the bridge, the gateway, PostgreSQL, and this bench (the person's side
    and the webhook)."""
    gateway, postmaster = bench.relay.gateway_pid(), bench.relay.postmaster_pid()
    return CpuMeter(
        {
            "bridge": lambda: {bridge.pid},
            "gateway": lambda: {gateway},
            "postgres": lambda: children(postmaster),
            "bench": lambda: {os.getpid()},
        }
    )


def run_active(bench: Bench, mode: str) -> dict[str, Any]:
    """Latency, mid-turn and throughput on the 1-agent host; throughput and isolation on the
    big one."""
    plan = bench.plan
    one_id, ((ref, _),) = bench.one.ids[0], bench.one.agents.items()
    with bench.bridge(bench.one, mode) as bridge:
        side = bench.side(bridge)
        say(f"{mode}: latency, {plan.latency[mode]} messages one at a time")
        lat = latency(side, [one_id], plan.latency[mode], 3 if mode == "live" else 1)
        say(f"{mode}: {plan.mid_turn} messages sent mid-turn")
        mid = mid_turn(side, ref, one_id, plan.mid_turn)
        say(f"{mode}: throughput, 1 agent, {plan.window[mode]} s")
        one = throughput(side, [one_id], plan.window[mode], meter(bench, bridge))
    with bench.bridge(bench.many, mode) as bridge:
        side = bench.side(bridge)
        say(f"{mode}: throughput, {plan.many} agents, {plan.window[mode]} s")
        many = throughput(side, bench.many.ids, plan.window[mode], meter(bench, bridge))
        count = plan.isolation[mode]
        say(f"{mode}: isolation, {count} messages without and {count} beside a slow agent")
        iso = isolation(side, bench.many, count, plan.slow_seconds)
    a2a = run_a2a(bench, mode)
    return {"latency": lat, "mid_turn": mid, "one": one, "many": many, "isolation": iso, "a2a": a2a}


def run_a2a(bench: Bench, mode: str) -> list[float]:
    """Insert → an A2A agent's first byte, through `yui run-a2a` on a host of its own."""
    host = pair_host(bench.person, bench.root / "hosts", f"a2a-{mode}", 1)
    agent = A2AAgent()
    command = ["run-a2a", agent.url, "--relay", bench.relay.url]
    process = BridgeProcess(
        bench.root,
        host.state,
        bench.relay.url,
        "",
        poll_only=mode == "poll_only",
        anon_key=bench.relay.anon_key,
        command=command,
    )
    try:
        process.ready()
        say(f"{mode}: A2A agent's first byte, {bench.plan.a2a[mode]} messages one at a time")
        return first_bytes(
            bench.person, bench.watch, process, agent, host.ids[0], bench.plan.a2a[mode]
        )
    except Exception:
        print(f"bench: bridge a2a {mode} log:\n{process.tail()}", file=sys.stderr)
        raise
    finally:
        process.stop()
        agent.close()


def run_idle(bench: Bench) -> tuple[dict[str, tuple[Idle, Idle]], dict[str, dict[str, int]]]:
    """Four idle bridges side by side, each behind its own counting proxy: 1 and many agents,
    live and poll-only. Returns what each asked and the app's presence for the many agents."""
    plan = bench.plan
    hosts = {
        ("one", "live"): bench.one,
        ("one", "poll_only"): bench.one_idle,
        ("many", "live"): bench.many,
        ("many", "poll_only"): bench.many_idle,
    }
    say(f"idle: 4 bridges side by side, counted for {plan.idle_window} s")
    with contextlib.ExitStack() as stack:
        proxies = {k: CountingProxy(bench.relay.port) for k in hosts}
        for proxy in proxies.values():
            stack.callback(proxy.close)
        bridges = {
            k: stack.enter_context(bench.bridge(host, k[1], proxies[k].url))
            for k, host in hosts.items()
        }
        time.sleep(plan.settle)
        for proxy in proxies.values():
            proxy.reset()
        start = time.monotonic()
        time.sleep(plan.idle_window)
        seconds = time.monotonic() - start
        counts = {k: proxy.snapshot()[0] for k, proxy in proxies.items()}
        measured = {
            k: Idle(counts[k], seconds, bridge.peak_rss_kib()) for k, bridge in bridges.items()
        }
        idle = {mode: (measured["one", mode], measured["many", mode]) for mode in MODES}
        presence = {mode: bench.person.presence(set(hosts["many", mode].ids)) for mode in MODES}
    return idle, presence


def run_profile(bench: Bench) -> dict[str, dict[str, float]]:
    """A short live series through a timing proxy: which requests one turn costs the relay,
    and how long the relay takes to answer each kind (median, ms)."""
    proxy = CountingProxy(bench.relay.port)
    say(f"profile: {bench.plan.profile} live turns through a timing proxy")
    try:
        with bench.bridge(bench.one, "live", proxy.url) as bridge:
            side = bench.side(bridge)
            latency(side, bench.one.ids, 0)  # the warm-up only
            proxy.reset()
            latency(side, bench.one.ids, bench.plan.profile, warm_up=0)
            counts, times = proxy.snapshot()
    finally:
        proxy.close()
    return {
        kind: {
            "per_turn": n / bench.plan.profile,
            "median_ms": report.median(ms(times.get(kind, []))) or 0.0,
        }
        for kind, n in counts.most_common()
    }


def notes(
    plan: Plan, runs: dict[str, ModeRun], presence: dict[str, Any], edit: tuple[float, int]
) -> list[str]:
    edit_ms, state_bytes = edit
    lines = [
        f"every *_burst, *_per_min, *_per_10min limit and the agent and host caps in "
        f"yui_limits were set to {BIG:,} for this run",
        "the person's side is a Realtime socket with the person's token (not REST polling); "
        "the webhook answers {'reply': 'ok'} at once",
    ]
    for mode in MODES:
        kinds = Counter(runs[mode].idle[1].requests)
        top = ", ".join(f"{kind} ×{n}" for kind, n in kinds.most_common()) or "nothing"
        lines += [
            f"idle {plan.many} agents, {mode}, in {plan.idle_window:.0f} s: {top}",
            f"app presence of those {plan.many} agents while idle ({mode}): {presence[mode]}",
            f"isolation, {mode}: the slow agent's turns that reached its webhook meanwhile: "
            f"{runs[mode].isolation.slow_posts}",
        ]
    lines.append(
        f"one edit of the {plan.many}-agent host's state file ({state_bytes:,} bytes: lock, "
        f"read, write, fsync, rename; a turn makes several) takes {edit_ms:.2f} ms (median)"
    )
    return lines


def execute(plan: Plan, out: Path, console: Console) -> None:
    root = Path(tempfile.mkdtemp(prefix="yui-bench-"))
    load = list(os.getloadavg())
    bench: Bench | None = None
    try:
        bench = setup(plan, root)
        machine = report.machine(bench.relay.postgres_version())
        machine["load_average_at_start"] = load
        active = {mode: run_active(bench, mode) for mode in MODES}
        idle, presence = run_idle(bench)
        profile = run_profile(bench)
        say(f"turn cost: {plan.turn_cost} turns on a fresh thread and on a 20,000-row one")
        cost = turn_cost.run(
            bench.relay,
            bench.person,
            root,
            bench.hook.url,
            plan.turn_cost,
            1.2 if plan.quick else turn_cost.SETTLE,  # quick: the path, not the counts
        )
        say(f"scale: {plan.scale:,} agents on one host: idle, then a turn each")
        at_scale = scale.measure(
            bench.relay, root, bench.hook.url, plan.scale, plan.settle, plan.idle_window
        )
        say("the relay alone: throughput through 1 gateway, then 2 on one database")
        relay_gateways = gateways.measure(bench.relay, bench.person, 1.5 if plan.quick else 8.0)
        say(f"supabase-js: {plan.sdk_js} messages to the person's own Realtime channel")
        realtime_js = sdk_js.measure(bench.person, plan.sdk_js)
        say(f"the web app: {plan.web} cold loads in Chromium")
        web_app = web.measure(bench.relay.url, plan.web)
        say(f"the command line: each of 4 commands and the floor {plan.startup} times")
        started = startup.measure(bench.relay.home, bench.one.state, plan.startup)
        edit_ms, state_bytes = state_edit_ms(bench.many.state)
        machine["load_average_at_end"] = list(os.getloadavg())
        runs = {mode: ModeRun(**active[mode], idle=idle[mode]) for mode in MODES}
        rows = figures(runs, plan.many)
        data = {
            "quick": plan.quick,
            "machine": machine,
            "plan": plan.__dict__,
            "latency_breakdown": breakdown({m: runs[m].latency for m in MODES}),
            "throughput_breakdown": breakdown({m: runs[m].many.samples for m in MODES}),
            "turn_requests": profile,
            "turn_cost": cost,
            "cpu_ms_per_turn": cpu_per_turn(runs, plan.many),
            "state_file_edit": {"median_ms": edit_ms, "file_bytes": state_bytes},
            "idle_requests": {
                f"{size} agents, {mode}": dict(idle_run.requests)
                for mode in MODES
                for size, idle_run in zip((1, plan.many), idle[mode], strict=True)
            },
            "presence_while_idle": presence,
            "realtime_js": realtime_js,
            "web_app": web_app,
            "cli_startup": started,
            "relay_gateways": relay_gateways,
            "scale": at_scale,
            "notes": notes(plan, runs, presence, (edit_ms, state_bytes)),
        }
        report.show(data, rows, console)
        console.print(web.table(web_app), markup=False, highlight=False)
        console.print(startup.table(started))
        console.print(gateways.table(relay_gateways))
        console.print(scale.table(at_scale))
        report.write(out, data, rows)
        say(f"wrote {out}")
    finally:
        if bench is not None:
            bench.watch.close()
            bench.hook.close()
        say("removing the relay")
        if (root / "relay").exists():
            (bench.relay if bench else Relay(root, 0)).close()
        shutil.rmtree(root, ignore_errors=True)


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny samples: proves the path")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results.json goes")
    args = parser.parse_args(argv)
    plan = Plan.make(args.quick)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    signal.signal(signal.SIGTERM, _interrupt)
    deadline = threading.Timer(plan.deadline, os.kill, (os.getpid(), signal.SIGINT))
    deadline.daemon = True
    deadline.start()
    try:
        execute(plan, args.out, Console(width=130))
    except KeyboardInterrupt:
        say("interrupted (Ctrl-C, SIGTERM or the run's deadline); everything was removed")
        return 130
    finally:
        deadline.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
