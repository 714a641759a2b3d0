"""`evaltui show WORK_DIR` and its export: each (sample, epoch) of a run, read from its files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig


@pytest.fixture
def finished_run(tmp_path: Path, sim_factory: Any) -> Path:
    """Two models × two datasets; `m` answers half right, its sample 4 is refused (400); `d` has 2 epochs."""
    rows = arithmetic(6)
    rows[4] = {**rows[4], "question": rows[4]["question"] + " [pad]" * 20}
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}, faults=Faults(max_prompt_chars=60)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    sampled = {"temperature": 1.0, "max_new_tokens": 64}
    models = [chat("m", sim.url, generation_kwargs=sampled), lightllm("n", sim.url)]
    datasets = [gsm_dataset("d", data, epochs=2, fail_on_error=0.5), gsm_dataset("e", data, fail_on_error=0.5)]
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=datasets))
    assert code == 0
    return runner.workdir.root


def _missed_beats(root: Path) -> None:
    """The heartbeat as a killed run leaves it, 10 minutes on (two beats missed many times)."""
    then = time.time() - 600
    os.utime(root / "infer_heartbeat", (then, then))


def test_show_prints_a_line_per_sample_and_epoch(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(finished_run), "--model", "m", "--dataset", "d"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("m/d: scored, accuracy ") and "10 of 12 done, 2 failed · 6 samples × 2 epochs" in lines[0]
    assert len(lines) == 1 + 12
    assert lines[1].split()[0] == "#0" and lines[2].split()[:2] == ["#0", "e1"]
    failed = [line for line in lines if "FAILED" in line]
    assert len(failed) == 2 and all("FAILED http 400" in line for line in failed)  # sample 4, both epochs
    assert all(" tokens" in line for line in lines[1:] if "FAILED" not in line)  # the chat API reports usage


def test_show_filters_and_full_texts(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(finished_run), "--failed", "--dataset", "e", "--full"]) == 0
    out = capsys.readouterr().out
    assert out.count("FAILED") == 2 and "      prompt: " in out and "[pad]" in out  # one per model
    assert main(["show", str(finished_run), "--wrong", "--model", "n", "--limit", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == ["n/d", "n/e"]
    assert all("FAILED" in line or " wrong " in line for line in lines if line.startswith(" "))


def test_show_refuses_what_is_not_a_work_dir_or_not_in_it(tmp_path: Path, finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nowhere")]) == 2
    assert "not an evaltui work dir" in capsys.readouterr().err
    assert main(["show", str(finished_run), "--model", "zz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--model: 'zz' not in" in err and "(it has: m, n)" in err


def test_show_says_which_field_of_a_work_dirs_plan_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The work dir's plan.toml is read as `evaltui watch` reads it (plan.read_snapshot): a bad
    field is named, in one line, rather than pydantic's count of errors."""
    (tmp_path / "plan.toml").write_text('[[models]]\nabbr = "m"\ntype = "nope"\nurl = "http://127.0.0.1:1/v1"\n')
    assert main(["show", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read the plan a run wrote there: " in err and "models[0].type" in err, err


def test_export_json_holds_the_plan_versions_metrics_and_records(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["show", str(finished_run), "--export", "json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "evaltui.export/1" and data["plan"]["datasets"][0]["epochs"] == 2
    assert [(p["model"], p["dataset"]) for p in data["pairs"]] == [("m", "d"), ("m", "e"), ("n", "d"), ("n", "e")]
    pair = data["pairs"][0]
    assert pair["status"] == "scored" and set(pair["metrics"]) == {"accuracy"} and pair["epochs"] == 2
    assert len(pair["version"]) == 12 and len(pair["dataset_version"]) == 12 and len(pair["leaderboard_version"]) == 6
    records = pair["records"]
    assert [(r["index"], r["epoch"]) for r in records] == [(i, e) for i in range(6) for e in range(2)]
    ok = records[0]
    assert set(ok) >= {"prompt", "answer", "attempts", "time", "took", "usage", "gold", "extracted", "correct"}
    assert ok["attempts"][0]["outcome"] == "ok" and ok["attempts"][0]["status"] == 200
    assert records[8]["error"]["status"] == 400 and records[8]["correct"] is False
    right = sum(r["correct"] for r in records) / len(records)
    assert round(100 * right, 2) == pair["metrics"]["accuracy"]


def test_export_jsonl_is_a_line_per_run_pair_and_sample(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(finished_run), "--export", "jsonl", "--dataset", "e"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == ["run", "pair", *["sample"] * 6, "pair", *["sample"] * 6]
    assert {(line["model"], line["dataset"]) for line in lines[2:8]} == {("m", "e")}


def test_show_reads_the_checkpoints_when_the_log_was_off(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = arithmetic(3)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))], run={"sample_log": False})
    code, _, runner = run_plan(plan)
    assert code == 0
    assert main(["show", str(runner.workdir.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(" right " in line and "attempt" not in line for line in lines[1:])


def _shown(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["show", str(root), *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_units_the_log_lacks_are_read_from_the_checkpoints(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Samples 0-2 run with the log off (or by a version that wrote none), 3-5 with it on: every
    one is shown, exported and in the details screen's records, the first three without attempts."""
    from evaltui.engine.disk.details import read_pair_details
    from evaltui.engine.stream.events import PairStatus

    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    model = [lightllm("m", sim.url)]
    assert run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data, sample_ids=[0, 1, 2])], run={"sample_log": False}))[0] == 0
    code, _, runner = run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data)]))
    assert code == 0 and sim.stats.requests_total == 6
    root = runner.workdir.root
    lines = _shown(root, capsys)
    assert len(lines) == 1 + 6 and all(" right " in line for line in lines[1:])
    assert ["attempt" in line for line in lines[1:]] == [False] * 3 + [True] * 3
    assert main(["show", str(root), "--export", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()][2:]
    assert [(r["index"], bool(r["attempts"]), r["correct"]) for r in records] == [(i, i >= 3, True) for i in range(6)]
    assert records[0]["prompt"] == rows[0]["question"] and records[0]["answer"] == rows[0]["answer"]
    details = read_pair_details(runner.workdir, runner.plan, "m", "d", PairStatus.DONE, predictions=6)
    assert sorted(details.records) == [(i, 0) for i in range(6)]


def test_a_unit_answered_while_the_log_was_off_is_shown_answered(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"question": "long " * 10 + "q0", "answer": "#### 1"}, *arithmetic(2)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    model = [lightllm("m", sim.url)]
    assert run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data)]))[0] == 1  # sample 0 refused, logged
    sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
    code, _, runner = run_plan(write_plan(tmp_path, models=model, datasets=[gsm_dataset("d", data)], run={"sample_log": False}))
    assert code == 0
    lines = _shown(runner.workdir.root, capsys)
    assert len(lines) == 4 and not any("FAILED" in line for line in lines) and " right " in lines[1]


