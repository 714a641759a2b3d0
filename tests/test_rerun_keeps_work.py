"""Re-runs keep what is still valid and set aside (never delete) what is not."""

from __future__ import annotations

from pathlib import Path

from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.sim import Faults, SimConfig


def setup(tmp_path: Path, sim_factory, n: int = 20):  # type: ignore[no-untyped-def]
    rows = arithmetic(n)
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key))
    return rows, sim, write_jsonl(tmp_path / "data" / "d.jsonl", rows)


def test_a_fixed_judge_scores_earlier_results_again_without_inferring(tmp_path: Path, sim_factory, monkeypatch) -> None:
    from evaltui.engine.disk.versions import JUDGE_REVISIONS

    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    monkeypatch.setitem(JUDGE_REVISIONS, "gsm8k", JUDGE_REVISIONS["gsm8k"] + 1)
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert [e.score for e in of_type(events, ev.DatasetScored)] == [100.0]


def test_the_same_file_spelled_another_way_keeps_the_work(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    spellings = ["data/d.jsonl", "./data/d.jsonl", str(data), "data/../data/d.jsonl"]
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", spellings[0])])
    code, events, runner = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 20
    checkpoint = runner.workdir.checkpoint_file("m", "d").read_bytes()
    versions = {summary_version(events)}
    for spelling in spellings[1:]:
        sim.reset_stats()
        plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", spelling)])
        code, events, runner = run_plan(plan)
        assert code == 0 and sim.stats.requests_total == 0, spelling
        assert [e.status for e in of_type(events, ev.DatasetPlanned)] == ["scored"]
        assert runner.workdir.checkpoint_file("m", "d").read_bytes() == checkpoint
        versions.add(summary_version(events))
    assert not (runner.workdir.root / "superseded").exists()
    assert len(versions) == 1, versions  # the leaderboard's `version` column does not change either


def summary_version(events: list[ev.Event]) -> str:
    """The `version` column of dataset d in the run's summary CSV."""
    import csv

    (finished,) = of_type(events, ev.RunFinished)
    with open(finished.summary_files["csv"], newline="", encoding="utf-8") as f:
        (row,) = [r for r in csv.DictReader(f) if r["dataset"] == "d"]
    return row["version"]


def test_a_copy_of_the_file_elsewhere_keeps_the_work(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))[0] == 0
    copy = tmp_path / "elsewhere" / "gsm.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(data.read_bytes())
    sim.reset_stats()
    code, _, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", copy)]))
    assert code == 0 and sim.stats.requests_total == 0


def test_work_made_stale_by_an_edited_file_is_set_aside_not_deleted(tmp_path: Path, sim_factory) -> None:
    rows, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    code, _, runner = run_plan(plan)
    assert code == 0
    wd = runner.workdir
    before = {p: p.read_bytes() for p in (wd.checkpoint_file("m", "d"), wd.predictions_file("m", "d"), wd.result_file("m", "d"), wd.status_file("m", "d"))}
    write_jsonl(data, [{"question": "NEW first question", "answer": "#### 7"}, *rows])
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 21
    (stamp,) = (wd.root / "superseded").iterdir()
    for path, content in before.items():
        assert (stamp / path.relative_to(wd.root)).read_bytes() == content
    assert any("superseded" in e.message for e in of_type(events, ev.Notice))


