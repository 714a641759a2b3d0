"""Per-sample limits (time_limit, token_limit) and running a selection of samples (sample_ids,
--samples): their failure reasons, and a subset's score never passing for the dataset's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan
from workfiles import checkpoint_entries, read_strict_json

from evaltui.cli import main
from evaltui.engine.stream import events as ev
from evaltui.plan import PlanError, load_plan, parse_samples, samples_spec, select
from evaltui.sim import Faults, ModelProfile, SimConfig


def test_a_sample_over_its_time_limit_fails_with_the_reason(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(3)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(rate_slow=1.0, slow_seconds=5.0)))
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), time_limit=0.3, retry_on_error=2)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, timeout=2.0)], datasets=[ds]))
    assert code == 1
    errors = [f.error for f in of_type(events, ev.SampleFailed)]
    assert len(errors) == 3
    assert {(e.type, e.message) for e in errors} == {("time-limit", "no answer within time_limit = 0.3 s")}
    assert not of_type(events, ev.SampleRetried)  # the limit covers every try: none was left for another


def test_a_sample_out_of_tokens_sends_no_more_requests(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(4)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=1.0)}))
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=3, token_limit=5, score_on_error=True)
    # one request at a time: each sample's epoch 0 answers (its tokens are over 5), epochs 1 and 2 are refused
    model = chat("m", sim.url, max_workers=1, generation_kwargs={"temperature": 1.0, "max_new_tokens": 64})
    code, events, runner = run_plan(write_plan(tmp_path, models=[model], datasets=[ds]))
    assert code == 0
    assert sim.stats.requests_total == 4
    failed = of_type(events, ev.SampleFailed)
    assert sorted((f.sample_index, f.epoch) for f in failed) == [(i, e) for i in range(4) for e in (1, 2)]
    assert {f.error.type for f in failed} == {"token-limit"}
    assert "token_limit = 5" in failed[0].error.message and failed[0].error.attempts == 0
    assert of_type(events, ev.DatasetScored)[0].score == pytest.approx(100 / 3, abs=0.01)


def test_a_token_limit_holds_under_concurrency(tmp_path: Path, sim_factory) -> None:
    """A sample's epochs go out together at max_workers = 8 unless its budget is tight: then
    each waits for the ones in flight, so no request is sent once the sample's tokens are spent
    and it sends what it sends one request at a time — the same number of requests."""
    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=1.0, latency=0.03)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    sent = {}
    for workers in (8, 1):
        sim.reset_stats()
        ds = gsm_dataset("d", data, epochs=3, token_limit=20, score_on_error=True)  # 13 tokens a reply: two go, the third is refused
        model = chat("m", sim.url, max_workers=workers, generation_kwargs={"temperature": 1.0, "max_new_tokens": 64})
        code, events, runner = run_plan(write_plan(tmp_path, models=[model], datasets=[ds], run={"work_dir": f"out{workers}"}))
        assert code == 0
        sent[workers] = sim.stats.requests_total
        used: dict[int, list[int]] = {}
        for r in [json.loads(line) for line in runner.workdir.sample_log_file("m", "d").read_text().splitlines()[1:]]:
            if "usage" in r:
                used.setdefault(r["index"], []).append(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"])
        assert set(used) == set(range(20))
        for tokens in used.values():
            assert sum(tokens[:-1]) < 20  # each request went while the sample had tokens left
        refused = [f for f in of_type(events, ev.SampleFailed) if f.error.type == "token-limit"]
        assert len(refused) == 60 - sent[workers] > 0
    assert sent[8] == sent[1]


def test_samples_are_written_and_read_as_ranges() -> None:
    assert parse_samples("3,17,40-45, 44") == [3, 17, 40, 41, 42, 43, 44, 45]
    assert samples_spec([3, 17, 40, 41, 42, 43, 44, 45]) == "3,17,40-45"
    for bad in ("", "x", "3-", "5-3", "-2", "1,,2"):
        with pytest.raises(ValueError):
            parse_samples(bad)
    with pytest.raises(ValueError, match=r"^'²' is neither an index nor a range like 40-60 \(ASCII digits\)$"):
        parse_samples("²")
    with pytest.raises(ValueError, match=r"^'9{20}' is too large an index$"):
        parse_samples("9" * 20)
    # the size is checked range by range, before any is expanded (ten of 9,000,000 would be 90 million)
    many = ",".join(f"{k * 10**7}-{k * 10**7 + 9_000_000}" for k in range(10))
    with pytest.raises(ValueError, match=r"^the ranges name more than 10,000,000 samples \(at 10000000-19000000\)$"):
        parse_samples(many)


def test_a_selection_runs_those_samples_and_its_score_is_marked(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(30)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan_path = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=2, sample_ids=[25, 3, 17, 20, 21])])
    code, events, runner = run_plan(plan_path)
    assert code == 0
    assert sorted(r.prompt for r in sim.stats.log) == sorted(rows[i]["question"] for i in (3, 17, 20, 21, 25))
    wd = runner.workdir.root
    assert list(read_strict_json(wd / "predictions" / "m" / "d.json")) == ["3", "17", "20", "21", "25"]
    assert json.loads((wd / "infer_status" / "m" / "d_0.json").read_text())["samples"] == "3,17,20-21,25"
    result = runner.workdir.read_result("m", "d")
    assert result is not None and result["samples"] == "3,17,20-21,25"
    board = of_type(events, ev.RunFinished)[0].leaderboard
    assert board.rows()[0][2] == "accuracy (subset of 5)"
    subset_version = board.rows()[0][1]

    # the whole dataset next: the subset's result is not taken for it; its answers are kept
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=2)]))
    assert code == 0 and sim.stats.requests_total == 25
    assert of_type(events, ev.DatasetPlanned)[0].status == ev.PairStatus.PENDING
    assert len(read_strict_json(wd / "predictions" / "m" / "d.json")) == 30
    board = of_type(events, ev.RunFinished)[0].leaderboard
    assert board.rows()[0][2] == "accuracy" and board.rows()[0][1] != subset_version


def test_samples_on_the_command_line_select_in_every_dataset(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(12)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan_path = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data), gsm_dataset("b", data, sample_ids=[0])])
    plan = select(load_plan(plan_path), None, None, [2, 4, 5])
    assert [d.sample_ids for d in plan.datasets] == [[2, 4, 5], [2, 4, 5]]
    with pytest.raises(PlanError) as info:
        select(load_plan(plan_path), None, ["a"], [3, 12])
    assert info.value.problems == ["plan.toml: --samples: a: 12 is not a sample of this dataset, which has 12 (indices count from 0)"]
    assert main([str(plan_path), "--no-ui", "--samples", "1-2,7"]) == 0
    checkpoint = tmp_path / "out" / "predictions" / "m" / "tmp_a.jsonl"
    assert sorted(e["index"] for e in checkpoint_entries(checkpoint)) == [1, 2, 7]


def test_sample_ids_beyond_the_data_name_the_field(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(5))
    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", data, sample_ids=[1, 5])])
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    assert info.value.problems == ["plan.toml: datasets[0].sample_ids: 5 is not a sample of this dataset, which has 5 (indices count from 0)"]
    for ids, expected in (([], "lists no sample; leave it out to run them all"), ([2, 2], "lists sample 2 twice"), ([-1], "sample indices count from 0 (got -1)")):
        with pytest.raises(PlanError) as info:
            load_plan(write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", data, sample_ids=ids)]))
        assert info.value.problems == [f"plan.toml: datasets[0].sample_ids: {expected}"]
