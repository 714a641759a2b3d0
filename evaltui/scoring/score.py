"""Score one model x dataset: every sample judged, one headline percentage.

The result has the shape of OpenCompass's results files (`{"accuracy": 71.23, "details":
[...]}`), so the summary and anyone's tooling read it the same way.  A sample that failed at
inference (it has an `"error"`) is never judged: it scores 0 and its detail keeps the error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .choice import judge_choice
from .code_exec import is_pass, run_code_samples
from .gsm8k import judge_gsm8k
from .judgement import Judge
from .text_match import judge_exact, judge_includes, judge_ppl, make_regex_judge

EVALUATOR_TYPES = ("exact", "includes", "regex", "gsm8k", "choice", "ppl", "code_exec")

# Raised when an evaluator comes to judge the same reply differently (a fixed extraction), so
# that results the earlier code scored are scored again by a re-run.
JUDGE_REVISIONS: dict[str, int] = {"gsm8k": 4, "choice": 3}

_FIXED_JUDGES: dict[str, Judge] = {
    "exact": judge_exact,
    "includes": judge_includes,
    "gsm8k": judge_gsm8k,
    "choice": judge_choice,
    "ppl": judge_ppl,
}


def _type_name(evaluator_type: Any) -> str:
    """Accept a plain string or a str-valued Enum."""
    return str(getattr(evaluator_type, "value", evaluator_type))


def main_metric(evaluator_type: Any) -> str:
    name = _type_name(evaluator_type)
    if name not in EVALUATOR_TYPES:
        raise ValueError(f"unknown evaluator type {name!r}; expected one of {', '.join(EVALUATOR_TYPES)}")
    return "pass@1" if name == "code_exec" else "accuracy"


def _as_text(value: Any) -> str:
    """Keeps falsy references: `0` becomes "0", not ""; only a missing value becomes ""."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def percent(correct: int, total: int) -> float:
    return round(100.0 * correct / total, 2) if total else 0.0


def _detail(position: int, sample: dict[str, Any], extracted: str | None, correct: bool) -> dict[str, Any]:
    detail = {
        "index": sample.get("index", position),
        "prediction": _as_text(sample.get("prediction")),
        "gold": sample.get("gold"),
        "extracted": extracted,
        "correct": bool(correct),
    }
    if sample.get("error") is not None:
        detail["error"] = sample["error"]
    return detail


def _failed_at_inference(sample: dict[str, Any]) -> bool:
    return sample.get("error") is not None


def _judge_text(judge: Judge, predictions: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for position, sample in enumerate(predictions):
        if _failed_at_inference(sample):
            yield _detail(position, sample, None, False)
            continue
        verdict = judge(_as_text(sample.get("prediction")), _as_text(sample.get("gold")))
        yield _detail(position, sample, verdict.extracted, verdict.correct)


def iter_details(evaluator: Any, predictions: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One detail per sample, lazily, for every evaluator but code_exec.

    Lets the watch-scorer stream a dataset of millions of predictions from file to result file
    without holding them; code_exec runs its samples in parallel and needs them all at once.
    """
    name = _type_name(getattr(evaluator, "type", None))
    main_metric(name)
    if name == "code_exec":
        raise ValueError("code_exec is scored with score(), which runs samples in parallel")
    judge = make_regex_judge(getattr(evaluator, "pattern", None)) if name == "regex" else _FIXED_JUDGES[name]
    return _judge_text(judge, predictions)


def _inference_failure(error: Any) -> str:
    kind = error.get("type") if isinstance(error, dict) else None
    return f"failed: inference failed ({kind or 'error'})"


def _record_for(position: int, sample: dict[str, Any], records: Sequence[Any]) -> Any:
    index = sample.get("index", position)
    if isinstance(index, str) and index.isdigit():
        index = int(index)
    if isinstance(index, int) and 0 <= index < len(records):
        return records[index]
    return None


def _judge_code(
    evaluator: Any, predictions: Sequence[dict[str, Any]], records: Sequence[Any] | None, workers: int, tmp_root: str | None
) -> list[dict[str, Any]]:
    if records is None:
        raise ValueError("evaluator type 'code_exec' needs the dataset records (prompt, test, entry_point)")
    runnable = [
        (position, sample) for position, sample in enumerate(predictions) if not _failed_at_inference(sample)
    ]
    results = run_code_samples(
        [(_as_text(sample.get("prediction")), _record_for(position, sample, records)) for position, sample in runnable],
        timeout=float(getattr(evaluator, "timeout", 10.0)),
        memory_mb=int(getattr(evaluator, "memory_mb", 1024)),
        workers=workers,
        tmp_root=tmp_root,
    )
    by_position = dict(zip((position for position, _ in runnable), results, strict=False))
    details = []
    for position, sample in enumerate(predictions):
        if position in by_position:
            completion, result = by_position[position]
            detail = _detail(position, sample, completion, is_pass(result))
        else:
            detail = _detail(position, sample, None, False)
            result = _inference_failure(sample["error"])
        detail["result"] = result
        details.append(detail)
    return details


def score(
    evaluator: Any, predictions: Sequence[dict[str, Any]], records: Sequence[Any] | None = None, *, workers: int = 2, tmp_root: str | None = None
) -> dict[str, Any]:
    """`{<main metric>: percent rounded to 2 decimals, "details": [one per sample]}`.

    `tmp_root`: where code_exec puts each program's temporary directory."""
    name = _type_name(getattr(evaluator, "type", None))
    metric = main_metric(name)
    if name == "code_exec":
        details = _judge_code(evaluator, predictions, records, workers, tmp_root)
    else:
        details = list(iter_details(evaluator, predictions))
    correct = sum(1 for detail in details if detail["correct"])
    return {metric: percent(correct, len(details)), "details": details}
