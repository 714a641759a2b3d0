"""`type = "python"` (issue 27): an evaluator of your own, by 'package.module:function' or by the
name an installed package registers under the entry-point group `evaltui.evaluators`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from planmaker import chat, key_for, run_plan, write_jsonl, write_plan

from evaltui.sim import ModelProfile, SimConfig, answers_correctly

ROWS = [{"question": f"Item {i}: which code does it carry?", "answer": str(100 + 7 * i), "weight": i % 3} for i in range(12)]

SCORERS = '''
def score(record, answer, target):
    """Right when the answer is the target; item 5 raises (its sample fails, not the run)."""
    if record["question"].startswith("Item 5:"):
        raise RuntimeError("cannot read item 5")
    return {"value": answer.strip() == target, "answer": answer.strip(), "explanation": f"weight {record['weight']}"}


def half(record, answer, target):
    return 0.5 if answer.strip() == target else 0.0
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package installed for the test: `my_scorers` on sys.path, and a distribution registering
    `my_scorers:half` as the entry point `halves` of group evaltui.evaluators."""
    site = tmp_path / "site"
    (site / "my_scorers").mkdir(parents=True)
    (site / "my_scorers" / "__init__.py").write_text(SCORERS, encoding="utf-8")
    info = site / "my_scorers-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-scorers\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[evaltui.evaluators]\nhalves = my_scorers:half\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("my_scorers", None)


def _run(tmp_path: Path, sim_factory: Any, evaluator: dict[str, Any]) -> dict[str, Any]:
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=0.5)}))
    ds = {"abbr": "qa", "path": str(write_jsonl(tmp_path / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}", "evaluator": evaluator}
    code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", sim.url)], datasets=[ds]))
    assert code == 0
    return dict(json.loads(runner.workdir.result_file("m", "qa").read_text()))


@pytest.mark.reliability
def test_a_function_by_module_and_name_scores_and_its_exception_fails_one_sample(tmp_path: Path, sim_factory: Any, package: Path) -> None:
    result = _run(tmp_path, sim_factory, {"type": "python", "function": "my_scorers:score"})
    right = [answers_correctly("m", r["question"], 0.5) for r in ROWS]
    right[5] = False
    details = result["details"]
    assert [d["correct"] for d in details] == right
    assert result["accuracy"] == round(100 * sum(right) / len(ROWS), 2)
    assert details[5]["error"] == "evaluator" and details[5]["why"] == "RuntimeError: cannot read item 5"
    assert details[2]["explanation"] == "weight 2" and details[2]["extracted"] == details[2]["prediction"].strip()


def test_a_function_from_an_installed_entry_point(tmp_path: Path, sim_factory: Any, package: Path) -> None:
    result = _run(tmp_path, sim_factory, {"type": "python", "function": "halves"})
    right = [answers_correctly("m", r["question"], 0.5) for r in ROWS]
    assert result["accuracy"] == round(100 * 0.5 * sum(right) / len(ROWS), 2)  # a value between 0 and 1 counts as it is
    assert [d["scores"]["accuracy"] for d in result["details"]] == [0.5 if r else 0.0 for r in right]


def test_an_unknown_entry_point_names_the_ones_installed(tmp_path: Path, package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evaltui.cli import main

    ds = {"abbr": "qa", "path": str(write_jsonl(tmp_path / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}",
          "evaluator": {"type": "python", "function": "halfs"}}
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-chat", "url": "http://127.0.0.1:1/v1", "model": "m"}], datasets=[ds])
    assert main([str(plan), "--no-ui"]) == 2
    err = capsys.readouterr().err
    assert "datasets[0].evaluator.function: no evaluator named 'halfs'" in err and "halves" in err and "Traceback" not in err
