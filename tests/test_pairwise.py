"""pairwise (issue 27): each answer against a baseline model's, judged in both orders. The judge is
the simulator reading FastChat's pair-v2 prompt by a rule (sim/answers.py `pair_reply`: the larger
last number wins, equal ones go to A — a position bias), so every verdict is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planmaker import chat, key_for, run_plan, write_jsonl, write_plan

from evaltui.scoring.judges.pairwise import Pairwise
from evaltui.sim import ModelProfile, SimConfig, answers_correctly

ROWS = [{"question": f"Item {i}: which code does it carry?", "answer": str(100 + 7 * i)} for i in range(12)]


def test_the_win_rate_against_the_baseline_with_both_orders(tmp_path: Path, sim_factory: Any) -> None:
    tested = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=0.5), "b": ModelProfile(accuracy=1.0)}))
    judge = sim_factory(SimConfig())
    ds = {"abbr": "qa", "path": str(write_jsonl(tmp_path / "qa.jsonl", ROWS)), "prompt": "{question}", "target": "{answer}",
          "evaluator": {"type": "pairwise", "judge": "grader", "baseline": "b"}}
    models = [chat("m", tested.url), chat("b", tested.url), {**chat("grader", judge.url), "role": "judge"}]
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=[ds]))
    assert code == 0
    wrong = [not answers_correctly("m", r["question"], 0.5) for r in ROWS]
    assert any(wrong) and not all(wrong)
    # m's wrong answer is the right number + 1: larger, it wins in both orders (1); a right one equals
    # the baseline's: A wins each time, so m wins one order and loses the other (0.5), the bias cancelled
    values = [1.0 if w else 0.5 for w in wrong]
    result = json.loads(runner.workdir.result_file("m", "qa").read_text())
    assert [d["scores"]["win_rate"] for d in result["details"]] == values
    assert result["win_rate"] == round(100 * sum(values) / len(ROWS), 2)
    assert [d["extracted"] for d in result["details"]] == ["A B" if w else "A A" for w in wrong]  # the grade of each order
    baseline = json.loads(runner.workdir.result_file("b", "qa").read_text())
    assert baseline["win_rate"] == 50.0  # against itself: ties, asked of no judge
    sent = judge.stats.log
    assert len(sent) == 2 * len(ROWS)  # every pair in both orders, the baseline's own never
    first = [r.prompt for r in sent if ROWS[0]["question"] in r.prompt]
    assert len(first) == 2 and first[0] != first[1]
    a_then_b = {p.split("[The Start of Assistant A's Answer]\n")[1].split("\n")[0] for p in first}
    assert a_then_b == {ROWS[0]["answer"], _m_answer(0)} or len(a_then_b) == 1  # the two answers swap places


def _m_answer(i: int) -> str:
    right = ROWS[i]["answer"]
    return right if answers_correctly("m", ROWS[i]["question"], 0.5) else str(int(right) + 1)


def test_fastchats_pair_reading() -> None:
    assert Pairwise.grade("... [[A]]") == "A" and Pairwise.grade("[[B]]") == "B" and Pairwise.grade("a tie: [[C]]") == "C"
    assert Pairwise.grade("no verdict") is None
    assert (Pairwise.value("A", 0), Pairwise.value("A", 1), Pairwise.value("C", 1)) == (1.0, 0.0, 0.5)
