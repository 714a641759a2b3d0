"""`pairwise` with `scale = "arena_hard"`: ArenaHard's judge prompt and its five-label verdict.

The prompt is arena-hard-auto's v0.1 judge, word for word: `system_prompt` and `prompt_template`
of config/judge_config.yaml in github.com/lmarena/arena-hard-auto (commit 7f1b7f5d), the
judge asked to answer the prompt itself first and end on "My final verdict is …: [[A>>B]]".
The labels are A>>B, A>B, A=B, B>A, B>>A; the last of them in the reply is the verdict
(arena-hard-auto reads `\\[\\[([AB<>=]+)\\]\\]` and drops a judgment whose labels differ; a judge
that quotes the list before its verdict is read here by its final one).

The metric stays the win rate, ties as half: A>>B and A>B are a win for A, each counted once.
arena-hard-auto weighs a strong verdict three times in its Bradley-Terry fit (show_result.py's
WEIGHT = 3); evaltui does not — a strong and a slight win are the same win here.
"""

from __future__ import annotations

import re
from typing import Any

from evaltui.scoring.judges.pairwise import TIE, Pairwise

SYSTEM_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants to the user prompt displayed below. "
    "You will be given assistant A's answer and assistant B's answer. Your job is to evaluate which assistant's answer is better.\n\n"
    "Begin your evaluation by generating your own answer to the prompt. You must provide your answers before judging any answers.\n\n"
    "When evaluating the assistants' answers, compare both assistants' answers with your answer. You must identify and correct any mistakes or "
    "inaccurate information.\n\n"
    "Then consider if the assistant's answers are helpful, relevant, and concise. Helpful means the answer correctly responds to the prompt or "
    "follows the instructions. Note when user prompt has any ambiguity or more than one interpretation, it is more helpful and appropriate to ask "
    "for clarifications or more information from the user than providing an answer based on assumptions. Relevant means all parts of the response "
    "closely connect or are appropriate to what is being asked. Concise means the response is clear and not verbose or excessive.\n\n"
    "Then consider the creativity and novelty of the assistant's answers when needed. Finally, identify any missing important information in the "
    "assistants' answers that would be beneficial to include when responding to the user prompt.\n\n"
    "After providing your explanation, you must output only one of the following choices as your final verdict with a label:\n\n"
    "1. Assistant A is significantly better: [[A>>B]]\n"
    "2. Assistant A is slightly better: [[A>B]]\n"
    "3. Tie, relatively the same: [[A=B]]\n"
    "4. Assistant B is slightly better: [[B>A]]\n"
    "5. Assistant B is significantly better: [[B>>A]]\n\n"
    'Example output: "My final verdict is tie: [[A=B]]".'
)
PROMPT_TEMPLATE = (
    "<|User Prompt|>\n{question_1}\n\n"
    "<|The Start of Assistant A's Answer|>\n{answer_1}\n<|The End of Assistant A's Answer|>\n\n"
    "<|The Start of Assistant B's Answer|>\n{answer_2}\n<|The End of Assistant B's Answer|>"
)
LABEL = re.compile(r"\[\[(A>>B|A>B|A=B|B>A|B>>A)\]\]")
#: Assistant A's value for each label (a tie 0.5).
A_VALUE = {"A>>B": 1.0, "A>B": 1.0, "A=B": TIE, "B>A": 0.0, "B>>A": 0.0}


class ArenaHard(Pairwise):
    """The same pairs in the same two orders, asked with ArenaHard's prompt and read by its labels."""

    @staticmethod
    def prompts() -> dict[str, Any]:
        return {"system_prompt": SYSTEM_PROMPT, "prompt_template": PROMPT_TEMPLATE}

    def ask(self, question: str, answer_a: str, answer_b: str) -> tuple[str, str]:
        return SYSTEM_PROMPT, PROMPT_TEMPLATE.format(question_1=question, answer_1=answer_a, answer_2=answer_b)

    @staticmethod
    def grade(reply: str) -> str | None:
        """The reply's last label ("My final verdict is …: [[A>B]]"); None without one."""
        found = LABEL.findall(reply)
        return str(found[-1]) if found else None

    @staticmethod
    def value(grade: str, turn: int = 0) -> float:
        """The model's value: it is assistant A in order 0, B in order 1."""
        a = A_VALUE.get(grade, TIE)
        return a if turn == 0 else 1.0 - a
