"""`mt_bench`: FastChat's single-answer grading of MT-Bench's two-turn conversations.

As `fastchat/llm_judge` does it (common.py `run_judge_single`): each conversation is graded twice,
its first turn alone (the `single-v1` prompt) and the whole of it (`single-v1-multi-turn`, the
second answer judged); a question of the categories math, reasoning and coding (FastChat's
NEED_REF_CATS) gets the `single-math-v1` prompts with the reference answers beside. The judge's
rating is the first `[[N]]` of its reply, else the first `[N]` (FastChat's patterns); a reply with
neither is no rating. The prompts are FastChat's `judge_prompts.jsonl`, shipped beside this module
unchanged (Apache-2.0; tests/test_mt_bench.py holds them against the copy in ../shared/datasets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

NEED_REF_CATS = ("math", "reasoning", "coding", "arena-hard-200")
ONE_SCORE_PATTERN = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_PATTERN_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
#: What each turn's verdict is out of: scores hold ratings over 100, as every metric is summed in percent.
SCALE = 100.0


@cache
def judge_prompts() -> dict[str, dict[str, Any]]:
    """FastChat's judge prompts by name (single-v1, single-math-v1-multi-turn, pair-v2, …)."""
    text = (files("evaltui.scoring.judges") / "fastchat_judge_prompts.jsonl").read_text(encoding="utf-8")
    return {p["name"]: p for p in (json.loads(line) for line in text.splitlines() if line.strip())}


def read_references(path: str | None) -> dict[Any, list[str]]:
    """FastChat's reference answers (reference_answer/gpt-4.jsonl): each question_id's turns."""
    if path is None:
        return {}
    found: dict[Any, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                item = json.loads(line)
                found[item["question_id"]] = list(item["choices"][0]["turns"])
    return found


def rating(reply: str) -> str | None:
    """The judge's rating as FastChat reads it: the first `[[N]]`, else the first `[N]`; None without either."""
    match = ONE_SCORE_PATTERN.search(reply) or ONE_SCORE_PATTERN_BACKUP.search(reply)
    return match.group(1) if match else None


class MtBench:
    """One dataset's grading: the judge's two requests for a conversation, and its rating read."""

    def __init__(self, references: Mapping[Any, Sequence[str]]) -> None:
        self.references = references
        self.prompts = judge_prompts()

    def requests(self, record: Mapping[str, Any], questions: Sequence[str], answers: Sequence[str]) -> list[tuple[int, str, str] | tuple[int, str]]:
        """(turn, system, prompt) for each of the two turns, or (turn, why) when it cannot be asked."""
        if len(questions) < 2 or len(answers) < 2:
            return [(0, f"mt_bench grades two-turn conversations; this one has {len(answers)} answers")]
        math = record.get("category") in NEED_REF_CATS
        refs: dict[str, str] = {}
        if math:
            ref = self.references.get(record.get("question_id"))
            if ref is None or len(ref) < 2:
                return [(0, f"no reference answer for question {record.get('question_id')!r} (category {record.get('category')!r}): give `references`")]
            refs = {"ref_answer_1": ref[0], "ref_answer_2": ref[1]}
        names = ("single-math-v1", "single-math-v1-multi-turn") if math else ("single-v1", "single-v1-multi-turn")
        one, two = (self.prompts[n] for n in names)
        first = one["prompt_template"].format(question=questions[0], answer=answers[0], **({"ref_answer_1": refs["ref_answer_1"]} if math else {}))
        both = two["prompt_template"].format(question_1=questions[0], question_2=questions[1], answer_1=answers[0], answer_2=answers[1], **refs)
        return [(0, one["system_prompt"], first), (1, two["system_prompt"], both)]

    @staticmethod
    def grade(reply: str) -> str | None:
        return rating(reply)

    @staticmethod
    def value(grade: str, turn: int = 0) -> float:
        return float(grade)
