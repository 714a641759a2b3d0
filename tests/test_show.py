"""`evaltui show WORK_DIR` and its export: each (sample, epoch) of a run, read from its files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.sim import Faults, ModelProfile, SimConfig


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
