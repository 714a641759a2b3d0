"""Reasoning models (issue 27): `<think>…</think>` is cut out before any evaluator reads the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import chat, run_plan, write_jsonl, write_plan

from evaltui.scoring.think import strip_reasoning
from evaltui.sim import AnswerKey, SimConfig


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("<think>7 + 8 is 14? no, 15</think>The answer is 15.", "The answer is 15."),
        ("<think>the answer is A</think>\n\nB", "B"),
        ("I reckon 3 + 4 is 8, so... </think> 7", "7"),  # the thinking opened by the chat template, in the prompt
        ("<think>still thinking about 42", ""),  # an unclosed tag leaves no answer
        ("no thinking here: 42", "no thinking here: 42"),
        ("<think>a</think> 1 <think>b</think> 2", "2"),  # what follows the last thinking
    ],
)
def test_the_thinking_is_cut_out(reply: str, answer: str) -> None:
    assert strip_reasoning(reply) == answer


def test_other_tags_and_none(tmp_path: Path) -> None:
    assert strip_reasoning("<reasoning>x = 4</reasoning>5", ("<reasoning>", "</reasoning>")) == "5"
    assert strip_reasoning("<think>4</think>5", ()) == "<think>4</think>5"


def test_a_reasoning_models_numbers_in_its_thinking_are_not_its_answer(tmp_path: Path, sim_factory: Any) -> None:
    rows = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(6)]
    key = AnswerKey()
    for r in rows:  # it thinks aloud of a wrong number first, then answers right
        key.add_gen(r["question"], f"<think>Maybe {int(r['answer']) + 10}? No.</think>{r['answer']}")
    sim = sim_factory(SimConfig(answer_key=key))
    ds = {"abbr": "d", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "exact"}}
    plain = {"abbr": "d2", **{k: v for k, v in ds.items() if k != "abbr"}, "evaluator": {"type": "gsm8k"}}
    models = [chat("m", sim.url), chat("keeps", sim.url, reasoning_tags=[])]
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=[ds, plain]))
    assert code == 0
    result = json.loads(runner.workdir.result_file("m", "d").read_text())
    assert result["accuracy"] == 100.0 and result["details"][0]["prediction"] == "1"
    assert json.loads(runner.workdir.result_file("m", "d2").read_text())["accuracy"] == 100.0
    kept = json.loads(runner.workdir.result_file("keeps", "d").read_text())
    assert kept["accuracy"] == 0.0  # reasoning_tags = []: the reply is read whole
    # the per-sample log keeps the whole reply
    logs = list((runner.workdir.root / "logs" / "samples").rglob("*"))
    assert any("<think>Maybe 11? No.</think>" in p.read_text(errors="replace") for p in logs if p.is_file())