def test_fresh_sets_the_earlier_work_aside(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    first = WorkDir(tmp_path / "out").checkpoint_file("m", "d").read_bytes()
    for n in (1, 2):  # twice in a row (the same second, perhaps): nothing set aside is overwritten
        sim.reset_stats()
        code, events, runner = run_plan(plan, fresh=True)
        assert code == 0 and sim.stats.requests_total == 20
        stamps = sorted((runner.workdir.root / "superseded").iterdir())
        assert len(stamps) == n
    kept = [s / "predictions" / "m" / "tmp_d.jsonl" for s in stamps]
    assert all(p.exists() for p in kept) and first in {p.read_bytes() for p in kept}


def test_failures_tolerated_by_fail_on_error_are_retried_by_a_rerun(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": ("long " * 10 if i < 4 else "") + f"q{i}", "answer": "#### 1"} for i in range(20)]
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key, faults=Faults(max_prompt_chars=20)))  # the 4 long ones get 400
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), fail_on_error=0.5)])
    code, events, _ = run_plan(plan)
    assert code == 0 and [e.score for e in of_type(events, ev.DatasetScored)] == [80.0]
    sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))  # the server is fixed
    sim.reset_stats()
    code, events, runner = run_plan(plan)
    assert code == 0
    assert sorted(r.prompt for r in sim.stats.log) == sorted(r["question"] for r in rows[:4])  # only the failed ones
    assert [e.score for e in of_type(events, ev.DatasetScored)] == [100.0]
    status = runner.workdir.read_status("m", "d")
    assert status["status"] == "done" and status["completed"] == 20 and status["failed"] == 0
    # Nothing failed any more: the next run keeps the pair whole.
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert [e.status for e in of_type(events, ev.DatasetPlanned)] == ["scored"]


def test_a_dataset_failed_by_refused_prompts_says_which_fail_on_error_scores_the_rest(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": ("long " * 10 if i % 5 == 0 else "") + f"q{i}", "answer": "#### 1"} for i in range(20)]
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key, faults=Faults(max_prompt_chars=20)))  # 4 prompts too long: 400
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))
    assert code == 1
    (inferred,) = of_type(events, ev.DatasetInferred)
    assert inferred.error.endswith("fail_on_error = 0.2 would score the others")
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, fail_on_error=0.2)]))
    assert code == 0 and [e.score for e in of_type(events, ev.DatasetScored)] == [80.0]


def test_a_pairs_version_is_the_one_earlier_runs_wrote(tmp_path: Path) -> None:
    """Every work dir holds pair versions (status files, checkpoints' first line): one that came
    out otherwise would set aside all earlier work as stale. These are the values before the
    version was made of parts held for all datasets (issue 23), for a simulated model (its
    accuracy counts) and a chat one, a plain dataset and one of columns, a system prompt and
    non-ASCII text, each with a data fingerprint and without one."""
    import tomli_w

    from evaltui.engine.disk.versions import pair_version
    from evaltui.plan import load_plan

    (tmp_path / "d.jsonl").write_text('{"q": "1", "a": "A"}\n')
    (tmp_path / "d.csv").write_text("1,A\n")
    plan = {
        "models": [
            {"abbr": "s", "type": "lightllm", "url": "sim://?accuracy=0.9&latency=0.01"},
            {"abbr": "c", "type": "openai-chat", "url": "http://127.0.0.1:1/v1", "model": "gpt-x", "generation_kwargs": {"temperature": 0.5, "max_new_tokens": 64}},
        ],
        "datasets": [
            {"abbr": "plain", "path": str(tmp_path / "d.jsonl"), "prompt": "{q}", "target": "{a}"},
            {"abbr": "csv", "path": str(tmp_path / "d.csv"), "prompt": "Frage: {q} — «Antwort»?", "system": "Sé breve.", "target": "{a}", "columns": ["q", "a"]},
        ],
    }
    (tmp_path / "plan.toml").write_text(tomli_w.dumps(plan))
    loaded = load_plan(tmp_path / "plan.toml", check_data=False)
    versions = {(m.abbr, d.abbr, data): pair_version(m, d, data) for m in loaded.models for d in loaded.datasets for data in ("0123456789abcdef", "")}
    assert versions == {
        ("s", "plain", "0123456789abcdef"): "313c9dfabe3a",
        ("s", "plain", ""): "7b800b3116e3",
        ("s", "csv", "0123456789abcdef"): "ebea2ea64b76",
        ("s", "csv", ""): "8805b5a91933",
        ("c", "plain", "0123456789abcdef"): "ee66d797ae0e",
        ("c", "plain", ""): "e8bd6f7c2c92",
        ("c", "csv", "0123456789abcdef"): "48d25bbcd94f",
        ("c", "csv", ""): "3f8162507805",
    }
