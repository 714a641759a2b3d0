"""Epochs and reducers: each (sample, epoch) a request of its own, checkpointed and resumed as
one; K verdicts reduced to one score per sample; pass@k by the unbiased estimator."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan
from workfiles import checkpoint_entries, read_strict_json

from evaltui.engine.disk.checkpoint import Checkpoint
from evaltui.engine.disk.predictions import merge_checkpoints, predictions_to_checkpoint, read_predictions
from evaltui.engine.stream import events as ev
from evaltui.plan import Epochs
from evaltui.scoring import Reduction, pass_at_k, score
from evaltui.sim import ModelProfile, SimConfig, answers_correctly

SAMPLING = {"temperature": 1.0, "max_new_tokens": 64}


# ---------------------------------------------------------------------------- the estimator


def test_pass_at_k_matches_hand_computed_values() -> None:
    # n = 10 tries, c = 3 right: pass@1 = c/n; pass@5 = 1 - C(7,5)/C(10,5) = 1 - 21/252; pass@8 = 1 (n - c < k)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(10, 3, 8) == 1.0
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_is_stable_where_the_binomials_are_huge() -> None:
    # C(200, 100) has 59 digits; one right of 200: pass@100 is exactly 1/2
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_reducers_turn_the_epochs_verdicts_into_one_value() -> None:
    verdicts = [True, False, False, True, False]  # 2 of 5 right
    assert Reduction("gsm8k", "mean", (), 5).reduce(verdicts) == {"accuracy": 0.4}
    assert Reduction("gsm8k", "max", (), 5).reduce(verdicts) == {"accuracy_max": 1.0}
    assert Reduction("gsm8k", "median", (), 5).reduce(verdicts) == {"accuracy_median": 0.0}
    assert Reduction("gsm8k", "mode", (), 5).reduce(verdicts) == {"accuracy_mode": 0.0}
    assert Reduction("gsm8k", "mode", (), 2).reduce([True, False]) == {"accuracy_mode": 1.0}  # a tie goes to epoch 0's value
    assert Reduction("gsm8k", "at_least_k", (2,), 5).reduce(verdicts) == {"accuracy_at_least_2": 1.0}
    assert Reduction("gsm8k", "at_least_k", (3,), 5).reduce(verdicts) == {"accuracy_at_least_3": 0.0}
    assert Reduction("code_exec", "pass_at_k", (1, 5), 5).reduce(verdicts) == {"pass@1": pytest.approx(0.4), "pass@5": 1.0}
    assert Reduction("code_exec", "mean", (), 10).metrics == ("pass@1",)  # the mean over n epochs is the unbiased pass@1
    assert Reduction("code_exec", "max", (), 3).metrics == ("pass_max",)
    assert Reduction("exact", "mean", (), 1).trivial and not Reduction("exact", "max", (), 1).trivial


def test_every_evaluator_and_reducer_the_plan_names_is_scoring_s() -> None:
    """The plan lists the evaluator types and reducers once (plan/evaluator.py); scoring knows each."""
    from evaltui.plan.evaluator import EVALUATORS, REDUCERS
    from evaltui.scoring import main_metric

    assert all(main_metric(name) for name in EVALUATORS)
    for reducer in REDUCERS:
        ks = (2,) if reducer in ("at_least_k", "pass_at_k") else ()
        assert Reduction.of(_Evaluator(), Epochs(3, reducer, ks)).reduce([True, False, True]), reducer


class _Evaluator:
    def __init__(self, **kw: Any):
        self.type, self.reducer, self.pattern = kw.get("type", "exact"), kw.get("reducer", "mean"), None
        self._ks = kw.get("ks", ())

    def ks(self) -> tuple[int, ...]:
        return self._ks


def test_score_keeps_every_epoch_and_the_reduced_values() -> None:
    predictions = [
        {"index": 0, "prediction": "a", "gold": "a", "predictions": ["a", "b", "a"]},
        {"index": 1, "prediction": "x", "gold": "b", "predictions": ["x", "", "b"], "error": None,
         "errors": [None, {"type": "http", "status": 500, "message": "m", "attempts": 3}, None]},
    ]
    result = score(_Evaluator(reducer="pass_at_k", ks=(1, 3)), predictions, epochs=Epochs(3, "pass_at_k", (1, 3)))
    assert list(result)[:2] == ["pass@1", "pass@3"]
    # sample 0: 2 of 3 right; sample 1: 1 of 3 (the failed epoch is wrong)
    assert result["pass@1"] == round(100 * (2 / 3 + 1 / 3) / 2, 2)
    assert result["pass@3"] == 100.0
    first, second = result["details"]
    assert [e["correct"] for e in first["epochs"]] == [True, False, True]
    assert first["correct"] is True and first["extracted"] == "a"  # epoch 0's verdict, where a one-epoch detail has it
    assert second["epochs"][1] == {"extracted": None, "correct": False, "error": "http"}
    assert second["scores"] == {"pass@1": pytest.approx(1 / 3), "pass@3": 1.0}


def test_one_epoch_by_mean_scores_exactly_as_before() -> None:
    predictions = [{"index": 0, "prediction": "a", "gold": "a"}, {"index": 1, "prediction": "b", "gold": "c"}]
    result = score(_Evaluator(), predictions)
    assert result.pop("uncertainty")["accuracy"]["stderr"] == 50.0  # issue 27: every metric's uncertainty beside it
    assert result == {
        "accuracy": 50.0,
        "details": [
            {"index": 0, "prediction": "a", "gold": "a", "extracted": "a", "correct": True},
            {"index": 1, "prediction": "b", "gold": "c", "extracted": "b", "correct": False},
        ],
    }


# ---------------------------------------------------------------------------- the files


def test_merge_joins_a_samples_epochs_and_the_file_reads_back_as_checkpoint_lines(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "tmp_d.jsonl", "v1")
    cp.open()
    error = {"type": "http", "status": 500, "message": "down", "attempts": 3}
    for entry in (
        {"index": 1, "epoch": 1, "origin_prompt": "p1", "prediction": "b1", "gold": "g1"},
        {"index": 0, "origin_prompt": "p0", "prediction": "a0", "gold": "g0"},
        {"index": 1, "origin_prompt": "p1", "prediction": "", "gold": "g1", "error": error},
        {"index": 0, "epoch": 1, "origin_prompt": "p0", "prediction": "a1", "gold": "g0"},
        {"index": 1, "origin_prompt": "p1", "prediction": "b0", "gold": "g1"},  # the failed epoch, answered on a re-run
        {"index": 1, "epoch": 2, "origin_prompt": "p1", "prediction": "", "gold": "g1", "error": error},
        {"index": 0, "epoch": 2, "origin_prompt": "p0", "prediction": "a2", "gold": "g0"},
    ):
        cp.append(entry)
    cp.close()
    out = tmp_path / "d.json"
    assert merge_checkpoints([cp.path], 2, out, epochs=3) == 2
    merged = read_strict_json(out)
    assert merged["0"] == {"origin_prompt": "p0", "prediction": "a0", "gold": "g0", "predictions": ["a0", "a1", "a2"]}
    assert merged["1"] == {"origin_prompt": "p1", "prediction": "b0", "gold": "g1", "predictions": ["b0", "b1", ""], "errors": [None, None, error]}
    again = tmp_path / "tmp_again.jsonl"
    predictions_to_checkpoint(out, again)
    lines = sorted((e["index"], e.get("epoch", 0), e["prediction"], "error" in e) for e in checkpoint_entries(again))
    assert lines == [(0, 0, "a0", False), (0, 1, "a1", False), (0, 2, "a2", False), (1, 0, "b0", False), (1, 1, "b1", False), (1, 2, "", True)]
    assert [p["index"] for p in read_predictions(out)] == [0, 1]


# ---------------------------------------------------------------------------- runs


def _expected_pass(model: str, prompts: list[str], accuracy: float, epochs: int, k: int) -> float:
    """What the simulator's rule says: epoch 0 sends no seed, epoch e ≥ 1 sends seed e (sampled)."""
    total = 0.0
    for p in prompts:
        right = sum(answers_correctly(model, p, accuracy, None if e == 0 else e) for e in range(epochs))
        total += pass_at_k(epochs, right, k)
    return round(100 * total / len(prompts), 2)


