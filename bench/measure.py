"""The measurements, each against one running bridge: latency one message at a time, a message
sent mid-turn, closed-loop throughput, isolation from one slow agent, an idle bridge's requests
and memory, and the cost of one edit of a host's state file."""

from __future__ import annotations

import itertools
import queue
import random
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.bridge import POLL_INTERVAL, BridgeProcess
from bench.cpu import CpuMeter
from bench.relay import Host, Person
from bench.watch import ReplyWatch
from bench.webhook import Webhook
from state.host import HostState

WARM_UP = 3  # unmeasured messages before a latency series (connections, caches)
REPLY_TIMEOUT = 30.0


@dataclass
class Sample:
    """One message's life, in epoch seconds: sent (just before the insert), inserted (the
    insert answered), post (the webhook got the turn), visible (the reply reached the
    person's socket), and the bridge's own events for it."""

    row: str
    sent: float
    inserted: float
    post: float
    visible: float
    turn: float | None = None
    reply: float | None = None


@dataclass
class Side:
    """What a measurement needs: the person, their socket, the webhook and the bridge."""

    person: Person
    watch: ReplyWatch
    hook: Webhook
    bridge: BridgeProcess

    @property
    def phase(self) -> float:
        """A poll-only bridge reads every 2 s: a person writes at a random moment of that
        cycle, so each poll-only message waits a random 0–2 s first (live: a 10 ms gap)."""
        return POLL_INTERVAL if self.bridge.poll_only else 0.0

    def sample(self, row: str, sent: float, inserted: float) -> Sample:
        """A sent row's life, once its reply is visible (waiting for it)."""
        visible = self.watch.wait(row, REPLY_TIMEOUT)
        turn, reply = self.bridge.turn_at.get(row), self.bridge.reply_at.get(row)
        return Sample(row, sent, inserted, self.hook.arrived[row], visible, turn, reply)


def one_message(side: Side, agent_id: str) -> Sample:
    """Send one message, wait for its reply to be visible and its row acked."""
    sent = time.time()
    row = side.person.say(agent_id)
    sample = side.sample(row, sent, time.time())
    side.bridge.wait_acked(row)
    return sample


def latency(side: Side, agent_ids: list[str], count: int, warm_up: int = WARM_UP) -> list[Sample]:
    """`count` messages one at a time, each to the next agent of `agent_ids` in turn, after
    `warm_up` unmeasured ones."""
    agents = itertools.cycle(agent_ids)
    for _ in range(warm_up):
        one_message(side, next(agents))
    samples = []
    for _ in range(count):
        time.sleep(random.uniform(0, side.phase) if side.phase else 0.01)
        samples.append(one_message(side, next(agents)))
    return samples


def mid_turn(side: Side, ref: str, agent_id: str, count: int, turn: float = 1.0) -> list[float]:
    """A second message sent 0.2 s into a 1 s turn (people often write twice in a row): seconds
    from that turn's answer (the bridge's `answer` event) to the second message's POST."""
    gaps = []
    for _ in range(count):
        side.hook.make_slow(ref, turn)
        first = side.person.say(agent_id)
        deadline = time.monotonic() + REPLY_TIMEOUT
        while first not in side.hook.arrived and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.2)
        second = side.person.say(agent_id)
        side.watch.wait(first, REPLY_TIMEOUT)
        side.hook.make_slow(None)
        side.watch.wait(second, REPLY_TIMEOUT)
        side.bridge.wait_acked(second)
        gaps.append(side.hook.arrived[second] - side.bridge.answer_at[first])
    return gaps


@dataclass
class Throughput:
    turns: int  # replies that became visible inside the window
    seconds: float
    samples: list[Sample]
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by process group

    @property
    def per_second(self) -> float:
        return self.turns / self.seconds


