"""The headless core end to end on the simulated server: scores, concurrency, work dir, failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.checkpoint import scan_checkpoint
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig, answers_correctly


def expected_accuracy(model: str, prompts: list[str], accuracy: float) -> float:
    right = sum(answers_correctly(model, p, accuracy) for p in prompts)
    return round(100.0 * right / len(prompts), 2)


def test_scores_equal_the_simulators_known_accuracy(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(120)
    mc = [{"question": f"Pick the even number ({i})", "A": str(2 * i + 1), "B": str(2 * i), "answer": "B"} for i in range(80)]
    key = key_for(rows)
    for r in mc:
        key.add_gen(f"{r['question']}\nA. {r['A']}\nB. {r['B']}\nAnswer:", r["answer"])
    profiles = {"strong": ModelProfile(accuracy=0.8, latency=0.002), "weak": ModelProfile(accuracy=0.35, latency=0.002)}
    sim = sim_factory(SimConfig(answer_key=key, models=profiles))
    plan = write_plan(
        tmp_path,
        models=[lightllm("strong", sim.url), chat("weak", sim.url)],
        datasets=[
            gsm_dataset("arith", write_jsonl(tmp_path / "arith.jsonl", rows)),
            {"abbr": "mc", "path": str(write_jsonl(tmp_path / "mc.jsonl", mc)), "prompt": "{question}\nA. {A}\nB. {B}\nAnswer:", "target": "{answer}", "evaluator": {"type": "choice"}},
        ],
        run={"max_num_workers": 2},
    )
    code, events, runner = run_plan(plan)
    assert code == 0
    scored = {(e.model, e.dataset): e.score for e in of_type(events, ev.DatasetScored)}
    prompts = {"arith": [r["question"] for r in rows], "mc": [f"{r['question']}\nA. {r['A']}\nB. {r['B']}\nAnswer:" for r in mc]}
    for model, acc in (("strong", 0.8), ("weak", 0.35)):
        for ds in ("arith", "mc"):
            assert scored[(model, ds)] == expected_accuracy(model, prompts[ds], acc), (model, ds)
    assert scored[("strong", "arith")] > scored[("weak", "arith")]
    # The result files say the same, in percent, with per-sample details.
    wd = runner.workdir
    result = json.loads(wd.result_file("weak", "mc").read_text())
    assert result["accuracy"] == scored[("weak", "mc")] and len(result["details"]) == 80
    # The summary files exist and hold the leaderboard.
    finished = of_type(events, ev.RunFinished)[-1]
    txt = Path(finished.summary_files["txt"]).read_text()
    assert "arith" in txt and "strong" in txt and "Average" in txt
    assert f"{scored[('strong', 'arith')]:.2f}" in txt


def test_work_dir_layout_and_formats(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(30) + [{"question": "zero?", "answer": "#### 0"}, {"question": "empty?", "answer": ""}]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=0.005)))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, api_key_env="EVALTUI_TEST_API_KEY")],
        datasets=[gsm_dataset("one", write_jsonl(tmp_path / "d.jsonl", rows)), gsm_dataset("split", tmp_path / "d.jsonl", shards=3)],
    )
    import os

    os.environ["EVALTUI_TEST_API_KEY"] = "sk-very-secret"
    try:
        code, events, runner = run_plan(plan)
    finally:
        del os.environ["EVALTUI_TEST_API_KEY"]
    assert code == 0  # every pair scored (the two odd rows just score 0)
    wd = runner.workdir
    root = wd.root
    assert (root / "plan.toml").is_file() and "EVALTUI_TEST_API_KEY" in (root / "plan.toml").read_text()
    for f in root.rglob("*"):
        if f.is_file():
            assert "sk-very-secret" not in f.read_text(errors="replace"), f
    assert (root / "infer_heartbeat").read_text().strip()[:4].isdigit()
    assert (root / "infer_status/m/one.json").is_file()
    assert [p.name for p in sorted((root / "infer_status/m").glob("split*"))] == ["split_0.json", "split_1.json", "split_2.json"]
    assert (root / "predictions/m/tmp_split_2.jsonl").is_file() and (root / "predictions/m/tmp_one.jsonl").is_file()
    status = json.loads((root / "infer_status/m/split_1.json").read_text())
    assert status["status"] == "done" and status["total"] == 11 and status["completed"] == 11 and status["failed"] == 0
    assert set(status) >= {"status", "total", "completed", "failed", "error", "updated_at"}
    for ds in ("one", "split"):
        preds = json.loads(wd.predictions_file("m", ds).read_text())
        assert list(preds) == [str(i) for i in range(32)]  # index order, not completion order
        assert set(preds["0"]) >= {"origin_prompt", "prediction", "gold"}
        assert preds["30"]["gold"] == "#### 0" and preds["31"]["gold"] == ""  # falsy golds kept
    result = json.loads(wd.result_file("m", "split").read_text())
    assert 0 <= result["accuracy"] <= 100 and len(result["details"]) == 32
    assert list((root / "summary").glob("summary_*.txt")) and list((root / "summary").glob("summary_*.csv")) and list((root / "summary").glob("summary_*.md"))
    assert (root / "logs" / "run.log").read_text().count("scored") == 2
    # No temporary files left behind by atomic writes, and none kept private by them.
    assert not [p for p in root.rglob("*.tmp")]
    umask = os.umask(0)
    os.umask(umask)
    for f in (wd.predictions_file("m", "one"), wd.result_file("m", "one"), root / "infer_status/m/one.json"):
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask


def test_concurrency_is_one_pool_per_model_and_the_next_dataset_starts_early(tmp_path: Path, sim_factory) -> None:
    a, b = arithmetic(60, "A"), arithmetic(60, "B")
    sim = sim_factory(SimConfig(answer_key=key_for(a + b), default=ModelProfile(latency=0.03, jitter=0.03)))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=6)],
        datasets=[gsm_dataset("a", write_jsonl(tmp_path / "a.jsonl", a)), gsm_dataset("b", write_jsonl(tmp_path / "b.jsonl", b))],
    )
    code, events, _ = run_plan(plan)
    assert code == 0
    stats = sim.stats
    assert stats.max_in_flight == 6  # the pool is full and never over max_workers
    log = sorted(stats.log, key=lambda r: r.t_received)
    first_b = next(r for r in log if r.prompt.startswith("B"))
    in_flight_a = [r for r in log if r.prompt.startswith("A") and r.t_received <= first_b.t_received < r.t_done]
    assert in_flight_a, "dataset b's first request must go out while dataset a still has requests in flight"
    # Plan order: every dataset-a request was sent before the last ones of b.
    assert max(r.t_received for r in log if r.prompt.startswith("A")) < max(r.t_received for r in log if r.prompt.startswith("B"))
    started = [e.dataset for e in of_type(events, ev.DatasetStarted)]
    assert started == ["a", "b"]


def _many_datasets(tmp_path: Path, sim_factory, n: int, *, per: int, latency: float, max_workers: int, run: dict[str, Any] | None = None) -> Path:  # type: ignore[no-untyped-def]
    """A plan of `n` datasets of `per` samples each (d0, d1, …) on one model, against a simulator that answers them right."""
    rows = [arithmetic(per, f"D{k}-") for k in range(n)]
    sim = sim_factory(SimConfig(answer_key=key_for(*rows), default=ModelProfile(latency=latency)))
    datasets = [gsm_dataset(f"d{k}", write_jsonl(tmp_path / f"d{k}.jsonl", rows[k])) for k in range(n)]
    return write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=max_workers)], datasets=datasets, run=run)


def test_datasets_are_loaded_ahead_of_their_turn_without_the_poll(tmp_path: Path, sim_factory) -> None:
    """The pool loads the next datasets while the started ones still have 2 × max_workers units
    to hand out: checked as samples of the dataset being handed out come back and as the cursor
    moves on, never waiting for the poll (an hour here) or for a dataset's turn. 40 datasets of 2
    samples: four are loaded ahead of the one being handed out."""
    n = 40
    plan = _many_datasets(tmp_path, sim_factory, n, per=2, latency=0.01, max_workers=4, run={"poll_interval": 3600.0})
    code, events, _ = run_plan(plan)
    assert code == 0
    started = {e.dataset: i for i, e in enumerate(events) if isinstance(e, ev.DatasetStarted)}
    first_answer: dict[str, int] = {}
    for i, e in enumerate(events):
        if isinstance(e, ev.SampleFinished):
            first_answer.setdefault(e.dataset, i)
    assert len(started) == len(first_answer) == n
    late = [k for k in range(3, n) if started[f"d{k}"] > first_answer[f"d{k - 3}"]]
    assert not late, f"loaded only after the first answer of the dataset three before: {late}"


def test_datasets_are_loaded_no_further_ahead_than_twice_max_workers_units(tmp_path: Path, sim_factory) -> None:
    """Loading ahead stops at 2 × max_workers units (a dataset counts its units from its planning
    on): 12 datasets of 40 samples at max_workers = 2 have at most two loaded and not ended at any
    time. Loading every queued dataset at once held all their files open: 300 datasets under
    `ulimit -n 400` stopped with "Too many open files"."""
    n = 12
    plan = _many_datasets(tmp_path, sim_factory, n, per=40, latency=0.002, max_workers=2)
    code, events, _ = run_plan(plan)
    assert code == 0
    live = peak = 0
    for e in events:
        if isinstance(e, ev.DatasetStarted):
            live += 1
            peak = max(peak, live)
        elif isinstance(e, ev.DatasetInferred):
            live -= 1
    assert peak <= 2, f"{peak} of {n} datasets loaded and not ended at once"


def test_datasets_are_loaded_in_bursts_not_one_at_a_time(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Once the units ahead fall to 1.5 × max_workers, as many datasets are started as bring them
    back to 2 ×, loaded one after another by one task (their loads run warm): 60 datasets of one
    sample at max_workers = 8 load in bursts of about four after the first, not one by one as each
    dataset's unit goes out."""
    from evaltui.engine.run.pool import WorkerPool

    n = 60
    plan = _many_datasets(tmp_path, sim_factory, n, per=1, latency=0.005, max_workers=8)
    bursts: list[int] = []
    load_in_turn = WorkerPool._load_in_turn

    async def counted(self, runs):  # type: ignore[no-untyped-def]
        bursts.append(len(runs))
        await load_in_turn(self, runs)

    monkeypatch.setattr(WorkerPool, "_load_in_turn", counted)
    code, events, _ = run_plan(plan)
    assert code == 0 and len(of_type(events, ev.DatasetScored)) == n
    assert sum(bursts) == n and bursts[0] == 16
    assert sum(bursts[1:-1]) / len(bursts[1:-1]) > 3, bursts  # (one at a time before: 1)


