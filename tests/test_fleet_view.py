"""What a user reads of a model's replicas and limit: the fold, the headless lines and progress
line, the run log's words — from events, without a server."""

from __future__ import annotations

import io

from evaltui.engine.disk.runlog import event_line
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.state import RunState
from evaltui.headless import HeadlessRenderer

A, B = "http://a:1/generate", "http://b:1/generate"


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def load(attempts_a: int, attempts_b: int, state_b: str = "up", limit: int = 12) -> ev.ModelLoad:
    replicas = (ev.ReplicaLoad(A, "up", 5, 8, attempts_a, 1), ev.ReplicaLoad(B, state_b, 0, 8, attempts_b, 3))
    return ev.ModelLoad("m", 5, 16, 4, attempts_a + attempts_b, limit, replicas)


def test_the_fold_keeps_each_replica_its_state_counters_and_rate() -> None:
    clock = Clock()
    s = RunState(clock=clock)
    s.apply(load(100, 50))
    clock.now += 2.0
    s.apply(load(300, 50))
    a, b = s.replicas["m"][A], s.replicas["m"][B]
    assert (a.in_flight, a.limit, a.attempts, a.errors, a.rate) == (5, 8, 300, 1, 100.0)
    assert b.rate == 0.0 and b.state == "up"
    clock.now += 0.1
    s.apply(load(310, 50))  # too soon after the last: the rate stays, the counters move
    assert a.rate == 100.0 and a.attempts == 310


def test_ejected_down_and_back() -> None:
    clock = Clock()
    s = RunState(clock=clock)
    s.apply(load(10, 10))
    s.apply(ev.ReplicaStateChanged("m", B, "ejected", "connect: refused", 1.0))
    assert s.replicas["m"][B].state == "ejected" and s.replicas["m"][B].reason == "connect: refused"
    s.apply(ev.ReplicaStateChanged("m", A, "ejected", "HTTP 500: boom", 1.0))
    s.apply(ev.ReplicasDown("m", 300.0, "every one"))
    clock.now += 7.0
    assert s.down_for("m") == 7.0
    s.apply(ev.ReplicaStateChanged("m", A, "up"))
    assert s.down_for("m") is None and s.replicas["m"][A].reason == ""


def test_a_late_subscriber_sees_the_replicas_out_and_the_wait() -> None:
    s = RunState()
    s.apply(load(10, 10))
    s.apply(ev.ReplicaStateChanged("m", A, "ejected", "x", 1.0))
    s.apply(ev.ReplicaStateChanged("m", B, "ejected", "y", 1.0))
    s.apply(ev.ReplicasDown("m", 300.0, "both"))
    late = RunState()
    for e in s.replay():
        late.apply(e)
    assert {u: (v.state, v.reason) for u, v in late.replicas["m"].items()} == {A: ("ejected", "x"), B: ("ejected", "y")}
    assert late.down_for("m") is not None


def test_the_lines_say_ejected_back_and_all_down_but_not_every_probe() -> None:
    assert event_line(ev.ReplicaStateChanged("m", A, "ejected", "connect: refused", 1.0)) == (
        f"m: replica {A} ejected (connect: refused); probing it in 1 s")
    assert event_line(ev.ReplicaStateChanged("m", A, "probing")) is None
    assert event_line(ev.ReplicaStateChanged("m", A, "ejected", "health check: refused", 2.0, failed_probes=1)) is None
    assert event_line(ev.ReplicaStateChanged("m", A, "up")) == f"m: replica {A} is back (its health check answers)"
    assert event_line(ev.ReplicasDown("m", 300.0, f"{A}: refused")) == (
        f"m: every replica is down, its requests wait up to 300 s for one to come back ({A}: refused)")


def test_headless_prints_them_and_the_limit_in_progress_lines() -> None:
    out = io.StringIO()
    r = HeadlessRenderer(out)
    r(ev.DatasetPlanned("m", "d", 100, 1))
    r(ev.DatasetStarted("m", "d", 100, 100))
    r(load(10, 10))
    r(ev.ReplicaStateChanged("m", B, "ejected", "connect: refused", 1.0))
    assert f"m: replica {B} ejected (connect: refused)" in out.getvalue()
    assert r.progress_line().endswith("| m: 5 in flight, limit 12 (max 16), replicas 1/2 up [a:1 5/8, b:1 ejected]")
    r(ev.ModelLoad("n", 2, 8, 0, 3))  # fixed, one url: nothing more to say
    assert "n:" not in r.progress_line()


def test_replicas_are_named_by_host_and_port_unless_two_share_them() -> None:
    from evaltui.headless import replica_names

    assert replica_names(["http://gpu1:8000/v1", "http://gpu2:8000/v1"]) == ["gpu1:8000", "gpu2:8000"]
    assert replica_names(["http://h:1/a/generate", "http://h:1/b/generate", "https://k/v1"]) == ["h:1/a/generate", "h:1/b/generate", "k"]


def test_the_strip_leaves_out_models_whose_inference_is_over_while_others_go_on() -> None:
    from evaltui.ui.widgets.fleet import strip_models

    s = RunState()
    workers = {"first": 64, "second": 64, "third": 8}
    for model in workers:
        s.apply(ev.DatasetPlanned(model, "d", 10, 1))
    assert strip_models(s, workers) == workers  # nothing started: all of them
    s.apply(ev.ShardStatusChanged("first", "d", 0, 1, ev.PairStatus.DONE, 10, 10, 0))
    s.apply(ev.ShardStatusChanged("second", "d", 0, 1, ev.PairStatus.RUNNING, 10, 3, 0))
    assert strip_models(s, workers) == {"second": 64, "third": 8}  # third is still to run
    for model in ("second", "third"):
        s.apply(ev.ShardStatusChanged(model, "d", 0, 1, ev.PairStatus.DONE, 10, 10, 0))
    assert strip_models(s, workers) == workers  # all over: all of them again