def test_a_stray_checkpoint_line_far_beyond_the_dataset_is_left_out(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path in [finished_run / "predictions" / m / "tmp_e.jsonl" for m in ("m", "n")] + [finished_run / "logs" / "samples" / "m" / "e.jsonl"]:
        with open(path, "ab") as f:
            f.write(b'{"index":9999999999,"origin_prompt":"","prediction":"x","gold":""}\n')
    lines = _shown(finished_run, capsys, "--dataset", "e")
    assert len(lines) == 2 * (1 + 6)


def test_show_piped_into_a_reader_that_stops_exits_quietly(finished_run: Path) -> None:
    import subprocess
    import sys

    from watchkit import REPO

    for args in (["--export", "jsonl"], []):
        proc = subprocess.Popen([sys.executable, "-m", "evaltui", "show", str(finished_run), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # `| head` that has read its lines: every write now fails (EPIPE)
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0 and err == "", err


def test_export_refuses_an_output_it_must_not_write(finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = (finished_run / "plan.toml").read_bytes()
    cases = [
        (str(finished_run / "plan.toml"), "is inside the work dir being exported"),
        (str(finished_run / "results" / "x.json"), "is inside the work dir being exported"),
        (str(tmp_path / "nonexistent" / "dir" / "x.json"), f"no such folder: {tmp_path / 'nonexistent' / 'dir'}"),
        (str(tmp_path), "is a folder; name a file"),
    ]
    for output, why in cases:
        assert main(["show", str(finished_run), "--export", "json", "-o", output]) == 2
        err = capsys.readouterr().err
        assert err == f"evaltui: -o {output}: {why}\n" if "inside" not in why else err.startswith(f"evaltui: -o {output}: {why}") and err.count("\n") == 1
    assert (finished_run / "plan.toml").read_bytes() == plan and not (tmp_path / "nonexistent").exists()
    with pytest.raises(SystemExit) as exit_:
        main(["show", str(finished_run), "-o", str(tmp_path / "x.json")])  # -o without --export
    assert exit_.value.code == 2  # one line, no usage before it
    assert capsys.readouterr().err == "evaltui show: -o/--output is the file --export writes: give --export json or --export jsonl too\n"
    for bad in ("-1", "x"):
        with pytest.raises(SystemExit) as exit_:
            main(["show", str(finished_run), "--limit", bad])
        assert exit_.value.code == 2 and capsys.readouterr().err == f"evaltui show: argument --limit: expected a count (an integer ≥ 0), got {bad!r}\n"


def test_a_run_no_process_holds_any_more_is_shown_stopped(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A status left `running` (the run was killed with -9) is `stopped` unless a process holds
    the work dir's lock, as `evaltui watch` tells it."""
    import fcntl

    status = finished_run / "infer_status" / "n" / "e.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "status": "running"}))
    (finished_run / "results" / "n" / "e.json").unlink()
    (line,) = [x for x in _shown(finished_run, capsys, "--model", "n", "--dataset", "e") if x.startswith("n/e")]
    assert line.startswith("n/e: running · ")  # a fresh heartbeat: a holder out of this pid namespace's sight, perhaps
    _missed_beats(finished_run)
    (line,) = [x for x in _shown(finished_run, capsys, "--model", "n", "--dataset", "e") if x.startswith("n/e")]
    assert line.startswith("n/e: stopped (killed or interrupted) · ")
    with open(finished_run / ".evaltui.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a run in progress
        (line,) = [x for x in _shown(finished_run, capsys, "--model", "n", "--dataset", "e") if x.startswith("n/e")]
    assert line.startswith("n/e: running · ")


def test_a_ppl_samples_requests_are_one_per_choice_not_retries(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"text": f"{i} plus {i} equals", "A": str(2 * i), "B": str(2 * i + 1), "answer": str(2 * i)} for i in range(3)]
    key = AnswerKey()
    for r in rows:
        key.add_ppl(r["text"], [f" {r['A']}", f" {r['B']}"], f" {r['answer']}")
    sim = sim_factory(SimConfig(answer_key=key))
    ds = {"abbr": "p", "path": str(write_jsonl(tmp_path / "p.jsonl", rows)), "mode": "ppl", "prompt": "{text}", "choices": [" {A}", " {B}"], "target": " {answer}", "evaluator": {"type": "ppl"}}
    code, _, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[ds]))
    assert code == 0
    assert main(["show", str(runner.workdir.root)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 3 and all("  2 requests (one per choice): 200 ok " in line and "attempt" not in line for line in lines)


def test_a_killed_run_is_counted_from_its_checkpoints_not_its_stale_status(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kill -9 leaves the status file's counts behind the checkpoint (it is written every few
    samples, the checkpoint every sample): the count is what the checkpoint holds, as in `watch`."""
    status = finished_run / "infer_status" / "m" / "e.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "status": "running", "completed": 1, "failed": 0}))
    (finished_run / "results" / "m" / "e.json").unlink()
    checkpoint = finished_run / "predictions" / "m" / "tmp_e.jsonl"
    head, *samples = checkpoint.read_bytes().splitlines(keepends=True)
    assert len(samples) == 6 and sum(b'"error"' in s for s in samples) == 1  # sample 4 was refused
    checkpoint.write_bytes(head + b"".join(samples[:5]))  # samples 0-4 on disk: 4 answered, 1 failed
    log = finished_run / "logs" / "samples" / "m" / "e.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:5]))
    _missed_beats(finished_run)
    shown = _shown(finished_run, capsys, "--model", "m", "--dataset", "e")
    assert shown[0] == "m/e: stopped (killed or interrupted) · 4 of 6 done, 1 failed"
    assert len(shown) == 1 + 5


def test_show_and_compare_take_models_and_datasets_in_either_spelling(finished_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run takes --models/--datasets; show and compare took --model/--dataset only: every
    command now takes both spellings, alike."""
    assert main(["show", str(finished_run), "--models", "m", "--datasets", "d"]) == 0
    plural = capsys.readouterr().out
    assert main(["show", str(finished_run), "--model", "m", "--dataset", "d"]) == 0
    assert capsys.readouterr().out == plural and plural.startswith("m/d: ") and "\nn/" not in plural
    assert main(["compare", str(finished_run), str(finished_run), "--models", "m", "--datasets", "d", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["model_a"], r["dataset"]) for r in rows] == [("m", "d")]
    from evaltui.cli import build_parser

    assert build_parser().parse_args(["p.toml", "--model", "a", "--dataset", "x"]).models == ["a"]
    assert build_parser().parse_args(["p.toml", "--model", "a", "--dataset", "x"]).datasets == ["x"]


def test_a_wrong_answer_shows_the_gold_the_evaluator_compares_and_no_failures_are_said(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`wrong "19" (gold "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day. She…")`: the
    gold's first 60 characters hid the number that decides; gsm8k's is the one after `####`."""
    rows = [dict(r, answer=f"Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day. She sells the rest {'at length ' * 8}#### {r['answer'].split('#### ')[-1]}")
            for r in arithmetic(4)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.0)}))
    code, _, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))]))
    assert code == 0
    assert main(["show", str(runner.workdir.root), "--wrong"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    golds = [line.split("(gold ")[1].split(")")[0] for line in lines]
    assert golds == [f'"{r["answer"].split("#### ")[-1]}"' for r in rows], lines
    assert main(["show", str(runner.workdir.root), "--failed"]) == 0  # none failed: said, not a header alone
    assert capsys.readouterr().out.splitlines()[1:] == ["  no failed samples"]

