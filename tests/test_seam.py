"""The engine seam a front end consumes: typed events, RunState, and the runner's queries.

RunState is checked on hand-made events with injected clocks (what snapshot tests rely on);
everything the runner answers is checked against a real run on the simulated server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import failures_of
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, write_jsonl, write_plan

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus, SampleError
from evaltui.engine.stream.pair import Failure
from evaltui.engine.stream.state import RunState
from evaltui.plan import load_plan
from evaltui.sim import Faults, ModelProfile, SimConfig

ALL_EVENTS: list[Any] = list(ev.Event.__args__)  # type: ignore[attr-defined]


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------- events


def test_events_are_immutable_typed_and_narrowed_with_match() -> None:
    err = SampleError("http", 400, "prompt [too] long", 1)
    failed = ev.SampleFailed("m", "d", 0, 7, err)
    with pytest.raises(AttributeError):
        failed.sample_index = 8  # type: ignore[misc]
    match failed:
        case ev.SampleFinished():
            pytest.fail("narrowed to the wrong event")
        case ev.SampleFailed(model=m, dataset=d, sample_index=i, error=SampleError(type=kind, status=status)):
            assert (m, d, i, kind, status) == ("m", "d", 7, "http", 400)
        case _:
            pytest.fail("not narrowed")
    # No field shadows a tuple method (the old `index` did), none has a mutable default.
    for kind in ALL_EVENTS:
        assert not set(kind._fields) & set(dir(tuple)), kind
        for name, default in kind._field_defaults.items():
            assert isinstance(default, (str, int, float, bool, type(None), tuple, PairStatus)) or type(default).__name__ == "mappingproxy", (kind, name)
    a, b = ev.RunFinished(0, False), ev.RunFinished(1, False)
    assert a.summary_files is b.summary_files
    with pytest.raises(TypeError):
        a.summary_files["txt"] = "x"  # type: ignore[index]


def test_pair_status_is_a_str_enum_that_prints_and_serialises_as_its_value() -> None:
    assert PairStatus.FAIL == "fail" and f"{PairStatus.SCORED}" == "scored"
    assert json.dumps({"s": PairStatus.DONE}) == '{"s": "done"}'
    assert {s.value for s in PairStatus} == {"pending", "running", "done", "fail", "scoring", "scored", "error", "skipped", "stopped"}


# ---------------------------------------------------------------------------- RunState


def test_run_state_never_raises_on_pairs_it_has_not_seen() -> None:
    err = SampleError("timeout", None, "slow", 3)
    for e in [
        ev.SampleFinished("m", "a", 0, 1),
        ev.SampleFailed("m", "b", 0, 1, err),
        ev.ShardStatusChanged("m", "c", 1, 2, PairStatus.RUNNING, 5, 0, 0),
        ev.DatasetInferred("m", "d", PairStatus.FAIL, 1, 2),
        ev.DatasetScoring("m", "e"),
        ev.DatasetScored("m", "f", "accuracy", 50.0),
        ev.DatasetStarted("m", "g", 10, 10),
        ev.ScoringSkipped((("m", "h"),), "why"),
        ev.RetryStarted((("m", "i"),)),
        ev.ModelLoad("m", 3, 8, 1, 10),
    ]:
        RunState().apply(e)  # a late subscriber's first events: no KeyError
    s = RunState()
    s.apply(ev.SampleFailed("x", "y", 0, 4, err))
    assert s.pairs[("x", "y")].failed == 1 and failures_of(s, "x", "y") == [Failure("x", "y", 4, err)]
    assert s.models == ["x"] and s.datasets == ["y"]


def test_run_state_with_injected_clocks_is_deterministic() -> None:
    mono, wall = FakeClock(100.0), FakeClock(5000.0)
    s = RunState(clock=mono, wall_clock=wall)
    s.apply(ev.RunStarted("/w", ("m",), ("d",)))
    s.apply(ev.DatasetPlanned("m", "d", 100, 1))
    s.apply(ev.DatasetStarted("m", "d", 100, 100))
    for i in range(20):
        s.apply(ev.SampleFinished("m", "d", 0, i))
    s.apply(ev.Heartbeat(4998.5))
    s.apply(ev.ModelLoad("m", 6, 8, 4, 20))
    s.apply(ev.ModelLoad("n", 1, 2, 3, 9))
    mono.now = 110.0
    p = s.pairs[("m", "d")]
    assert p.throughput() == 2.0 and p.eta() == 40.0 and p.remaining == 80
    assert s.throughput() == 2.0 and s.elapsed() == 10.0
    assert s.heartbeat_age() == 1.5
    assert s.retries() == 7 and s.load["m"].in_flight == 6
    assert s.totals() == (20, 0, 100)
    s.apply(ev.RunFinished(0, False))
    mono.now = 500.0
    assert s.elapsed() == 10.0  # stops with the run
    assert p.eta() is not None or p.status != PairStatus.RUNNING


def test_retried_pair_loses_its_old_failures_and_counts_agree() -> None:
    s = RunState(max_failures=5)
    err = SampleError("http", 500, "boom", 3)
    s.apply(ev.DatasetPlanned("m", "d", 10, 1))
    s.apply(ev.DatasetPlanned("m", "e", 10, 1))
    s.apply(ev.DatasetStarted("m", "d", 10, 10))
    for i in range(3):
        s.apply(ev.SampleFailed("m", "d", 0, i, err))
        s.apply(ev.SampleFailed("m", "e", 0, i, err))
    s.apply(ev.DatasetInferred("m", "d", PairStatus.FAIL, 7, 3))
    s.apply(ev.DatasetInferred("m", "e", PairStatus.FAIL, 7, 3))
    assert s.failed_pairs() == [("m", "d"), ("m", "e")]
    assert len(s.failures) == 5  # bounded
    for retried_by in (ev.RetryStarted((("m", "d"),)), ev.DatasetPlanned("m", "d", 10, 1, 7, 0), ev.DatasetStarted("m", "d", 10, 3)):
        t = RunState()
        for e in [ev.DatasetPlanned("m", "d", 10, 1), *(ev.SampleFailed("m", "d", 0, i, err) for i in range(3)), ev.DatasetInferred("m", "d", PairStatus.FAIL, 7, 3)]:
            t.apply(e)
        t.apply(retried_by)
        assert t.pairs[("m", "d")].failed == 0 and failures_of(t, "m", "d") == [], retried_by
        assert t.failed_pairs() == []
    s.apply(ev.RetryStarted((("m", "d"),)))
    assert failures_of(s, "m", "d") == [] and len(failures_of(s, "m", "e")) == 3
    assert s.pairs[("m", "d")].status == PairStatus.PENDING and s.failed_pairs() == [("m", "e")]


def test_scoring_status_and_error_pairs_count_as_failed() -> None:
    s = RunState()
    s.apply(ev.DatasetInferred("m", "d", PairStatus.DONE, 10, 0))
    s.apply(ev.DatasetScoring("m", "d"))
    assert s.pairs[("m", "d")].status == PairStatus.SCORING
    s.apply(ev.DatasetScored("m", "d", "accuracy", None, "ValueError: bad"))
    assert s.pairs[("m", "d")].status == PairStatus.ERROR and s.failed_pairs() == [("m", "d")]


def test_a_run_stopped_by_an_os_error_leaves_nothing_running() -> None:
    mono = FakeClock(100.0)
    s = RunState(clock=mono)
    s.apply(ev.DatasetPlanned("m", "d", 100, 1))
    s.apply(ev.DatasetStarted("m", "d", 100, 100))
    s.apply(ev.SampleFinished("m", "d", 0, 0))
    s.apply(ev.DatasetInferred("m", "e", PairStatus.DONE, 10, 0))
    s.apply(ev.DatasetScoring("m", "e"))
    s.apply(ev.RunFinished(1, False))  # not interrupted: a full disk stopped it
    mono.now = 500.0
    assert s.pairs[("m", "d")].status == PairStatus.PENDING and s.pairs[("m", "d")].eta() is None
    assert s.pairs[("m", "e")].status == PairStatus.DONE


# ---------------------------------------------------------------------------- the runner, on a real run


def failing_plan(tmp_path: Path, sim_url: str, **model_kw: Any) -> Path:
    rows = arithmetic(40)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    # d fails (its long prompts get 400); e (5 short prompts) is scored
    return write_plan(tmp_path, models=[lightllm("m", sim_url, **model_kw)], datasets=[gsm_dataset("d", data), gsm_dataset("e", data, limit=5)])


def state_view(s: RunState) -> dict[str, Any]:
    return {
        "pairs": {k: (p.total, p.shards, p.completed, p.failed, p.status, p.score, p.metric, p.error, dict(p.shard_status)) for k, p in s.pairs.items()},
        "failures": list(s.failures),
        "totals": s.totals(),
        "failed_pairs": s.failed_pairs(),
        "finished": s.finished,
        "models": s.models,
        "datasets": s.datasets,
        "load": dict(s.load),
        "heartbeat": s.heartbeat_at,
    }


def test_a_late_subscriber_sees_the_current_state_then_the_live_stream(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20), default=ModelProfile(latency=0.002)))
    runner = Runner(load_plan(failing_plan(tmp_path, sim.url, max_workers=2)))
    late: list[ev.Event] = []
    mid_state: dict[str, Any] = {}

    def subscribe_late(e: ev.Event) -> None:
        if isinstance(e, ev.SampleFailed) and e.sample_index >= 15 and not mid_state:
            mid_state.update(state_view(runner.state))  # what the runner knows right now
            runner.subscribe(late.append)
            mid_state["replayed"] = len(late)  # what subscribe() sent before the live stream

    runner.subscribe(subscribe_late)

    async def main() -> int:
        with anyio.fail_after(60):
            return await runner.run()

    assert anyio.run(main) == 1
    assert mid_state and late and not isinstance(late[0], ev.SampleFinished)
    replayed = RunState()
    for e in late:
        replayed.apply(e)
    # The late subscriber ends where the runner does: same pairs, counters, statuses, failures.
    assert state_view(replayed) == state_view(runner.state)
    assert replayed.pairs[("m", "d")].status == PairStatus.FAIL and replayed.pairs[("m", "e")].status == PairStatus.SCORED
    assert len(failures_of(replayed, "m", "d")) == replayed.pairs[("m", "d")].failed > 0
    # And what it was sent first rebuilt the state of that moment.
    first = RunState()
    for e in late[: mid_state["replayed"]]:
        first.apply(e)
    assert {k: v for k, v in state_view(first).items()} == {k: v for k, v in mid_state.items() if k != "replayed"}


def test_a_sink_that_raises_is_reported_and_keeps_receiving(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    runner = Runner(load_plan(failing_plan(tmp_path, sim.url)))
    seen: list[ev.Event] = []

    def broken(e: ev.Event) -> None:
        seen.append(e)
        if isinstance(e, ev.SampleFinished):
            raise RuntimeError("renderer bug [x]")

    runner.subscribe(broken)
    anyio.run(runner.run)
    notices = [e for e in runner.state.notices if "renderer bug" in e.message]
    assert len(notices) == 1 and notices[0].level == "error"  # said once, not once per event
    assert isinstance(seen[-1], ev.RunFinished)  # not detached


def test_leaderboard_fills_as_pairs_are_scored_and_queries_are_typed(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20, fail_first=1)))
    runner = Runner(load_plan(failing_plan(tmp_path, sim.url)))
    during: list[tuple[float | None, float | None]] = []
    order: list[type] = []

    def watch(e: ev.Event) -> None:
        if isinstance(e, (ev.DatasetScoring, ev.DatasetScored)):
            order.append(type(e))
        if isinstance(e, ev.DatasetScored):
            table = runner.leaderboard()
            during.append((table.score("m", "e"), table.score("m", "d")))

    runner.subscribe(watch)
    assert anyio.run(runner.run) == 1
    assert order == [ev.DatasetScoring, ev.DatasetScored]
    assert during == [(100.0, None)]  # the leaderboard before the run ended
    finished = runner.state.finished
    assert finished is not None and finished.leaderboard is not None
    assert finished.leaderboard.rows() == runner.leaderboard().rows()
    assert runner.failed_pairs() == [("m", "d")]
    # each prompt the server accepts failed once (fail_first=1) and was retried; ModelLoad says so
    long_ones = sorted(i for i, r in enumerate(rows) if len(r["question"]) > 20)
    load = runner.state.load["m"]
    assert load.max_workers == 8 and load.in_flight == 0 and load.samples == 45
    assert load.retries == 40 - len(long_ones) == runner.state.retries()

    details = runner.pair_details("m", "d", predictions=3)
    assert details.status == PairStatus.FAIL and [f.sample_index for f in details.failures] == long_ones
    assert all(f.error.status == 400 and f.error.type == "http" and "too long" in f.error.message for f in details.failures)
    assert [p.sample_index for p in details.predictions] == [0, 1, 2]
    assert details.predictions[0].prompt == rows[0]["question"] and details.predictions[0].gold == rows[0]["answer"]
    assert details.predictions[0].correct is None  # d was never scored
    scored = runner.pair_details("m", "e", predictions=2)
    assert scored.failures == [] and [p.correct for p in scored.predictions] == [True, True]
    assert scored.predictions[1].prediction.endswith(rows[1]["answer"].split("#### ")[1])
    with pytest.raises(ValueError):
        runner.pair_details("m", "nope")


def test_kept_scores_reach_the_state_and_the_leaderboard_on_a_rerun(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    plan = failing_plan(tmp_path, sim.url)
    anyio.run(Runner(load_plan(plan)).run)
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    anyio.run(runner.run)
    (kept,) = [e for e in of_type(events, ev.DatasetPlanned) if e.dataset == "e"]
    assert kept.status == PairStatus.SCORED and kept.score == 100.0 and kept.metric == "accuracy"
    assert runner.state.pairs[("m", "e")].score == 100.0 and runner.leaderboard().score("m", "e") == 100.0