class ClosedLoop:
    """Per agent, one message in flight: the next is sent the moment the person sees the
    reply to the previous one (a few sender threads share the work)."""

    SENDERS = 8

    def __init__(self, side: Side, agent_ids: list[str]) -> None:
        self.side = side
        self.agents = set(agent_ids)
        self.sent: dict[str, tuple[float, float]] = {}  # row → (sent, inserted)
        self.todo: queue.Queue[str | None] = queue.Queue()
        self.running = True
        self.lock = threading.Lock()
        for agent_id in agent_ids:
            self.todo.put(agent_id)
        self.threads = [
            threading.Thread(target=self._send, daemon=True)
            for _ in range(min(self.SENDERS, len(agent_ids)))
        ]

    def _send(self) -> None:
        while (agent_id := self.todo.get()) is not None:
            sent = time.time()
            row = self.side.person.say(agent_id)
            with self.lock:
                self.sent[row] = (sent, time.time())

    def heard(self, agent_id: str) -> None:
        if self.running and agent_id in self.agents:
            self.todo.put(agent_id)

    def run(self, window: float) -> Throughput:
        self.side.watch.on_reply = self.heard
        start = time.time()
        for thread in self.threads:
            thread.start()
        time.sleep(window)
        self.running = False
        end = time.time()
        for _ in self.threads:
            self.todo.put(None)
        for thread in self.threads:
            thread.join(timeout=REPLY_TIMEOUT)
        self.side.watch.on_reply = None
        samples = self._drain()
        done = sum(1 for s in samples if start <= s.visible <= end)
        return Throughput(done, end - start, samples)

    def _drain(self) -> list[Sample]:
        """Wait for every reply still due (so the next phase starts clean)."""
        by_time = sorted(self.sent.items(), key=lambda item: item[1])
        samples = [self.side.sample(row, *times) for row, times in by_time]
        if samples:
            self.side.bridge.wait_acked(samples[-1].row)
        return samples


def throughput(side: Side, agent_ids: list[str], window: float, meter: CpuMeter) -> Throughput:
    """The closed loop over `window`; CPU is counted from its start until every reply due
    has been seen (so it divides by every turn, drained ones included)."""
    meter.start()
    result = ClosedLoop(side, agent_ids).run(window)
    result.cpu = meter.stop()
    return result


class SlowAgent:
    """Keeps one agent's 10-second turns going back to back while the others are measured."""

    def __init__(self, side: Side, ref: str, agent_id: str, seconds: float) -> None:
        self.side, self.ref, self.agent_id = side, ref, agent_id
        self.stop = threading.Event()
        self.rows: list[str] = []
        side.hook.make_slow(ref, seconds)
        self.thread = threading.Thread(target=self._keep, daemon=True)

    def _keep(self) -> None:
        while not self.stop.is_set():
            row = self.side.person.say(self.agent_id)
            self.rows.append(row)
            self.side.watch.wait(row, REPLY_TIMEOUT + self.side.hook.slow_seconds)

    def __enter__(self) -> SlowAgent:
        self.thread.start()
        deadline = time.monotonic() + REPLY_TIMEOUT
        while not (self.rows and self.rows[0] in self.side.hook.arrived):
            if time.monotonic() > deadline:
                raise TimeoutError("the slow agent's first turn never reached its webhook")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.side.hook.make_slow(None)  # the turn still waiting answers at once
        self.thread.join(timeout=REPLY_TIMEOUT)
        if self.rows:
            self.side.bridge.wait_acked(self.rows[-1])


@dataclass
class Isolation:
    baseline: list[Sample]
    beside_slow: list[Sample]
    slow_posts: int  # the slow agent's turns that reached its webhook meanwhile


def isolation(side: Side, host: Host, count: int, seconds: float = 10.0) -> Isolation:
    """The other agents' latency, first with every agent quick, then while the first agent's
    webhook takes `seconds` per turn."""
    (slow_ref, slow_id), *others = host.agents.items()
    other_ids = [agent_id for _, agent_id in others]
    baseline = latency(side, other_ids, count, warm_up=1)
    with SlowAgent(side, slow_ref, slow_id, seconds) as slow:
        beside = latency(side, other_ids, count, warm_up=0)
        posts = sum(1 for row in slow.rows if row in side.hook.arrived)
    return Isolation(baseline, beside, posts)


def state_edit_ms(path: Path, edits: int = 40) -> tuple[float, int]:
    """The median ms of one edit of a copy of a host's state file (lock, read, write, fsync,
    rename, as every turn does several times), and the file's size in bytes."""
    probe = path.with_name("probe.json")
    shutil.copyfile(path, probe)
    state, times = HostState(probe), []
    for n in range(edits // 2):
        for edit in (state.add_acks, state.remove_acks):
            began = time.perf_counter()
            edit([f"probe-{n}"])
            times.append((time.perf_counter() - began) * 1000)
    return sorted(times)[len(times) // 2], path.stat().st_size


@dataclass
class Idle:
    """What one idle bridge asked of the relay in a window, and its peak memory."""

    requests: Counter[str]
    seconds: float
    peak_rss_kib: int

    @property
    def http(self) -> int:
        return sum(n for kind, n in self.requests.items() if not kind.startswith("websocket "))

    @property
    def frames(self) -> int:
        return sum(n for kind, n in self.requests.items() if kind.startswith("websocket "))

    @property
    def http_per_minute(self) -> float:
        return self.http * 60 / self.seconds

    @property
    def frames_per_minute(self) -> float:
        return self.frames * 60 / self.seconds
