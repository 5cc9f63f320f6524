"""The engine's decisions on their own (`bridges/engine/plan.py`): one test per rule of "Exactly
once" in the README, and the rules around them, with rows made here and no relay, no lock and
no clock but the one passed in."""

from __future__ import annotations

from bridges.client.rows import AgentInfo
from bridges.engine.plan import (
    MAX_TURN_FAILURES,
    Read,
    Running,
    due,
    next_due,
    plan,
)
from bridges.engine.turns import Turn, turn_key
from tests.helpers.plan import COACH, FLOOR, SAGE, ids, ledger, of, row, stop_row

# --- one turn at a time per agent, what waits goes in together ----------------------------------


def test_the_persons_rows_become_one_turn_oldest_first() -> None:
    rows = [row("hi"), row("how are you")]
    decided = plan(Read(rows), ledger())
    assert ids(of(decided).turn) == ids(rows)
    assert set(ids(rows)) <= decided.taken


def test_rows_sent_mid_turn_wait_and_then_go_together() -> None:
    first, second, third = row("one"), row("two"), row("three")
    running = {COACH: [first["id"]]}
    mid = plan(
        Read([first, second, third]), ledger(taken=frozenset([first["id"]]), running=running)
    )
    assert of(mid).turn == [] and second["id"] not in mid.taken
    after = plan(Read([second, third]), ledger(taken=mid.taken))  # the turn ended: read again
    assert ids(of(after).turn) == [second["id"], third["id"]]


def test_a_read_begun_mid_turn_starts_no_turn() -> None:
    rows = [row("two"), row("three")]
    stale = plan(Read(rows, stale=frozenset([COACH])), ledger())
    assert of(stale).turn == [] and not set(ids(rows)) & stale.taken


def test_agents_run_in_parallel() -> None:
    busy, other = row("busy"), row("other", SAGE)
    decided = plan(Read([busy, other]), ledger(running={COACH: ["earlier"]}))
    assert of(decided).turn == [] and ids(of(decided, SAGE).turn) == [other["id"]]


def test_a_turn_holds_at_most_a_batch() -> None:
    rows = [row(f"m{n}") for n in range(5)]
    decided = plan(Read(rows), ledger(batch=3))
    assert ids(of(decided).turn) == ids(rows[:3])
    assert not set(ids(rows[3:])) & decided.taken  # the rest go next time


# --- a crash: replay exactly the turn in flight; an answered row is only acked ------------------


def test_a_turn_in_flight_before_a_crash_is_replayed_alone_with_its_key() -> None:
    a, b, c = row("a"), row("b"), row("c")
    inflight = {COACH: [a["id"], b["id"]]}
    first = plan(Read([a, b, c]), ledger(inflight=inflight))
    assert ids(of(first).look_up) == [a["id"], b["id"]] and of(first).turn == []
    looked = frozenset([a["id"], b["id"]])
    decided = plan(Read([a, b, c]), ledger(inflight=inflight, looked_up=looked))
    assert ids(of(decided).turn) == [a["id"], b["id"]]
    replayed = Turn(AgentInfo(COACH, "Coach", "coach", "coach"), of(decided).turn)
    assert replayed.key == turn_key([a["id"], b["id"]])
    assert c["id"] not in decided.taken  # the rest is the next turn


def test_a_row_delivered_before_is_looked_up_before_it_is_asked() -> None:
    delivered = row("asked before", delivered_at=FLOOR.isoformat())
    first = plan(Read([delivered]), ledger())
    assert ids(of(first).look_up) == [delivered["id"]] and of(first).turn == []
    assert delivered["id"] not in first.taken


def test_a_row_whose_reply_waits_in_the_outbox_is_looked_up_not_asked() -> None:
    """No mark and no turn in flight: the turn ended with its reply queued while the relay was
    away (its ✓ waits to ride with the ack), then the bridge died."""
    answered = row("answered, reply not written")
    first = plan(Read([answered]), ledger(replied=frozenset([answered["id"]])))
    assert ids(of(first).look_up) == [answered["id"]] and of(first).turn == []


