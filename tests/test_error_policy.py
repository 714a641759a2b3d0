"""The sample-level error policy: retry_on_error (whole-sample tries), fail_on_error as a fraction
or a count (stopping early when the plan sets it), score_on_error; against the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan
from workfiles import account, checkpoint_entries

from evaltui.engine.run.ending import failure_budget
from evaltui.engine.stream import events as ev
from evaltui.plan import DatasetConfig
from evaltui.sim import Faults, ModelProfile, SimConfig


def _ds(**kw: Any) -> DatasetConfig:
    return DatasetConfig.model_validate({"abbr": "d", "path": "d.jsonl", "prompt": "{q}", "target": "{a}", **kw})


def test_the_failure_budget_is_a_fraction_or_a_count() -> None:
    assert failure_budget(_ds(), 100) == 0
    assert failure_budget(_ds(fail_on_error=0.29), 100) == 29
    assert failure_budget(_ds(fail_on_error=1.0), 100) == 100  # the fraction: every sample may fail
    assert failure_budget(_ds(fail_on_error=2), 100) == 2  # the count: two may (an integer 1 is refused as ambiguous)
    assert failure_budget(_ds(fail_on_error=7), 100) == 7
    assert failure_budget(_ds(score_on_error=True), 100) == 100


def test_a_sample_whose_request_retries_are_spent_is_tried_again_as_a_whole(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(6)
    # every prompt's first 3 attempts get a 500; retry = 1: two attempts per try
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(fail_first=3, fail_first_kind="500")))
    model = [lightllm("m", sim.url, retry=1)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, runner = run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data, retry_on_error=1)]))
    assert code == 0
    assert {a["count"] for a in sim.stats.to_json()["attempts"]} == {4}  # try 1: 2 attempts; try 2: the 3rd fails, the 4th answers
    retried = of_type(events, ev.SampleRetried)
    assert sorted(r.sample_index for r in retried) == list(range(6)) and {r.attempt for r in retried} == {2}
    assert {(r.error.type, r.error.status, r.error.attempts) for r in retried} == {("http", 500, 2)}
    assert of_type(events, ev.DatasetScored)[0].score == 100.0
    assert runner.state.pairs[("m", "d")].sample_retries == 6
    assert not any("error" in e for e in checkpoint_entries(runner.workdir.checkpoint_file("m", "d")))


def test_a_sample_that_fails_every_try_keeps_the_reason_of_each(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(3)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(fail_first=100, fail_first_kind="503")))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, retry=1)], datasets=[gsm_dataset("d", data, retry_on_error=2)]))
    assert code == 1
    assert {a["count"] for a in sim.stats.to_json()["attempts"]} == {6}  # 3 tries × 2 attempts, then it counts as failed
    errors = [e["error"] for e in checkpoint_entries(runner.workdir.checkpoint_file("m", "d"))]
    assert len(errors) == 3
    for error in errors:
        assert (error["type"], error["status"], error["attempts"]) == ("http", 503, 2)
        assert [(t["type"], t["status"]) for t in error["tries"]] == [("http", 503)] * 3
    assert len(of_type(events, ev.SampleRetried)) == 6


def test_an_error_no_try_can_change_is_not_tried_again(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": "a very long question indeed", "answer": "#### 1"}, *arithmetic(2)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, retry_on_error=3)]))
    assert code == 1
    assert sim.stats.attempts[("m", rows[0]["question"])] == 1  # a 400: neither retried nor tried again
    assert not of_type(events, ev.SampleRetried)


def test_score_on_error_scores_failed_samples_as_wrong(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": ("long " * 10 if i % 2 == 0 else "") + f"q{i}", "answer": "#### 1"} for i in range(10)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, score_on_error=True)]))
    assert code == 0  # half of them failed, and the dataset is scored
    assert of_type(events, ev.DatasetScored)[0].score == 50.0
    result = runner.workdir.read_result("m", "d")
    assert result is not None and result["accuracy"] == 50.0
    acc = account(runner.workdir.root, "m", "d")
    assert sorted(acc.failed) == [0, 2, 4, 6, 8] and acc.statuses == ["done"]


def test_a_count_of_failures_ends_the_dataset_early_and_a_re_run_sends_the_rest_first(tmp_path: Path, sim_factory) -> None:
    long = {5, 6, 7, 30}  # refused for good (400: too long)
    rows = [{"question": ("long " * 10 if i in long else "") + f"q{i}", "answer": "#### 1"} for i in range(40)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(latency=0.005)}, faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    model = [lightllm("m", sim.url, max_workers=2)]
    plan = write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data, fail_on_error=2)])
    code, events, runner = run_plan(plan)
    assert code == 1
    (inferred,) = of_type(events, ev.DatasetInferred)
    assert inferred.status == ev.PairStatus.FAIL and inferred.failed == 3
    assert inferred.error.startswith("3 of the dataset's 40 samples failed (fail_on_error = 2); stopped early, ")
    assert "not sent: a re-run sends them first" in inferred.error
    sent = sim.stats.requests_total
    assert sent < 15  # stopped at the third failure (sample 7), not at the end
    status = runner.workdir.read_status("m", "d")
    assert status["status"] == "fail" and "stopped early" in status["error"]

    sim.reset_stats()
    code, events, runner = run_plan(plan)  # nothing fixed: the three fail again, but only after the rest
    assert code == 1
    # the dataset's failed units: this run's, and the earlier ones it had not sent again when it stopped
    assert of_type(events, ev.DatasetInferred)[0].error.startswith("4 of the dataset's 40 samples failed (")
    order = [r.prompt for r in sorted(sim.stats.log, key=lambda r: r.t_received)]
    refused_before = {rows[i]["question"] for i in (5, 6, 7)}
    first_retry = min(order.index(p) for p in refused_before & set(order))
    assert set(order[first_retry:]) <= refused_before  # the samples that failed before go last, after every other
    acc = account(runner.workdir.root, "m", "d")
    assert acc.succeeded == set(range(40)) - long  # the re-run got everything else done

    sim.reset_stats()
    plan = write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data, fail_on_error=4)])
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 4
    assert of_type(events, ev.DatasetScored)[0].score == 90.0


def test_without_fail_on_error_in_the_plan_a_dataset_runs_to_the_end(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": ("long " * 10 if i < 3 else "") + f"q{i}", "answer": "#### 1"} for i in range(20)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))]))
    assert code == 1 and sim.stats.requests_total == 20
    assert of_type(events, ev.DatasetInferred)[0].error.endswith("fail_on_error = 0.15 would score the others")


def test_a_failure_says_its_epoch_in_the_log_and_on_the_terminal(tmp_path: Path, sim_factory) -> None:
    import io
    import json

    from evaltui.engine.run.runner import Runner
    from evaltui.headless import run_headless
    from evaltui.plan import load_plan

    rows = [{"question": "long " * 10 + "q0", "answer": "#### 1"}, *arithmetic(2)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    datasets = [gsm_dataset("two", data, epochs=2, score_on_error=True), gsm_dataset("one", data, score_on_error=True)]
    out = io.StringIO()
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=1)], datasets=datasets)))
    assert run_headless(runner, out=out) == 0
    logged = [json.loads(line) for line in (runner.workdir.logs_dir / "failures.jsonl").read_text().splitlines()]
    assert [(f["dataset"], f["index"], f.get("epoch")) for f in logged] == [("two", 0, 0), ("two", 0, 1), ("one", 0, None)]
    said = [line.split("] ", 1)[1].split(": ")[:2] for line in out.getvalue().splitlines() if " failed: " in line]
    assert said == [["m/two", "sample 0 epoch 0 failed"], ["m/one", "sample 0 failed"]]


def test_units_are_counted_as_units_and_every_shard_says_the_datasets_count(tmp_path: Path, sim_factory) -> None:
    """With epochs the messages count (sample, epoch) units and say so; after an early stop every
    failed shard's status has the dataset's count, not the count when that shard ended."""
    import io

    from workfiles import read_strict_json

    from evaltui.engine.run.runner import Runner
    from evaltui.headless import run_headless
    from evaltui.plan import load_plan

    long = {1, 4, 5, 11, 14}
    rows = [{"question": ("long " * 10 if i in long else "") + f"q{i}", "answer": "#### 1"} for i in range(18)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(latency=0.005)}, faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    ds = gsm_dataset("d", data, epochs=2, shards=3, fail_on_error=3)
    out = io.StringIO()
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=[ds])))
    assert run_headless(runner, out=out) == 1
    assert "m/d: started, 36 requests to run (18 samples × 2 epochs)" in out.getvalue()
    import re

    error = runner.workdir.read_status("m", "d", 2, 3)["error"]
    assert re.match(r"\d+ of the dataset's 36 units \(18 samples × 2 epochs\) failed \(fail_on_error = 3\); stopped early, \d+ not sent", error), error
    errors = {read_strict_json(runner.workdir.status_file("m", "d", k, 3)).get("error") for k in range(3)}
    assert errors - {""} == {error}  # each failed shard says the same


def test_a_retried_sample_goes_to_the_back_of_the_queue_so_a_burst_of_failures_is_outlived(tmp_path: Path) -> None:
    """Issue 23: the first 30 requests answer 500, retry = 0, retry_on_error = 3, 4 workers: each
    sample tried again at once spent all its tries inside the burst (5 of 200 failed). A sample
    sent to the back of its dataset's queue comes back after the burst: none fails."""
    from aiohttp import web
    from hostile import LoopbackServer

    rows = arithmetic(200)

    async def burst(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if srv.requests["/generate"] <= 30:
            return web.json_response({"error": {"message": "overloaded"}}, status=500)
        answer = next(r["answer"] for r in rows if r["question"] == body["inputs"])
        return web.json_response({"generated_text": [answer]})

    with LoopbackServer({"/generate": burst}) as srv:
        model = {**lightllm("m", srv.url, retry=0, max_workers=4, backoff=0.0), "url": f"{srv.url}/generate"}
        data = write_jsonl(tmp_path / "d.jsonl", rows)
        code, events, runner = run_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", data, retry_on_error=3)]))
    assert code == 0
    assert not of_type(events, ev.SampleFailed)
    retried = of_type(events, ev.SampleRetried)
    assert len(retried) == 30 and {r.attempt for r in retried} == {2}  # each once, after the burst
    assert of_type(events, ev.DatasetScored)[0].score == 100.0
    lines = checkpoint_entries(runner.workdir.checkpoint_file("m", "d"))
    assert len(lines) == 200 and not any("error" in e for e in lines)
    first_retried = min(r.sample_index for r in retried)
    order = [e["index"] for e in lines]
    assert order.index(first_retried) > order.index(199) - 30  # it came back at the end of the queue
