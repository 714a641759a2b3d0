"""mt_bench (issue 27): FastChat's single-answer grading of two-turn conversations, each turn rated
by the judge model. The judge is the simulator rating FastChat's prompts by a rule (sim/answers.py
`rating_reply`: 1 + the judged answer's last number modulo 10), so every rating is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planmaker import chat, run_plan, write_jsonl, write_plan

from evaltui.scoring.judges.mtbench import judge_prompts, rating
from evaltui.sim import AnswerKey, ModelProfile, SimConfig, answers_correctly

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mt_bench"
ROWS = [
    {"question_id": 100 + i, "category": "math" if i % 3 == 0 else "writing", "turns": [f"Item {i}: which code?", f"Item {i}: and twice that?"]}
    for i in range(9)
]
REFS = [{"question_id": r["question_id"], "choices": [{"index": 0, "turns": [f"ref {r['question_id']}", f"ref2 {r['question_id']}"]}]} for r in ROWS if r["category"] == "math"]


def _answers(i: int) -> tuple[str, str]:
    return str(100 + 7 * i), str(2 * (100 + 7 * i))


def _expected_rating(model: str, question: str, right: str) -> int:
    answer = right if answers_correctly(model, question, 0.5) else str(int(right) + 1)  # the simulator's wrong answer: the number + 1
    return 1 + int(answer) % 10


def test_each_turn_is_rated_and_the_score_is_their_mean(tmp_path: Path, sim_factory: Any) -> None:
    key = AnswerKey()
    for i, r in enumerate(ROWS):
        for question, answer in zip(r["turns"], _answers(i), strict=True):
            key.add_gen(question, answer)
    tested, judge = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.5)})), sim_factory(SimConfig())
    ds = {"abbr": "mtb", "path": str(write_jsonl(tmp_path / "q.jsonl", ROWS)), "turns": "turns", "target": "",
          "evaluator": {"type": "mt_bench", "judge": "grader", "references": str(write_jsonl(tmp_path / "ref.jsonl", REFS))}}
    plan = write_plan(tmp_path, models=[chat("m", tested.url), {**chat("grader", judge.url), "role": "judge"}], datasets=[ds])
    code, _, runner = run_plan(plan)
    assert code == 0
    result = json.loads(runner.workdir.result_file("m", "mtb").read_text())
    ratings = [[_expected_rating("m", q, a) for q, a in zip(r["turns"], _answers(i), strict=True)] for i, r in enumerate(ROWS)]
    assert [d["ratings"] for d in result["details"]] == ratings
    first, second = [r[0] for r in ratings], [r[1] for r in ratings]
    assert result["turn_1"] == round(sum(first) / len(ROWS), 2) and result["turn_2"] == round(sum(second) / len(ROWS), 2)
    assert result["score"] == round(sum(first + second) / (2 * len(ROWS)), 2)
    sent = judge.stats.log
    assert len(sent) == 2 * len(ROWS)
    math_prompts = [r.prompt for r in sent if "[The Start of Reference Answer]" in r.prompt or "<|The Start of Reference Answer|>" in r.prompt]
    assert len(math_prompts) == 2 * 3 and all("ref 100" in p or "ref 103" in p or "ref 106" in p for p in math_prompts)  # FastChat's math prompts, with the references
    prompts = judge_prompts()
    assert any(r.prompt == prompts["single-v1"]["prompt_template"].format(question=ROWS[1]["turns"][0], answer=_answer_of(sent, ROWS[1])) for r in sent)


def _answer_of(sent: Any, row: dict[str, Any]) -> str:
    i = row["question_id"] - 100
    right = _answers(i)[0]
    return right if answers_correctly("m", row["turns"][0], 0.5) else str(int(right) + 1)


def test_fastchats_rating_patterns() -> None:
    assert rating("Good.\n\nRating: [[7]]") == "7" and rating("Rating: [[8.5]]") == "8.5"
    assert rating("Rating: [6]") == "6"  # the backup pattern
    assert rating("[[3]] first, then [[9]]") == "3"  # FastChat takes the first
    assert rating("no rating") is None


def test_the_shipped_prompts_are_fastchats() -> None:
    if not (SHARED / "judge_prompts.jsonl").exists():
        pytest.skip("../shared/datasets/mt_bench is not here (a clean clone): the shipped copy is checked where it is")
    shipped = (Path(__file__).resolve().parents[1] / "evaltui" / "scoring" / "judges" / "fastchat_judge_prompts.jsonl").read_bytes()
    assert shipped == (SHARED / "judge_prompts.jsonl").read_bytes()
