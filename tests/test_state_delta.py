"""What `RunState.apply` says each event changed: all a renderer needs to know what to repaint.

No Textual here: the deltas are the engine's word, and the app only merges and follows them.
"""

from __future__ import annotations

from typing import get_args

import pytest

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import NOTHING, Changes, Delta
from evaltui.engine.stream.events import PairStatus, SampleError
from evaltui.engine.stream.pair import Failure
from evaltui.engine.stream.state import RunState

ERR = SampleError("http", 500, "boom", 3)
MD = frozenset({("m", "d")})


def planned(*pairs: tuple[str, str], total: int = 10, shards: int = 1) -> RunState:
    s = RunState()
    s.apply(ev.RunStarted("/w", tuple(dict.fromkeys(m for m, _ in pairs)), tuple(dict.fromkeys(d for _, d in pairs))))
    for m, d in pairs:
        s.apply(ev.DatasetPlanned(m, d, total, shards))
    return s


def running(total: int = 10, shards: int = 1) -> RunState:
    s = planned(("m", "d"), ("m", "e"), total=total, shards=shards)
    s.apply(ev.DatasetStarted("m", "d", total, total))
    return s


def failed() -> RunState:
    s = running()
    s.apply(ev.SampleFailed("m", "d", 0, 1, ERR))
    s.apply(ev.DatasetInferred("m", "d", PairStatus.FAIL, 9, 1))
    return s


def finished() -> RunState:
    s = failed()
    s.apply(ev.RunFinished(1, False))
    return s


# (a state, an event, what its delta must say); one row at least for every kind of event
CASES: list[tuple[str, RunState, ev.Event, Delta]] = [
    ("a sample answered: its row", running(), ev.SampleFinished("m", "d", 0, 1), Delta(MD)),
    ("a sample failed: its row and a line in the failures pane", running(), ev.SampleFailed("m", "d", 0, 1, ERR), Delta(MD, failures=1)),
    ("a sample tried again as a whole: its row", running(), ev.SampleRetried("m", "d", 0, 1, 2, ERR), Delta(MD)),
    ("a conversation's request answered before its last: its row (the requests counted)", running(), ev.TurnAnswered("m", "d", 0, 1, 0), Delta(MD)),
    ("the load: the strip shows it on its clock", running(), ev.ModelLoad("m", 3, 8, 1, 10), NOTHING),
    ("a replica ejected: the strip and the model's breakdown", running(), ev.ReplicaStateChanged("m", "http://a", "ejected", "connect: refused", 1.0), Delta(fleet=True)),
    ("every replica down: the same", running(), ev.ReplicasDown("m", 300.0, "http://a: connect: refused"), Delta(fleet=True)),
    ("a beat: the strip shows its age on its clock", running(), ev.Heartbeat(1.0), NOTHING),
    ("the simulator's address: shown nowhere", running(), ev.SimulatorStarted("http://127.0.0.1:1"), NOTHING),
    ("a first shard runs: the pair runs", planned(("m", "d"), shards=2), ev.ShardStatusChanged("m", "d", 0, 2, PairStatus.RUNNING, 5, 0, 0), Delta(MD, statuses=True)),
    ("a second shard runs: its row only", running(shards=2), ev.ShardStatusChanged("m", "d", 1, 2, PairStatus.RUNNING, 5, 0, 0), Delta(MD)),
    ("a pair starts: its row, its status, its earlier failures gone", failed(), ev.DatasetStarted("m", "d", 10, 1), Delta(MD, statuses=True, failures_reset=True)),
    ("inference done: its row and status", running(), ev.DatasetInferred("m", "d", PairStatus.DONE, 10, 0), Delta(MD, statuses=True)),
    ("inference failed: and its part in the session is over", running(), ev.DatasetInferred("m", "d", PairStatus.FAIL, 9, 1), Delta(MD, statuses=True, settled=MD)),
    ("scoring", running(), ev.DatasetScoring("m", "d"), Delta(MD, statuses=True)),
    ("its judge's verdicts so far (coalesced): its row", running(), ev.PairJudged("m", "d", "grader", 3, 10), Delta(MD)),
    ("scored: the leaderboard too, and its part is over", running(), ev.DatasetScored("m", "d", "accuracy", 50.0), Delta(MD, statuses=True, scores=True, settled=MD)),
    ("scoring failed: the same", running(), ev.DatasetScored("m", "d", "accuracy", None, "boom"), Delta(MD, statuses=True, scores=True, settled=MD)),
    # a pair planned names its own row, not every row: at 10,000 datasets each tick of the
    # planning had the session look at every row (a new pair's row goes in in the state's order)
    ("a pair planned: its row", RunState(), ev.DatasetPlanned("m", "d", 10, 1), Delta(MD)),
    ("a failed pair planned again: its row, its status, its failures anew", failed(), ev.DatasetPlanned("m", "d", 10, 1), Delta(MD, statuses=True, failures_reset=True)),
    (
        "a pair planned with the score an earlier run kept: and the leaderboard",
        RunState(), ev.DatasetPlanned("m", "d", 10, 1, 10, 0, PairStatus.SCORED, "accuracy", 70.0), Delta(MD, statuses=True, scores=True),
    ),
    ("a pair starts with no failures kept: its row and status", planned(("m", "d")), ev.DatasetStarted("m", "d", 10, 10), Delta(MD, statuses=True)),
    (
        "a retry: every row, the leaderboard (its pairs' scores are gone), the failures anew, live again, the pairs it took up",
        finished(),
        ev.RetryStarted((("m", "d"),)),
        Delta(every_pair=True, statuses=True, scores=True, failures_reset=True, live=True, retried=MD),
    ),
    ("the watcher gave up: every row", running(), ev.ScoringSkipped((("m", "e"),), "stale"), Delta(every_pair=True, statuses=True)),
    ("the run began: every row, the leaderboard, live", RunState(), ev.RunStarted("/w", ("m",), ("d",)), Delta(every_pair=True, statuses=True, scores=True, live=True)),
    ("a notice: said to the user", running(), ev.Notice("careful", "warning"), Delta(notices=(ev.Notice("careful", "warning"),))),
    ("the run ended: every row, the final leaderboard, no longer live", failed(), ev.RunFinished(1, False), Delta(every_pair=True, statuses=True, scores=True, live=False)),
]


