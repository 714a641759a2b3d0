"""`show --export inspect` and `show --export lm-eval`: a run in the layouts Inspect AI and
lm-evaluation-harness read, each read back by that tool's own reader — inspect_ai's
`read_eval_log` (the `evaltui[inspect]` extra), lm-eval's file helpers and its result schema
(`lm_eval.result_schema`, checked with pydantic; lm-eval installed without its dependencies,
which its readers do not need: see .ci/run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.sim import Faults, ModelProfile, SimConfig


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models × two datasets; `m` answers half right and is refused sample 4; `e` has 2 epochs."""
    from evaltui.sim import SimThread

    tmp = tmp_path_factory.mktemp("eco")
    rows = arithmetic(12)
    rows[4] = {**rows[4], "question": rows[4]["question"] + " [pad]" * 40}
    sim = SimThread(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}, faults=Faults(max_prompt_chars=200))).start()
    try:
        data = write_jsonl(tmp / "d.jsonl", rows)
        sampled = {"temperature": 1.0, "max_new_tokens": 64}
        models = [chat("m", sim.url, generation_kwargs=sampled), lightllm("n", sim.url)]
        datasets = [gsm_dataset("d", data, fail_on_error=0.5), gsm_dataset("e", data, fail_on_error=0.5, epochs=2)]
        code, _, runner = run_plan(write_plan(tmp, models=models, datasets=datasets))
    finally:
        sim.stop()
    assert code == 0
    return runner.workdir.root


def _result(root: Path, model: str, dataset: str) -> dict[str, Any]:
    return json.loads((root / "results" / model / f"{dataset}.json").read_text())


def test_inspect_reads_an_evaltui_run(run_dir: Path, tmp_path: Path) -> None:
    log_api = pytest.importorskip("inspect_ai.log", reason="the inspect export needs inspect_ai (pip install 'evaltui[inspect]')")
    out = tmp_path / "logs"
    assert main(["show", str(run_dir), "--export", "inspect", "-o", str(out)]) == 0
    infos = log_api.list_eval_logs(str(out))  # as `inspect view --log-dir` lists them
    assert len(infos) == 4
    logs = {(log.eval.model, log.eval.task): log for log in (log_api.read_eval_log(info) for info in infos)}
    m_d = logs[("evaltui/m", "d")]
    assert m_d.status == "success" and m_d.results is not None
    (score,) = m_d.results.scores
    assert score.metrics["accuracy"].value == pytest.approx(_result(run_dir, "m", "d")["accuracy"] / 100)
    samples = {s.id: s for s in m_d.samples or []}
    assert len(samples) == 12
    right = next(s for s in samples.values() if s.scores and s.scores["gsm8k"].value == "C")
    assert right.output.completion and right.target and right.scores["gsm8k"].answer in right.output.completion
    assert right.input[0].text.startswith("Q") and right.model_usage["m"].output_tokens > 0 and right.total_time
    refused = samples[4]
    assert refused.error is not None and "http" in refused.error.message and "prompt is too long" in refused.error.message
    epochs = logs[("evaltui/n", "e")]
    assert epochs.eval.config.epochs == 2 and sorted({s.epoch for s in epochs.samples or []}) == [1, 2]


def test_lm_eval_reads_an_evaltui_run(run_dir: Path, tmp_path: Path) -> None:
    schema = pytest.importorskip("lm_eval.result_schema", reason="lm-eval's readers (pip install --no-deps lm-eval numpy; .ci/run does)")
    from lm_eval.utils import get_file_task_name, get_latest_filename, get_results_filenames, get_sample_results_filenames
    from pydantic import TypeAdapter

    out = tmp_path / "lmeval"
    assert main(["show", str(run_dir), "--export", "lm-eval", "-o", str(out)]) == 0
    files = sorted(str(p) for p in out.rglob("*.json*"))
    results = get_results_filenames(files)
    assert len(results) == 2 and {Path(f).parent.name for f in results} == {"m", "n"}
    m_results = TypeAdapter(schema.EvalResults).validate_python(json.loads(Path(get_latest_filename([f for f in results if "/m/" in f])).read_text()))
    assert m_results["results"]["d"]["accuracy,none"] == pytest.approx(_result(run_dir, "m", "d")["accuracy"] / 100)
    assert m_results["n-samples"]["e"] == {"original": 12, "effective": 12} and m_results["model_name"] == "m"
    samples = get_sample_results_filenames(files)
    assert sorted(get_file_task_name(Path(f).name) for f in samples) == ["d", "d", "e", "e"]
    adapter = TypeAdapter(schema.SampleResult)
    n_e = [adapter.validate_python(json.loads(line)) for line in Path(next(f for f in samples if "/n/" in f and "_e_" in f)).read_text().splitlines()]
    assert [s["doc_id"] for s in n_e] == list(range(12))
    assert all(len(s["resps"][0]) == 2 for s in n_e)  # the two epochs, as lm-eval's repeats
    assert sum(s.get("accuracy", 0.0) for s in n_e) / 12 == pytest.approx(_result(run_dir, "n", "e")["accuracy"] / 100, abs=1e-4)  # (the result rounds to 0.01 %)


def test_exports_to_a_folder_need_one(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["show", str(run_dir), "--export", "lm-eval"])
    assert refused.value.code == 2 and "give -o DIR" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["show", str(run_dir), "--export", "lm-eval", "-o", str(tmp_path / "file")]) == 2
    assert "is a file; name a folder" in capsys.readouterr().err
    assert main(["show", str(run_dir), "--export", "lm-eval", "-o", str(run_dir / "x")]) == 2
    assert "inside the work dir" in capsys.readouterr().err
