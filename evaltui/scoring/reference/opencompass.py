"""OpenCompass 0.5.4's post-processing and evaluators, for its `gsm8k_gen` and `mmlu_gen`.

- `gsm8k`: `gsm8k_postprocess` (opencompass/datasets/gsm8k.py): the reply up to its first
  "Question:", its last number (`-?\\d+\\.\\d+|-?\\d+`), `NULL` when none; the reference after its
  "#### ", commas removed (`gsm8k_dataset_postprocess`); `Gsm8kEvaluator`: equal as text, or
  within 1e-6 as numbers (`abs(float(pred) - int(ref)) < 1e-6`).
- `answer_pattern`: `match_answer_pattern` (opencompass/utils/text_postprocessors.py): the first
  group of the first match of `pattern`, "" when none; `AccEvaluator`: equal as text.
"""

from __future__ import annotations

import re
from typing import Any

from evaltui.scoring.judgement import Judge, Judgement

_NUMBER = re.compile(r"\-?\d+\.\d+|\-?\d+")


def gsm8k_postprocess(text: str) -> str:
    numbers = _NUMBER.findall(text.split("Question:")[0])
    return numbers[-1] if numbers else "NULL"


def gsm8k_reference(gold: str) -> str:
    return gold.split("#### ")[1].replace(",", "") if "#### " in gold else gold


def gsm8k_equal(pred: str, ref: str) -> bool:
    try:
        return pred == ref or abs(float(pred) - int(ref)) < 1e-6
    except (ValueError, OverflowError):
        return False


def make_opencompass_judge(evaluator: Any) -> Judge:
    postprocess = getattr(evaluator, "postprocess", None)
    if postprocess == "gsm8k":

        def judge_gsm8k(prediction: str, gold: str) -> Judgement:
            pred = gsm8k_postprocess(prediction)
            return Judgement(pred, gsm8k_equal(pred, gsm8k_reference(gold)))

        return judge_gsm8k
    if postprocess == "answer_pattern":
        pattern = re.compile(str(getattr(evaluator, "pattern", "") or ""))

        def judge_pattern(prediction: str, gold: str) -> Judgement:
            match = pattern.search(prediction)
            pred = match.group(1) if match else ""
            return Judgement(pred, pred == gold)

        return judge_pattern
    raise ValueError(f"evaluator type 'opencompass' needs postprocess = 'gsm8k' or 'answer_pattern' (got {postprocess!r})")