def test_a_large_datasets_load_holds_up_none_of_the_small_ones_after_it(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The pool loads a burst of small datasets in turn in one task, and a large one (its file
    work in a thread) in a task of its own: a slow large file delays none of those after it."""
    import time

    from evaltui.engine.run import pool, runs

    monkeypatch.setattr(runs, "SMALL_UNITS", 2)  # d2's 3 samples make it large
    opened = pool.open_records

    def slow(plan, cfg, *a, **kw):  # type: ignore[no-untyped-def]
        if cfg.abbr == "d2":
            time.sleep(0.3)  # (in its thread)
        return opened(plan, cfg, *a, **kw)

    monkeypatch.setattr(pool, "open_records", slow)
    rows = [arithmetic(3 if k == 2 else 2, f"D{k}-") for k in range(6)]
    sim = sim_factory(SimConfig(answer_key=key_for(*rows), default=ModelProfile(latency=0.005)))
    datasets = [gsm_dataset(f"d{k}", write_jsonl(tmp_path / f"d{k}.jsonl", rows[k])) for k in range(6)]
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets))
    assert code == 0 and len(of_type(events, ev.DatasetScored)) == 6
    started = [e.dataset for e in of_type(events, ev.DatasetStarted)]
    assert started.index("d2") > max(started.index(f"d{k}") for k in (3, 4, 5)), started
    assert {e.dataset: e.total for e in of_type(events, ev.DatasetStarted)} == {f"d{k}": 3 if k == 2 else 2 for k in range(6)}


def test_the_scorer_looks_at_a_pair_it_saw_queued_once_when_said_inferred(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A pair whose inference this run queued is read from disk once, when said inferred, not
    also when added (it has no predictions then); a pair inferred by an earlier run is looked at
    when added, and every pair is scored."""
    from collections import Counter

    from evaltui.engine.run.scorer import Scorer

    looks: Counter[tuple[str, str]] = Counter()
    ready = Scorer._ready

    def counted(self: Scorer, pair: tuple[str, str]):  # type: ignore[no-untyped-def]
        looks[pair] += 1
        return ready(self, pair)

    monkeypatch.setattr(Scorer, "_ready", counted)
    rows = [arithmetic(2, f"D{k}-") for k in range(6)]
    sim = sim_factory(SimConfig(answer_key=key_for(*rows), default=ModelProfile(latency=0.005)))
    datasets = [gsm_dataset(f"d{k}", write_jsonl(tmp_path / f"d{k}.jsonl", rows[k])) for k in range(6)]
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets[:4])
    code, events, runner = run_plan(plan)
    assert code == 0 and len(of_type(events, ev.DatasetScored)) == 4
    assert looks == Counter({("m", f"d{k}"): 1 for k in range(4)})
    # d0 scored, d1 inferred only (its result gone): scored again, looked at when added
    runner.workdir.result_file("m", "d1").unlink()
    looks.clear()
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets))
    assert code == 0 and sorted(e.dataset for e in of_type(events, ev.DatasetScored)) == ["d1", "d4", "d5"]
    assert looks == Counter({("m", "d1"): 1, ("m", "d4"): 1, ("m", "d5"): 1})