def test_a_run_of_several_epochs_sends_each_one_with_its_own_seed_and_scores_pass_at_k(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(12)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.2)}))
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=5, evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 5]})
    code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", sim.url, generation_kwargs=SAMPLING)], datasets=[ds]))
    assert code == 0
    prompts = [r["question"] for r in rows]
    scored = of_type(events, ev.DatasetScored)[0]
    assert (scored.metric, scored.score) == ("pass@1", _expected_pass("m", prompts, 0.2, 5, 1))
    assert scored.extra == (("pass@5", _expected_pass("m", prompts, 0.2, 5, 5)),)
    assert 0 < scored.score < scored.extra[0][1] < 100  # the seeds made the epochs differ
    stats = sim.stats.to_json()
    assert stats["requests_total"] == 12 * 5
    seeds = sorted({str(r["params"].get("seed")) for r in stats["log"]})
    assert seeds == ["1", "2", "3", "4", "None"]  # epoch 0 is the request a one-epoch run sends
    status = json.loads((runner.workdir.root / "infer_status" / "m" / "d.json").read_text())
    assert (status["total"], status["completed"], status["epochs"]) == (60, 60, 5)
    board = of_type(events, ev.RunFinished)[0].leaderboard
    assert [(r.metric, r.main) for r in board.datasets] == [("pass@1", True), ("pass@5", False)]
    summary = next((runner.workdir.root / "summary").glob("*.txt")).read_text()
    assert "pass@5" in summary.splitlines()[3]