def test_a_row_already_answered_is_only_acked() -> None:
    answered = row("answered before", delivered_at=FLOOR.isoformat())
    fresh = row("new")
    looked = ledger(looked_up=frozenset([answered["id"]]), answered=frozenset([answered["id"]]))
    decided = plan(Read([answered, fresh]), looked)
    assert of(decided).answered == [answered["id"]]
    assert ids(of(decided).turn) == [fresh["id"]]
    assert answered["id"] in decided.taken


def test_a_delivered_row_not_answered_is_asked_again() -> None:
    delivered = row("asked, never answered", delivered_at=FLOOR.isoformat())
    decided = plan(Read([delivered]), ledger(looked_up=frozenset([delivered["id"]])))
    assert of(decided).answered == [] and ids(of(decided).turn) == [delivered["id"]]


def test_rows_waiting_for_their_ack_are_not_asked_again() -> None:
    acked = row("answered, ack not written yet")
    decided = plan(Read([acked]), ledger(acks=frozenset([acked["id"]])))
    assert decided.agents == []


# --- commands and Controls -----------------------------------------------------------------------


def test_a_command_goes_at_once_even_mid_turn() -> None:
    running, command, words = row("long task"), row("/status"), row("and then")
    decided = plan(
        Read([running, command, words]),
        ledger(taken=frozenset([running["id"]]), running={COACH: [running["id"]]}),
    )
    assert ids(of(decided).commands) == [command["id"]]
    assert of(decided).turn == []  # the words wait for the running turn
    assert command["id"] in decided.taken and words["id"] not in decided.taken


def test_a_command_is_never_part_of_a_turn() -> None:
    before, command, after = row("before"), row("/reset"), row("after")
    decided = plan(Read([before, command, after]), ledger())
    assert ids(of(decided).commands) == [command["id"]]
    assert ids(of(decided).turn) == [before["id"], after["id"]]


def test_a_controls_request_is_answered_and_never_a_turn() -> None:
    request = row("controls: list soul", kind="control", meta={"v": 1, "op": "list"})
    decided = plan(Read([request]), ledger())
    assert ids(of(decided).controls) == [request["id"]] and of(decided).turn == []
    assert request["id"] in decided.taken


# --- Stop -----------------------------------------------------------------------------------------


def test_stop_abandons_the_running_turn_and_drops_what_waits() -> None:
    running, waiting, stop = row("running"), row("waiting"), stop_row()
    decided = plan(
        Read([running, waiting, stop], stale=frozenset([COACH])),
        ledger(taken=frozenset([running["id"]]), running={COACH: [running["id"]]}),
    )
    (stopped,) = of(decided).stops
    assert stopped.abandons and stopped.row is stop
    assert stopped.dropped == (running["id"], waiting["id"])
    assert of(decided).turn == []
    assert {waiting["id"], stop["id"]} <= decided.taken


def test_stop_keeps_what_the_person_sent_after_it() -> None:
    waiting, stop, later = row("waiting"), stop_row(), row("after the stop")
    decided = plan(Read([waiting, stop, later]), ledger())
    (stopped,) = of(decided).stops
    assert not stopped.abandons and stopped.dropped == (waiting["id"],)
    assert ids(of(decided).turn) == [later["id"]]


def test_two_stops_abandon_the_turn_once() -> None:
    running, first, second = row("running"), stop_row(), stop_row()
    decided = plan(
        Read([running, first, second], stale=frozenset([COACH])),
        ledger(taken=frozenset([running["id"]]), running={COACH: [running["id"]]}),
    )
    assert [(s.abandons, s.dropped) for s in of(decided).stops] == [
        (True, (running["id"],)),
        (False, ()),
    ]


