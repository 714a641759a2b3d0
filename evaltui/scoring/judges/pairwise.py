"""`pairwise`: each answer set against a baseline's answer to the same sample, by the judge.

The baseline is a model of the plan (`baseline`) or a file of its answers (`baseline_file`,
plan/baseline.py); either way the grader gets its answers by sample. This is FastChat's scale;
ArenaHard's `[[A>>B]]` one (`scale = "arena_hard"`) is arena_hard.py, the same pairs asked
with another prompt and read by other labels.

FastChat's `pair-v2` prompt (its `judge_prompts.jsonl`, shipped with mt_bench's): the question,
assistant A's answer and assistant B's; the judge ends on `[[A]]`, `[[B]]` or `[[C]]` (a tie),
read as FastChat reads it (the first of them found, in that order). Every pair is judged in both
orders — the model as A, then as B — so a judge that favours a position favours both sides
once: the sample's value is the mean of the two (a win 1, a tie 0.5, a loss 0), and the
dataset's `win_rate` their mean. The baseline's own answers against themselves are ties (0.5),
asked of no judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaltui.scoring.judges.mtbench import judge_prompts

#: The model's value by (order, grade): order 0 has the model as A, order 1 as B.
WINS = {(0, "A"): 1.0, (0, "B"): 0.0, (1, "A"): 0.0, (1, "B"): 1.0}
TIE = 0.5


class Pairwise:
    """One dataset's pairwise grading: the baseline's answers, and the judge's two requests per answer."""

    def __init__(self, baseline: str, answers: Mapping[int, Sequence[str | None]], itself: bool, digest: str | None = None) -> None:
        self.baseline = baseline  # the baseline model's abbr, or the baseline file's name
        self.answers = answers
        self.itself = itself  # the baseline's own pair: ties, asked of no judge
        self.digest = digest  # a baseline file's sha-256 (its answers are what is judged against): None for a model
        self.prompt = self.prompts()

    @staticmethod
    def prompts() -> dict[str, Any]:
        """What the judge is asked with (in the judging fingerprint: another prompt re-judges)."""
        return judge_prompts()["pair-v2"]

    def ask(self, question: str, answer_a: str, answer_b: str) -> tuple[str, str]:
        """The system prompt and the prompt of one order."""
        return self.prompt["system_prompt"], self.prompt["prompt_template"].format(question=question, answer_a=answer_a, answer_b=answer_b)

    def baseline_answer(self, index: int, epoch: int) -> str | None:
        """The baseline's answer to the same sample (its same epoch, else its first)."""
        found = self.answers.get(index) or ()
        answer = found[epoch] if epoch < len(found) else found[0] if found else None
        return answer

    def requests(self, question: str, answer: str, index: int, epoch: int) -> list[tuple[int, str, str] | tuple[int, str]]:
        if self.itself:
            return []
        base = self.baseline_answer(index, epoch)
        if base is None:
            return [(0, f"the baseline {self.baseline} has no answer for sample {index}")]
        return [(0, *self.ask(question, answer, base)), (1, *self.ask(question, base, answer))]

    @staticmethod
    def grade(reply: str) -> str | None:
        """FastChat's reading of a pair-v2 judgment: [[A]], else [[B]], else [[C]] (a tie)."""
        for grade in ("A", "B", "C"):
            if f"[[{grade}]]" in reply:
                return grade
        return None

    @staticmethod
    def value(grade: str, turn: int = 0) -> float:
        """The model's value for this order's grade (a tie 0.5)."""
        return WINS.get((turn, grade), TIE)