def test_max_num_workers_runs_models_side_by_side(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=0.03)))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m1", sim.url, max_workers=3), lightllm("m2", sim.url, max_workers=3), lightllm("m3", sim.url, max_workers=3)],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))],
        run={"max_num_workers": 2},
    )
    code, _, _ = run_plan(plan)
    assert code == 0
    assert sim.stats.max_in_flight == 6  # two models at a time, three slots each


def test_failures_are_recorded_and_a_plain_rerun_retries_only_them(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key, faults=Faults(max_prompt_chars=20)))  # long prompts get 400
    long_ones = {r["question"] for r in rows if len(r["question"]) > 20}
    assert 0 < len(long_ones) < 40
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    code, events, runner = run_plan(plan)
    assert code == 1
    failed = of_type(events, ev.SampleFailed)
    assert len(failed) == len(long_ones)
    err = failed[0].error
    assert err.type == "http" and err.status == 400 and "too long" in err.message
    status = runner.workdir.read_status("m", "d")
    assert status["status"] == "fail" and status["failed"] == len(long_ones) and status["completed"] == 40 - len(long_ones)
    assert not runner.workdir.predictions_file("m", "d").exists()  # never scored while incomplete
    assert not runner.workdir.result_file("m", "d").exists()
    assert of_type(events, ev.ScoringSkipped)[0].pairs == (("m", "d"),)
    failures_log = (runner.workdir.logs_dir / "failures.jsonl").read_text().splitlines()
    assert len(failures_log) == len(long_ones) and json.loads(failures_log[0])["status"] == 400

    # The server is fixed; a plain re-run sends only the failed samples.
    sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
    sim.reset_stats()
    code, events, runner = run_plan(plan)
    assert code == 0
    assert {r.prompt for r in sim.stats.log} == long_ones
    preds = json.loads(runner.workdir.predictions_file("m", "d").read_text())
    assert len(preds) == 40 and all(p["prediction"] for p in preds.values())
    assert of_type(events, ev.DatasetScored)[0].score == 100.0