# --- a failed turn is asked again, the very same turn -------------------------------------------


def test_a_failed_turn_is_asked_again_with_the_same_rows_and_key() -> None:
    rows = [row("one"), row("two")]
    turn = Turn(AgentInfo(COACH, "Coach", "coach", "coach"), rows)
    failed = Running(turn)
    assert failed.failed(after=7.0, now=100.0) == 7.0  # the agent's Retry-After wins
    assert due([failed], now=106.9) == [] and next_due([failed], now=106.0) == 1.0
    (again,) = due([failed], now=107.0)
    assert again.turn is turn and again.turn.key == turn_key(ids(rows))
    newer = row("sent while it waits")
    waiting = plan(
        Read([*rows, newer]),
        ledger(taken=frozenset(ids(rows)), running={COACH: ids(rows)}),
    )
    assert of(waiting).turn == []  # the new row doesn't join the failed turn


def test_failed_turns_wait_longer_each_time() -> None:
    failed = Running(Turn(AgentInfo(COACH, "Coach", "coach", "coach"), [row("x")]))
    waits = [failed.failed(after=None, now=0.0) for _ in range(8)]
    assert 2.0 <= waits[0] < 3.0 and 4.0 <= waits[1] < 5.0
    assert 60.0 <= waits[-1] < 61.0  # doubling, up to a minute, with up to a second of jitter
    assert next_due([], now=0.0) is None


def test_a_turn_that_keeps_crashing_is_asked_again_then_given_up() -> None:
    """A bug or a poison answer waits like any failure, but only so many times: then the engine
    gives the turn up (the person is told), so the agent isn't wedged for good."""
    crashing = Running(Turn(AgentInfo(COACH, "Coach", "coach", "coach"), [row("x")]))
    assert MAX_TURN_FAILURES == 3
    first, second = crashing.crashed(now=0.0), crashing.crashed(now=0.0)
    assert first is not None and 2.0 <= first < 3.0  # a failed turn's waits
    assert second is not None and 4.0 <= second < 5.0
    assert crashing.crashed(now=0.0) is None and crashing.failures == MAX_TURN_FAILURES


def test_waiting_on_the_agent_is_not_a_crash() -> None:
    """A webhook down or answering 500 is asked again for as long as it takes."""
    waiting = Running(Turn(AgentInfo(COACH, "Coach", "coach", "coach"), [row("x")]))
    for _ in range(10):
        waiting.failed(after=None, now=0.0)
    assert waiting.failures == 0 and waiting.crashed(now=0.0) is not None


# --- what isn't the agent's, and what the engine forgets ------------------------------------------


def test_rows_at_or_before_the_floor_are_not_the_agents() -> None:
    old = {**row("before pairing"), "created_at": FLOOR.isoformat()}
    assert plan(Read([old]), ledger()).agents == []


def test_a_row_for_an_agent_not_served_yet_asks_to_learn_the_agents() -> None:
    stranger = row("hello", agent="agent-new")
    decided = plan(Read([stranger]), ledger())
    assert decided.unknown and decided.agents == []


def test_a_whole_read_forgets_rows_that_are_done() -> None:
    live, gone = row("still unfinished"), row("handled since")
    taken = frozenset([live["id"], gone["id"], "a-turn-row"])
    whole = plan(
        Read([live], stale=frozenset([COACH])), ledger(taken=taken, live=frozenset(["a-turn-row"]))
    )
    assert whole.taken == {live["id"], "a-turn-row"}
    partial = plan(Read([live], whole=False), ledger(taken=taken))
    assert partial.taken == taken


def test_the_plan_leaves_the_ledger_as_it_was() -> None:
    rows = [row("a"), stop_row(), row("/cmd")]
    before = ledger(running={COACH: ["x"]}, taken=frozenset(["x"]))
    plan(Read(rows), before)
    assert before.running == {COACH: ["x"]} and before.taken == {"x"}
