"""A model served by several replicas, end to end through the engine, each replica a real
simulator on 127.0.0.1: one dies mid-run, one is dead from the start, all go down for a while,
all stay down, and a server that refuses above 16 in flight against an adaptive limit. What
must hold: the exact score, every sample in the checkpoint once, never a hang or a lost
sample — and, with `retry = 0`, no sample failed for a replica the others could stand in for."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.checkpoint import scan_checkpoint
from evaltui.engine.stream import events as ev
from evaltui.sim import ModelProfile, SimConfig, SimThread, answers_correctly

pytestmark = pytest.mark.reliability  # RELIABILITY.md §2 (issue 16)

ACCURACY = 0.7


def expected(rows: list[dict[str, Any]]) -> float:
    return round(100.0 * sum(answers_correctly("m", r["question"], ACCURACY) for r in rows) / len(rows), 2)


def replica(rows: list[dict[str, Any]], **kw: Any) -> SimConfig:
    return SimConfig(answer_key=key_for(rows), default=ModelProfile(accuracy=ACCURACY, latency=0.01), **kw)


def fleet_plan(tmp_path: Path, rows: list[dict[str, Any]], sims: list[SimThread], **model: Any) -> Path:
    m = {"abbr": "m", "type": "lightllm", "url": [f"{s.url}/m/generate" for s in sims], "max_workers": 8,
         "retry": 0, "backoff": 0.0, "timeout": 10.0, **model}
    return write_plan(tmp_path, models=[m], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])


def checkpoint(runner: Any) -> list[tuple[int, bool]]:
    return [(line.sample, line.ok) for line in scan_checkpoint(runner.workdir.checkpoint_file("m", "d"))]


def scored(events: list[ev.Event]) -> float | None:
    return next(e.score for e in of_type(events, ev.DatasetScored))


def restart_later(sims: list[SimThread], rows: list[dict[str, Any]], factory: Any, after: float) -> threading.Thread:
    """Once every one of `sims` has died, start each again on its port `after` seconds later."""

    def back() -> None:
        deadline = time.monotonic() + 60
        while not all(s.server.died.is_set() for s in sims) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(after)
        for s in sims:
            factory(replica(rows, port=s.port))

    t = threading.Thread(target=back, daemon=True)
    t.start()
    return t


def test_a_replica_killed_mid_run_costs_nothing_the_exact_score_and_each_sample_once(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(300)
    slow = ModelProfile(accuracy=ACCURACY, latency=0.03)  # the run outlasts the ejection
    dying = sim_factory(replica(rows, die_after=40))
    others = [sim_factory(SimConfig(answer_key=key_for(rows), default=slow)) for _ in range(2)]
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, [dying, *others]))  # retry = 0
    assert code == 0 and scored(events) == expected(rows)
    entries = checkpoint(runner)
    assert sorted(i for i, _ in entries) == list(range(300)) and all(ok for _, ok in entries)  # once each, none failed
    assert not of_type(events, ev.SampleRetried)
    changes = of_type(events, ev.ReplicaStateChanged)
    assert changes[0].url == f"{dying.url}/m/generate" and changes[0].state == "ejected"
    log = (runner.workdir.logs_dir / "run.log").read_text()
    assert f"m: replica {dying.url}/m/generate ejected" in log
    load = of_type(events, ev.ModelLoad)[-1]
    assert [r.state for r in load.replicas] in (["ejected", "up", "up"], ["probing", "up", "up"])
    assert load.replicas[1].attempts + load.replicas[2].attempts >= 260
    # the per-sample log says which replica each attempt went to
    lines = [json.loads(line) for line in (runner.workdir.logs_dir / "samples" / "m" / "d.jsonl").read_text().splitlines()]
    records = [r for r in lines if "index" in r]  # after the version line
    replicas = [a[4] for r in records for a in r["attempts"]]
    assert len(records) == 300 and set(replicas) == {f"{s.url}/m/generate" for s in (dying, *others)}
    assert all(len(a) == 5 for r in records for a in r["attempts"])


def test_a_dead_replica_listed_first_fails_nothing_with_retry_0(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(60)
    dead, healthy = sim_factory(replica(rows)), sim_factory(replica(rows))
    dead.stop()  # refused from the start: the model's "no server" stop must not take it for the model's
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, [dead, healthy]))
    assert code == 0 and scored(events) == expected(rows)
    assert not of_type(events, ev.SampleFailed)


def test_every_replica_dead_stops_the_model_after_a_few_samples(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(100)
    sims = [sim_factory(replica(rows)) for _ in range(2)]
    for s in sims:
        s.stop()
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, sims))
    assert code == 1
    assert 0 < len(of_type(events, ev.SampleFailed)) < 20
    assert "none was answered; stopping this model" in (runner.workdir.logs_dir / "run.log").read_text()


def test_every_replica_down_for_a_while_the_run_waits_and_finishes(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(120)
    sims = [sim_factory(replica(rows, die_after=30)) for _ in range(2)]
    back = restart_later(sims, rows, sim_factory, after=1.0)
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, sims))
    back.join(10)
    assert code == 0 and scored(events) == expected(rows)
    entries = checkpoint(runner)
    assert sorted(i for i, _ in entries) == list(range(120)) and all(ok for _, ok in entries)
    assert len(of_type(events, ev.ReplicasDown)) == 1
    assert "every replica is down, its requests wait up to 300 s" in (runner.workdir.logs_dir / "run.log").read_text()
    assert any(e.state == "up" for e in of_type(events, ev.ReplicaStateChanged))


def test_every_replica_down_beyond_down_timeout_fails_clearly_and_loses_nothing(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(150)
    sims = [sim_factory(replica(rows, die_after=25)) for _ in range(2)]
    plan = fleet_plan(tmp_path, rows, sims, down_timeout=1.0)
    code, events, runner = run_plan(plan)
    assert code == 1
    (inferred,) = of_type(events, ev.DatasetInferred)
    assert inferred.status == "fail" and "every replica was down for 1 s" in inferred.error
    entries = checkpoint(runner)
    done = [i for i, ok in entries if ok]
    assert len(done) == len(set(done)) == inferred.completed > 0
    failed = of_type(events, ev.SampleFailed)
    assert failed and all(f.error.type == "down" for f in failed)  # the samples out then, with the reason
    assert any("stopping this model" in n.message for n in of_type(events, ev.Notice))
    # The servers come back: a plain re-run asks only for what was not answered, and scores it all.
    for s in sims:
        sim_factory(replica(rows, port=s.port))
    sent_before = {r.prompt for s in sims for r in s.stats.log if r.status == 200}
    code, events, runner = run_plan(plan)
    assert code == 0 and scored(events) == expected(rows)
    entries = checkpoint(runner)
    assert sorted({i for i, ok in entries if ok}) == list(range(150))
    assert sent_before.isdisjoint(rows[i]["question"] for i in range(150) if i not in done)


def test_adaptive_concurrency_finds_a_server_that_refuses_above_16(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(1000)
    sim = sim_factory(replica(rows, max_in_flight=16, faults=_no_retry_after()))
    plan = fleet_plan(tmp_path, rows, [sim], max_workers=64, concurrency="adaptive", retry=20, url=f"{sim.url}/m/generate")
    code, events, _ = run_plan(plan)
    assert code == 0 and scored(events) == expected(rows)
    log = sorted(sim.stats.log, key=lambda r: r.t_received)
    later = log[len(log) // 4:]  # after the first seconds: the limit has been found
    refused = sum(1 for r in later if r.status == 429)
    assert refused / len(later) < 0.05, (refused, len(later))
    limits = [e.limit for e in of_type(events, ev.ModelLoad) if e.samples]
    assert limits and max(limits) <= 32 and limits[-1] <= 20


def _no_retry_after() -> Any:
    from evaltui.sim import Faults

    return Faults(retry_after=0.0)  # "Retry-After: 0": no hold, so only the limit decides


def test_one_url_is_a_fleet_of_one_a_server_restart_loses_no_sample(tmp_path: Path, sim_factory) -> None:
    """A real llama.cpp server killed and restarted 20 s later, with one url: 8 samples went
    through the outage and 5 failed after their attempts, and the run ended exit 1 unscored (two
    urls lost nothing). Here the server dies after 30 requests and is back 1.5 s later; with
    `retry = 0` no sample may fail: the requests wait while it is probed, and go on."""
    rows = arithmetic(120)
    (sim,) = sims = [sim_factory(replica(rows, die_after=30))]
    back = restart_later(sims, rows, sim_factory, after=1.5)
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, sims))  # url = [one]: a list of one is one url
    back.join(10)
    assert code == 0 and scored(events) == expected(rows)
    assert not of_type(events, ev.SampleFailed)
    entries = checkpoint(runner)
    assert sorted(i for i, _ in entries) == list(range(120)) and all(ok for _, ok in entries)
    assert len(of_type(events, ev.ReplicasDown)) == 1
    states = [e.state for e in of_type(events, ev.ReplicaStateChanged)]
    assert states[0] == "ejected" and states[-1] == "up"
    log = (runner.workdir.logs_dir / "run.log").read_text()
    assert "every replica is down, its requests wait up to 300 s" in log and f"m: replica {sim.url}/m/generate is back" in log


def test_one_url_down_beyond_down_timeout_stops_the_model_and_a_re_run_resumes(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(100)
    (sim,) = sims = [sim_factory(replica(rows, die_after=25))]
    plan = fleet_plan(tmp_path, rows, sims, down_timeout=1.0)
    code, events, runner = run_plan(plan)
    assert code == 1
    (inferred,) = of_type(events, ev.DatasetInferred)
    assert inferred.status == "fail" and "every replica was down for 1 s" in inferred.error
    failed = of_type(events, ev.SampleFailed)
    assert failed and all(f.error.type == "down" for f in failed)
    sim_factory(replica(rows, port=sim.port))
    code, events, runner = run_plan(plan)
    assert code == 0 and scored(events) == expected(rows)


def test_one_url_that_answers_500_is_not_marked_down(tmp_path: Path, sim_factory) -> None:
    """Only getting no reply marks a lone url down: 5xx replies and timeouts are its requests'
    own, retried as before (a model stalled while its one server was probed would cost more)."""
    from evaltui.sim import Faults

    rows = arithmetic(60)
    sim = sim_factory(replica(rows, faults=Faults(rate_500=0.5, seed=3)))
    code, events, runner = run_plan(fleet_plan(tmp_path, rows, [sim], retry=8))
    assert code == 0 and scored(events) == expected(rows)
    assert not of_type(events, ev.ReplicaStateChanged) and not of_type(events, ev.ReplicasDown)