def test_fail_on_error_tolerates_a_fraction(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    long_ones = sum(len(r["question"]) > 20 for r in rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), fail_on_error=0.9)])
    code, events, runner = run_plan(plan)
    assert code == 0
    (scored,) = of_type(events, ev.DatasetScored)
    assert scored.score == round(100 * (40 - long_ones) / 40, 2)  # failed samples score 0
    preds = json.loads(runner.workdir.predictions_file("m", "d").read_text())
    assert sum("error" in p for p in preds.values()) == long_ones


def test_resume_skips_finished_pairs_and_samples(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(50)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data), gsm_dataset("e", data, limit=20)])
    assert run_plan(plan)[0] == 0
    wd = WorkDir(tmp_path / "out")
    # Dataset-level resume: everything is kept, nothing is sent again.
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert {e.status for e in of_type(events, ev.DatasetPlanned)} == {"scored"}
    # Sample-level resume: drop the final file and half the checkpoint, with a torn last line.
    wd.predictions_file("m", "d").unlink()
    wd.result_file("m", "d").unlink()
    cp = wd.checkpoint_file("m", "d")
    lines = cp.read_text().splitlines(keepends=True)
    assert json.loads(lines[0]).keys() == {"version"}  # the header line, then one line per sample
    kept = lines[:31]
    cp.write_text("".join(kept) + lines[31][: len(lines[31]) // 2])
    kept_indices = {json.loads(line)["index"] for line in kept[1:]}
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0
    assert sim.stats.requests_total == 20  # only what was not kept, the torn line included
    assert {r.prompt for r in sim.stats.log} == {rows[i]["question"] for i in range(50) if i not in kept_indices}
    indices = [index for index, _, _, _ in scan_checkpoint(cp)]
    assert sorted(indices) == list(range(50))  # no duplicates, nothing lost
    assert len(json.loads(wd.predictions_file("m", "d").read_text())) == 50
    # --fresh starts over.
    sim.reset_stats()
    code, _, _ = run_plan(plan, fresh=True)
    assert code == 0 and sim.stats.requests_total == 70


def test_changed_prompt_starts_the_pair_over(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(10)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, prompt="Q: {question}")])
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 10
    assert any("changed" in e.message for e in of_type(events, ev.Notice))