def test_more_epochs_later_keep_the_epochs_done_and_a_re_run_keeps_the_pair_whole(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(8)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    model = [lightllm("m", sim.url, generation_kwargs={"do_sample": True, "seed": 7, "max_new_tokens": 64})]
    assert run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data, epochs=2)]))[0] == 0
    assert sim.stats.to_json()["requests_total"] == 16
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data)], run={"epochs": 3}))
    assert code == 0
    stats = sim.stats.to_json()
    assert stats["requests_total"] == 8  # only epoch 2 of each sample was left
    assert {r["params"]["seed"] for r in stats["log"]} == {9}  # lightllm: the plan's seed + the epoch
    started = of_type(events, ev.DatasetStarted)[0]
    assert (started.total, started.remaining) == (24, 8)
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data)], run={"epochs": 3}))
    assert code == 0 and sim.stats.to_json()["requests_total"] == 0
    assert of_type(events, ev.DatasetPlanned)[0].status == ev.PairStatus.SCORED


def test_a_kill_mid_epoch_re_sends_only_the_unfinished_sample_epoch_pairs(tmp_path: Path, sim_factory) -> None:
    """SIGKILL with part of the (sample, epoch) units checkpointed: the re-run sends exactly the
    others, and ends with the predictions and results of a run never interrupted."""
    from test_crash import ForkServer, kill_when

    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5, latency=0.02)}))
    model = lightllm("m", sim.url, max_workers=4, generation_kwargs={"do_sample": True, "seed": 3, "max_new_tokens": 64})
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=3, shards=2, evaluator={"type": "gsm8k", "reducer": "at_least_k", "k": 2})
    plan = write_plan(tmp_path, models=[model], datasets=[ds])
    assert run_plan(plan, work_dir=tmp_path / "reference")[0] == 0
    wd = tmp_path / "killed"

    def lines() -> list[dict[str, Any]]:
        return [e for p in sorted((wd / "predictions" / "m").glob("tmp_*.jsonl")) for e in checkpoint_entries(p)]

    fs = ForkServer(tmp_path / "runs.log")
    try:
        fs.start(plan, wd)
        assert kill_when(fs, lambda: len(lines()) >= 45), "the run ended before the kill"
        kept = {(e["index"], e.get("epoch", 0)) for e in lines()}
        assert 45 <= len(kept) < 120 and len(kept) == len(lines())
        assert {epoch for _, epoch in kept} == {0, 1, 2}
        from evaltui.engine.disk.records import WorkDirView

        assert WorkDirView(wd).pairs()[0].status == "running"  # its heartbeat fresh: a holder out of sight, perhaps
        then = time.time() - 600  # ten minutes on: its beats missed
        os.utime(wd / "infer_heartbeat", (then, then))
        assert WorkDirView(wd).pairs()[0].status == "stopped"  # killed: no process holds it (not "running")
        sim.reset_stats()
        assert fs.run(plan, wd) == 0
    finally:
        fs.close()
    assert sim.stats.to_json()["requests_total"] == 120 - len(kept)
    units = [(e["index"], e.get("epoch", 0)) for e in lines()]
    assert len(units) == len(set(units)) == 120  # no (sample, epoch) answered twice
    for kind in ("predictions", "results"):
        assert read_strict_json(wd / kind / "m" / "d.json") == read_strict_json(tmp_path / "reference" / kind / "m" / "d.json")