@pytest.mark.parametrize(("state", "event", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_event_says_what_a_repaint_needs(state: RunState, event: ev.Event, expected: Delta) -> None:
    assert state.apply(event) == expected


def test_every_kind_of_event_has_its_delta_said_above() -> None:
    assert {type(c[2]) for c in CASES} == set(get_args(ev.Event))


def test_the_events_that_come_by_the_thousand_share_one_delta_per_pair() -> None:
    s = running()
    s.apply(ev.DatasetStarted("m", "e", 10, 10))
    d = [s.apply(ev.SampleFinished("m", "d", 0, i)) for i in range(3)]
    assert d[0] is d[1] is d[2]
    assert s.apply(ev.SampleFinished("m", "e", 0, 0)) == Delta(frozenset({("m", "e")}))
    f = [s.apply(ev.SampleFailed("m", "d", 0, i, ERR)) for i in range(3, 5)]
    assert f[0] is f[1] and f[0].failures == 1
    assert s.pairs[("m", "d")].completed == 3 and s.pairs[("m", "d")].failed == 2  # counted all the same


def test_live_goes_with_the_run_and_its_retries() -> None:
    s = RunState()
    assert not s.live
    s.apply(ev.RunStarted("/w", ("m",), ("d",)))
    assert s.live
    s.apply(ev.RunFinished(1, False))
    assert not s.live
    s.apply(ev.RetryStarted((("m", "d"),)))
    assert s.live


def test_newest_failures_are_the_ones_a_batch_of_deltas_counted() -> None:
    s = RunState(max_failures=3)
    s.apply(ev.DatasetPlanned("m", "d", 10, 1))
    s.apply(ev.SampleFailed("m", "d", 0, 0, ERR))
    batch = Changes()
    for i in (1, 2):
        batch.add(s.apply(ev.SampleFailed("m", "d", 0, i, ERR)))
    assert batch.failures == 2
    assert s.newest_failures(batch.failures) == [Failure("m", "d", 1, ERR), Failure("m", "d", 2, ERR)]
    for i in range(3, 8):
        batch.add(s.apply(ev.SampleFailed("m", "d", 0, i, ERR)))
    assert [f.sample_index for f in s.newest_failures(batch.failures)] == [5, 6, 7]  # the bounded list let go of the rest


def test_changes_merge_a_batch_into_one_repaint() -> None:
    s = running()
    batch = Changes()
    for e in [ev.SampleFinished("m", "d", 0, 1), ev.SampleFinished("m", "e", 0, 1), ev.Heartbeat(1.0), ev.Notice("one"), ev.Notice("two")]:
        batch.add(s.apply(e))
    assert batch.pairs == {("m", "d"), ("m", "e")}
    assert not (batch.statuses or batch.scores or batch.failures_reset) and batch.live is None
    assert [n.message for n in batch.notices] == ["one", "two"]
    batch.add(s.apply(ev.DatasetScored("m", "d", "accuracy", 50.0)))
    assert batch.statuses and batch.scores and batch.pairs == {("m", "d"), ("m", "e")}
    for e in [ev.RunFinished(1, False), ev.RetryStarted((("m", "d"),)), ev.SampleFinished("m", "d", 0, 2)]:
        batch.add(s.apply(e))
    assert batch.pairs is None  # every row
    assert batch.live is True and batch.failures_reset  # the last word on liveness is the retry's


def test_changes_of_everything_repaint_it_all_whatever_the_batch() -> None:
    batch = Changes(everything=True)
    batch.add(running().apply(ev.SampleFinished("m", "d", 0, 1)))
    assert batch.pairs is None and batch.statuses and batch.scores and batch.failures_reset
    assert batch.live is None and batch.failures == 0 and batch.notices == []


@pytest.mark.parametrize("kept", [0, 1, 5, 1000])
def test_a_pair_started_again_forgets_exactly_its_own_kept_failures(kept: int) -> None:
    """RunState.failures counts each pair's failures among those it keeps, so starting a pair
    again need not walk them all: what stays is what a walk would keep, through the bound
    letting the oldest go."""
    import random
    from collections import deque

    rng = random.Random(kept)
    state = RunState(max_failures=kept)
    walked: deque[Failure] = deque(maxlen=kept)  # the list as a walk of every failure made it
    err = ERR
    for step in range(3000):
        model, dataset = "m", f"d{rng.randrange(8)}"
        if rng.random() < 0.85:
            state.apply(ev.SampleFailed(model, dataset, 0, step, err))
            walked.append(Failure(model, dataset, step, err))
        else:
            state.apply(ev.DatasetStarted(model, dataset, 10, 10) if rng.random() < 0.5 else ev.DatasetPlanned(model, dataset, 10, 1, 0, 0, PairStatus.PENDING))
            kept_ones = [f for f in walked if (f.model, f.dataset) != (model, dataset)]
            walked.clear()
            walked.extend(kept_ones)
        assert list(state.failures) == list(walked)


@pytest.mark.parametrize("status", [PairStatus.PENDING, PairStatus.RUNNING, PairStatus.DONE, PairStatus.FAIL])
@pytest.mark.parametrize("before", ["planned", "running"])
def test_a_one_shard_pairs_status_is_what_combining_its_shards_says(status: PairStatus, before: str) -> None:
    """The fold takes a one-shard pair's status from its shard without combining (most pairs
    have one): the same status combine_shards gives, from whichever status the pair had."""
    from evaltui.engine.stream.pair import combine_shards

    s = planned(("m", "d")) if before == "planned" else running()
    s.apply(ev.ShardStatusChanged("m", "d", 0, 1, status, 10, 0, 0, "why" if status == PairStatus.FAIL else ""))
    assert s.pairs[("m", "d")].status == combine_shards({0: status}, 1)
    two = planned(("m", "d"), shards=2)  # and a split pair's still combines: one shard done is not the pair done
    two.apply(ev.ShardStatusChanged("m", "d", 0, 2, status, 5, 0, 0))
    assert two.pairs[("m", "d")].status == combine_shards({0: status}, 2)