def test_one_evaluator_raising_leaves_the_others_intact(tmp_path: Path, sim_factory, monkeypatch) -> None:
    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url)],
        datasets=[gsm_dataset("a", data), {**gsm_dataset("broken", data), "evaluator": {"type": "exact"}}, gsm_dataset("c", data)],
    )
    from evaltui.scoring.score import _FIXED_JUDGES

    def broken_judge(prediction: str, gold: str):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("evaluator bug")

    monkeypatch.setitem(_FIXED_JUDGES, "exact", broken_judge)
    code, events, runner = run_plan(plan)
    assert code == 1
    by_ds = {e.dataset: e for e in of_type(events, ev.DatasetScored)}
    assert by_ds["a"].score == 100.0 and by_ds["c"].score == 100.0
    assert by_ds["broken"].score is None and "ZeroDivisionError: evaluator bug" in by_ds["broken"].error
    assert json.loads(runner.workdir.result_file("m", "broken").read_text()) == {"error": "ZeroDivisionError: evaluator bug"}
    assert runner.workdir.has_scored_result("m", "a") and runner.workdir.has_scored_result("m", "c")


def test_ppl_mode_end_to_end(tmp_path: Path, sim_factory) -> None:
    rows = [{"text": f"{i} plus {i} equals", "A": str(2 * i), "B": str(2 * i + 1), "answer": str(2 * i)} for i in range(30)]
    key = AnswerKey()
    for r in rows:
        key.add_ppl(r["text"], [f" {r['A']}", f" {r['B']}"], f" {r['answer']}")
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.6)}))
    ds = {"abbr": "p", "path": str(write_jsonl(tmp_path / "p.jsonl", rows)), "mode": "ppl", "prompt": "{text}", "choices": [" {A}", " {B}"], "target": " {answer}", "evaluator": {"type": "ppl"}}
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[ds]))
    assert code == 0
    (scored,) = of_type(events, ev.DatasetScored)
    assert scored.score == expected_accuracy("m", [r["text"] for r in rows], 0.6)
    preds = json.loads(runner.workdir.predictions_file("m", "p").read_text())
    assert len(preds["0"]["ppl"]) == 2 and sim.stats.requests_total == 60


def test_humaneval_canonical_pass_and_broken_fail_through_the_engine(tmp_path: Path, sim_factory) -> None:
    rows = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "sample_configs/data/code.jsonl").read_text().splitlines()]
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["prompt"], r["canonical_solution"])
    sim = sim_factory(SimConfig(answer_key=key, models={"good": ModelProfile(accuracy=1.0), "bad": ModelProfile(accuracy=0.0)}))
    ds = {"abbr": "code", "path": str(write_jsonl(tmp_path / "c.jsonl", rows)), "prompt": "{prompt}", "target": "{canonical_solution}", "evaluator": {"type": "code_exec", "timeout": 5.0}}
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("good", sim.url), lightllm("bad", sim.url)], datasets=[ds], run={"max_num_workers": 2}))
    assert code == 0
    scores = {e.model: e.score for e in of_type(events, ev.DatasetScored)}
    assert scores == {"good": 100.0, "bad": 0.0}