def test_retry_re_sends_only_the_failed_sample_epoch_pairs(tmp_path: Path, sim_factory) -> None:
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan
    from evaltui.sim import Faults

    rows = arithmetic(6)
    # each prompt's first request fails for good (no request retries): one of its two epochs
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(fail_first=1, fail_first_kind="500")))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, retry=0)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=2)])
    runner = Runner(load_plan(plan))

    sent: list[int] = []

    async def main() -> tuple[int, int]:
        first = await runner.run()
        sent.append(sim.stats.requests_total)  # (not reset: the simulator's per-prompt count would start again)
        return first, await runner.retry(runner.failed_pairs())

    try:
        assert anyio.run(main) == (1, 0)
    finally:
        runner.close()
    assert sim.stats.requests_total - sent[0] == 6  # the failed epoch of each sample, no other
    assert len(read_strict_json(runner.workdir.predictions_file("m", "d"))) == 6


def test_epochs_with_greedy_decoding_are_warned_about(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(2)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    models = [lightllm("greedy", sim.url), chat("sampled", sim.url, generation_kwargs=SAMPLING)]
    _, events, _ = run_plan(write_plan(tmp_path, models=models, datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=2)]))
    warned = [n.message for n in of_type(events, ev.Notice) if n.level == "warning"]
    assert len(warned) == 1 and warned[0].startswith("greedy: d runs several epochs, but the model decodes greedily")


def test_code_exec_runs_every_epochs_program_and_reduces_to_pass_at_k(tmp_path: Path) -> None:
    class Evaluator(_Evaluator):
        timeout, memory_mb = 10.0, 256

    records = [
        {"prompt": "def f():\n", "test": "def check(c):\n    assert c() == 1\n", "entry_point": "f"},
        {"prompt": "def g():\n", "test": "def check(c):\n    assert c() == 2\n", "entry_point": "g"},
    ]
    error = {"type": "timeout", "status": None, "message": "slow", "attempts": 3}
    predictions = [
        {"index": 0, "prediction": "    return 1\n", "gold": "", "predictions": ["    return 1\n", "    return 0\n", "    return 1\n"]},
        {"index": 1, "prediction": "    return 0\n", "gold": "", "predictions": ["    return 0\n", "", "    return 0\n"], "errors": [None, error, None]},
    ]
    epochs = Epochs(3, "pass_at_k", (1, 3))
    result = score(Evaluator(type="code_exec", reducer="pass_at_k", ks=(1, 3)), predictions, records, workers=2, tmp_root=str(tmp_path), epochs=epochs)
    assert (result["pass@1"], result["pass@3"]) == (round(100 * (2 / 3 + 0) / 2, 2), 50.0)
    first, second = result["details"]
    assert [e["result"] for e in first["epochs"]] == ["passed", first["epochs"][1]["result"], "passed"] and not first["epochs"][1]["correct"]
    assert second["epochs"][1] == {"extracted": None, "correct": False, "result": "failed: inference failed (timeout)", "error": "timeout"}


def test_unit_flags_keep_a_byte_per_unit() -> None:
    """What resume planning keeps of earlier runs: answered and failed units as a byte each."""
    import sys

    from evaltui.engine.run.runs import UnitFlags

    def flags(*keys: int) -> UnitFlags:  # 4 samples × 3 epochs
        return UnitFlags(12, bytearray(1 if k in keys else 0 for k in range(12)))

    done, failed = flags(0, 1, 2, 4, 5, 9), flags(3)
    assert (len(done), list(done), len(failed), list(failed)) == (6, [0, 1, 2, 4, 5, 9], 1, [3])
    assert 4 in done and 3 not in done and -1 not in done and 12 not in done and "x" not in done
    assert done.count_in(range(0, 2), 3) == 5 and done.count_in([3, 1], 3) == 3
    assert list(done.whole_samples(3)) == [0] and list(done.whole_samples(3, failed)) == [0, 1]
    assert list(UnitFlags(3, bytearray(b"\x01\x00\x01")).whole_samples(1)) == [0, 2]
    assert sys.getsizeof(UnitFlags(1_000_000).flags) < 1_100_000  # 200,000 × 5: a megabyte, not 90
