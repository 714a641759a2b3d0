"""`evaltui compare A B`: the scores of two runs, their delta and the samples that flipped; refused
for datasets whose fingerprints differ, unless --force."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.plan import load_plan, select
from evaltui.sim import ModelProfile, SimConfig, answers_correctly

ROWS = arithmetic(40)


def _run(tmp_path: Path, sim_factory: Any, name: str, model: str, **dataset: Any) -> Path:
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={model: ModelProfile(accuracy=0.5)}))
    folder = tmp_path / name
    folder.mkdir()
    ds = gsm_dataset("gsm", write_jsonl(tmp_path / "data.jsonl", ROWS), **dataset)
    code, _, runner = run_plan(write_plan(folder, models=[lightllm(model, sim.url)], datasets=[ds]))
    assert code == 0
    return runner.workdir.root


def _flips(a: str, b: str) -> tuple[list[int], list[int]]:
    right_a = [answers_correctly(a, r["question"], 0.5) for r in ROWS]
    right_b = [answers_correctly(b, r["question"], 0.5) for r in ROWS]
    return ([i for i in range(40) if right_a[i] and not right_b[i]], [i for i in range(40) if right_b[i] and not right_a[i]])


def test_two_runs_compared_sample_by_sample(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, sim_factory, "a", "alpha"), _run(tmp_path, sim_factory, "b", "beta")
    assert main(["compare", str(a), str(b), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    to_wrong, to_right = _flips("alpha", "beta")
    assert (row["dataset"], row["model_a"], row["model_b"], row["metric"], row["samples"]) == ("gsm", "alpha", "beta", "accuracy", 40)
    assert (row["right_to_wrong"], row["wrong_to_right"]) == (to_wrong, to_right)
    assert to_wrong and to_right  # the two models differ both ways
    assert row["delta"] == round(row["b"] - row["a"], 2) == round(100 * (len(to_right) - len(to_wrong)) / 40, 2)
    assert main(["compare", str(a), str(b), "--list", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    # issue 27: the p-value of the paired test and whether the difference is significant follow the counts
    assert out[0].split() == ["dataset", "model", "metric", "A", "B", "delta", "right→wrong", "wrong→right", "samples", "p", "significant"]
    assert out[2].split()[:3] == ["gsm", "alpha", "→"] and out[2].split()[-5:-2] == [str(len(to_wrong)), str(len(to_right)), "40"]
    assert out[3].startswith(f"gsm alpha: right→wrong: {to_wrong[0]}, {to_wrong[1]}")
    assert main(["compare", str(a), str(b), "--list", "0"]) == 0  # the counts only
    assert len(capsys.readouterr().out.splitlines()) == 3
    for bad in ("-3", "²", "x"):
        with pytest.raises(SystemExit) as exit_:
            main(["compare", str(a), str(b), "--list", bad])
        assert exit_.value.code == 2 and capsys.readouterr().err == f"evaltui compare: argument --list: expected a count (an integer ≥ 0), got {bad!r}\n"
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(a)])
    assert exit_.value.code == 2 and capsys.readouterr().err == "evaltui compare: the following arguments are required: WORK_DIR_B\n"


def test_datasets_that_differ_are_refused_unless_forced(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, sim_factory, "a", "alpha")
    b = _run(tmp_path, sim_factory, "b", "beta", prompt="Q: {question}")
    assert main(["compare", str(a), str(b)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("evaltui: compare: gsm: the datasets differ (fingerprint ") and "--force compares them anyway" in captured.err
    assert main(["compare", str(a), str(b), "--force"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("gsm")


def test_a_subset_is_not_the_same_dataset(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, sim_factory, "a", "alpha")
    b = _run(tmp_path, sim_factory, "b", "alpha", sample_ids=list(range(10)))
    assert main(["compare", str(a), str(b)]) == 2
    assert "the datasets differ" in capsys.readouterr().err


def test_two_subset_runs_of_one_plan_compare_model_against_model(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`--models alpha` and `--models beta` runs of one two-model plan: each work dir's plan.toml
    lists both models, but each run took up one, so they compare alpha against beta."""
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={m: ModelProfile(accuracy=0.5) for m in ("alpha", "beta")}))
    ds = gsm_dataset("gsm", write_jsonl(tmp_path / "data.jsonl", ROWS))
    full = load_plan(write_plan(tmp_path, models=[lightllm("alpha", sim.url), lightllm("beta", sim.url)], datasets=[ds]))
    roots = []
    for model in ("alpha", "beta"):
        code, _, runner = run_plan(select(full, [model], None), snapshot_of=full, work_dir=tmp_path / model)
        assert code == 0 and len(load_plan(runner.workdir.root / "plan.toml").models) == 2
        roots.append(runner.workdir.root)
    assert main(["compare", *map(str, roots), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert (row["model_a"], row["model_b"], row["samples"]) == ("alpha", "beta", 40)
    assert (row["right_to_wrong"], row["wrong_to_right"]) == _flips("alpha", "beta")


def test_an_unknown_abbr_is_named_not_taken_for_nothing_in_common(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`compare A A --dataset nosuch` said "no model×dataset is scored in both"; `show` names the abbr."""
    a = _run(tmp_path, sim_factory, "a", "alpha")
    assert main(["compare", str(a), str(a), "--dataset", "nosuch"]) == 2
    assert capsys.readouterr().err == f"evaltui: compare: --dataset: 'nosuch' not in {a} or {a} (they have: gsm)\n"
    assert main(["compare", str(a), str(a), "--model", "alpha,beta"]) == 2
    assert "--model: 'beta' not in" in capsys.readouterr().err
    assert main(["compare", str(a), str(a), "--dataset", "gsm"]) == 0