def test_runner_retry_reruns_only_the_failed_samples_of_one_pair(tmp_path: Path, sim_factory) -> None:
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    long_ones = {r["question"] for r in rows if len(r["question"]) > 20}
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = load_plan(
        write_plan(
            tmp_path,
            models=[lightllm("m", sim.url)],
            # d fails outright; t tolerates its failures (done, scored 25 %), and a retry still re-runs them
            datasets=[gsm_dataset("d", data), gsm_dataset("e", data, limit=5), gsm_dataset("t", data, fail_on_error=0.9)],
        )
    )
    events: list[ev.Event] = []
    runner = Runner(plan, sink=events.append)

    async def session() -> tuple[int, int, int]:
        with anyio.fail_after(60):
            first = await runner.run()
            assert runner.workdir.read_status("m", "d")["status"] == "fail"
            sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))  # the server is fixed
            sim.reset_stats()
            second = await runner.retry([("m", "d")])
            retried_d = {r.prompt for r in sim.stats.log}
            sim.reset_stats()
            third = await runner.retry([("m", "t")])
            assert {r.prompt for r in sim.stats.log} == long_ones
            assert retried_d == long_ones  # only the failed ones, only that pair
            return first, second, third

    assert anyio.run(session) == (1, 0, 0)
    scored = {(e.dataset, e.score) for e in of_type(events, ev.DatasetScored)}
    assert ("d", 100.0) in scored and ("t", 25.0) in scored and ("t", 100.0) in scored
    assert runner.workdir.read_status("m", "d")["status"] == "done"
    finished = of_type(events, ev.RunFinished)
    assert [f.exit_code for f in finished] == [1, 0, 0]
    assert finished[-1].leaderboard.score("m", "d") == 100.0  # the leaderboard follows the retries


def test_merge_streams_checkpoints_into_index_order_keeping_the_best_entry(tmp_path: Path) -> None:
    from evaltui.engine.disk.checkpoint import Checkpoint, scan_checkpoint
    from evaltui.engine.disk.predictions import merge_checkpoints

    cps = [Checkpoint(tmp_path / f"tmp_d_{k}.jsonl") for k in range(2)]
    for cp in cps:
        cp.open()
    cps[1].append({"index": 3, "origin_prompt": 'a "quoted" \u2028 prompt, "error": {', "prediction": "", "gold": "0", "error": {"type": "http", "status": 500, "message": "x"}})
    cps[0].append({"index": 1, "origin_prompt": "p1", "prediction": 'says "error": {no}', "gold": ""})
    cps[1].append({"index": 2, "origin_prompt": "p2", "prediction": "two", "gold": "2", "ppl": [1.5, 0.25]})
    cps[0].append({"index": 0, "origin_prompt": "p0", "prediction": "zero", "gold": "0"})
    cps[1].append({"index": 3, "origin_prompt": "p3", "prediction": "three", "gold": "3"})  # the retry that worked
    cps[1].append({"index": 3, "origin_prompt": "p3", "prediction": "", "gold": "3", "error": {"type": "timeout", "status": None, "message": "late"}})
    for cp in cps:
        cp.close()
    with open(cps[0].path, "ab") as f:
        f.write(b'{"index": 4, "origin_pro')  # torn last line
    assert [(i, ok) for i, _, ok, _ in scan_checkpoint(cps[1].path)] == [(3, False), (2, True), (3, True), (3, False)]
    assert [(i, ok) for i, _, ok, _ in scan_checkpoint(cps[0].path)] == [(1, True), (0, True)]
    out = tmp_path / "d.json"
    assert merge_checkpoints([c.path for c in cps], 5, out) == 4
    data = json.loads(out.read_text())
    assert list(data) == ["0", "1", "2", "3"]
    assert data["3"] == {"origin_prompt": "p3", "prediction": "three", "gold": "3"}
    assert data["1"]["prediction"] == 'says "error": {no}' and data["1"]["gold"] == ""
    assert data["2"]["ppl"] == [1.5, 0.25]


def test_predictions_are_read_streaming_or_whole_alike(tmp_path: Path, monkeypatch) -> None:

    from evaltui.engine.disk import predictions as checkpoint
    from evaltui.fsutil import atomic_write_json

    entries = {str(i): {"origin_prompt": f"p{i}\n", "prediction": f"a {i}", "gold": "" if i == 3 else str(i)} for i in range(600)}
    ours, foreign = tmp_path / "ours.json", tmp_path / "foreign.json"
    atomic_write_json(ours, entries)  # one entry per line
    foreign.write_text(json.dumps(entries, indent=2))  # another tool's layout
    expected = [{"index": i, **entries[str(i)]} for i in range(600)]
    for threshold in (0, checkpoint.STREAM_ABOVE):
        monkeypatch.setattr(checkpoint, "STREAM_ABOVE", threshold)
        assert list(checkpoint.iter_predictions(ours)) == expected
        assert list(checkpoint.iter_predictions(foreign)) == expected
    monkeypatch.setattr(checkpoint, "STREAM_ABOVE", 0)
    ours.write_bytes(ours.read_bytes()[:-3])  # cut short
    with pytest.raises(ValueError):
        list(checkpoint.iter_predictions(ours))


def test_a_run_keeps_the_garbage_collector_out_of_the_request_loop(tmp_path: Path) -> None:
    # In a fresh interpreter, as `evaltui PLAN` runs: what was imported and planned is frozen
    # (no collection walks it again) and young collections come every 50,000 allocations, not
    # 700 — 0.2 s of collections per 20,000 requests at 256 in flight otherwise (runner.py).
    import subprocess
    import sys

    probe = (
        "import gc, evaltui.engine.unit.heap as r\n"
        "before = gc.get_threshold()[0]\n"
        "r.settle_heap(); r.settle_heap()\n"
        "for _ in range(60000):\n"
        "    a = []; a.append(a)\n"  # cyclic garbage: still collected, in batches
        "print(before, gc.get_threshold()[0], gc.get_freeze_count() > 1000, len(gc.get_objects()) < 15000)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["700", "50000", "True", "True"]


def test_what_is_made_for_the_run_is_made_without_a_collection_and_frozen(tmp_path: Path) -> None:
    # A chunk of planned datasets read from the worker process (engine/score/process.py): no
    # collection walks its objects as they are made, nor after (frozen); a reply that is not one
    # is made without a collection too, but not frozen. Before the heap is settled, nothing changes.
    import subprocess
    import sys

    probe = (
        "import gc, evaltui.engine.unit.heap as r\n"
        "seen = []\n"
        "gc.callbacks.append(lambda phase, info: seen.append(info['generation']) if phase == 'start' else None)\n"
        "def load():\n"
        "    seen.clear(); made = [[] for _ in range(200000)]; made.append(len(seen)); return made\n"  # collections while it ran
        "print(r.made_for_the_run(load, lasting=lambda made: True)[-1] > 0)\n"  # not settled: as ever
        "r.settle_heap(); frozen = gc.get_freeze_count()\n"
        "kept = r.made_for_the_run(load, lasting=lambda made: True)\n"
        "print(kept[-1] == 0, gc.get_freeze_count() - frozen >= 200000, gc.isenabled())\n"
        "frozen = gc.get_freeze_count()\n"
        "print(r.made_for_the_run(load, lasting=lambda made: False)[-1] == 0, gc.get_freeze_count() == frozen, gc.isenabled())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["True"] * 7


def test_a_retry_in_the_same_session_after_the_data_file_grew_runs_and_scores_every_record(tmp_path: Path, sim_factory) -> None:
    """The session (the TUI's `r`) keeps its process: the records are counted again for the new
    session, so the pair that starts over on its new fingerprint runs all of them, not the old count."""
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows[:10])
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])))

    async def session() -> tuple[int, int]:
        with anyio.fail_after(60):
            first = await runner.run()
            write_jsonl(data, rows)  # ten more records
            return first, await runner.retry([("m", "d")])

    assert anyio.run(session) == (0, 0)
    result = runner.workdir.read_result("m", "d")
    assert result is not None and result["uncertainty"]["accuracy"]["n"] == 20 and result["accuracy"] == 100.0
    assert len(json.loads(runner.workdir.predictions_file("m", "d").read_text())) == 20
