"""Score one model x dataset: every sample judged, one headline percentage.

The result has the shape of OpenCompass's results files (`{"accuracy": 71.23, "details":
[...]}`), so the summary and anyone's tooling read it the same way.  A sample that failed at
inference (it has an `"error"`) is never judged: it scores 0 and its detail keeps the error.
A dataset of several epochs judges each sample once per epoch and reduces the verdicts
(reducers.py); its details add `epochs` (each epoch's verdict) and `scores` (the reduced values).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from evaltui.plan.evaluator import Epochs

from .code.code_exec import CodeRunner, is_pass, run_code_samples, with_program
from .judgement import Judge, ScoredJudge
from .readers.choice import gold_letter, judge_choice
from .readers.gsm8k import extract_gold_number, judge_gsm8k
from .readers.mathcheck import MathChecker
from .reducers import SCORED_TYPES, MetricSums, Reduction, main_metric, percent, type_name
from .reference import make_exact_match, make_loglikelihood
from .reference.opencompass import make_opencompass_judge
from .text_match import judge_exact, judge_includes, judge_ppl, judge_tool_calls, make_regex_judge

ONE_EPOCH = Epochs(1)  # what a sample is judged by when nothing says otherwise

__all__ = ["JUDGE_REVISIONS", "epoch_answers", "gold_answer", "iter_details", "main_metric", "percent", "score"]

# Raised when an evaluator comes to judge the same reply differently (a fixed extraction), so
# that results the earlier code scored are scored again by a re-run. exact, includes, regex and
# ppl: 1 when normalize came to peel markdown, labels and Unicode forms, includes to want whole
# words and regex to take the group of the alternative that matched.
JUDGE_REVISIONS: dict[str, int] = {"gsm8k": 5, "choice": 4, "math": 1, "exact": 1, "includes": 1, "regex": 1, "ppl": 1}

_FIXED_JUDGES: dict[str, Judge] = {
    "exact": judge_exact,
    "includes": judge_includes,
    "choice": judge_choice,
    "ppl": judge_ppl,
    "tool_call_match": judge_tool_calls,
}


def gold_answer(evaluator_type: str, gold: Any) -> str | None:
    """What an evaluator compares an answer with, taken from the reference as it does: gsm8k's
    number (after `####`), choice's letter, the reference itself for the text matchers. None
    where it is not one string (code_exec's tests; math, exact_match and loglikelihood judge
    the reference their own way): the reference is then shown as it is. `evaltui show` and the
    details screen show it beside the extracted answer (a 300-character worked solution cut at
    60 hid the number that decides)."""
    text = _as_text(gold)
    if evaluator_type == "gsm8k":
        return extract_gold_number(text)
    if evaluator_type == "choice":
        return gold_letter(text)
    if evaluator_type in ("exact", "includes", "regex", "ppl"):
        return text.strip()
    return None


def _as_text(value: Any) -> str:
    """Keeps falsy references: `0` becomes "0", not ""; only a missing value becomes ""."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


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


def epoch_answers(sample: dict[str, Any]) -> list[tuple[str, Any]]:
    """(prediction, error or None) of each epoch of a predictions entry (one for a one-epoch entry)."""
    predictions = sample.get("predictions")
    if not isinstance(predictions, list):
        return [(_as_text(sample.get("prediction")), sample.get("error"))]
    errors = sample.get("errors")
    if not isinstance(errors, list) or len(errors) != len(predictions):
        errors = [None] * len(predictions)
    return [(_as_text(p), e) for p, e in zip(predictions, errors, strict=True)]


def _epoch_verdict(extracted: str | None, correct: bool, error: Any, **extra: Any) -> dict[str, Any]:
    verdict: dict[str, Any] = {"extracted": extracted, "correct": bool(correct), **extra}
    if error is not None:
        verdict["error"] = error.get("type") if isinstance(error, dict) else str(error)
    return verdict


def _reduced_detail(position: int, sample: dict[str, Any], epochs: list[dict[str, Any]], reduction: Reduction) -> dict[str, Any]:
    """The detail of a sample judged once per epoch: epoch 0's verdict where a one-epoch detail
    has it, every epoch's under `epochs`, the reduced values under `scores`."""
    first = epochs[0]
    detail = _detail(position, sample, first["extracted"], first["correct"])
    detail["epochs"] = epochs
    detail["scores"] = reduction.reduce([e["correct"] for e in epochs])
    return detail


def epoch_verdict(detail: dict[str, Any], epoch: int) -> dict[str, Any]:
    """One epoch's verdict in a result's detail as _reduced_detail wrote it — its `extracted`,
    `correct` (and `error`, `result`) — read back: from `epochs` when the detail has them, else
    (one epoch) the detail's own for epoch 0; {} when it has none. What `evaltui show`, the
    export, the details screen and compare all read."""
    epochs = detail.get("epochs")
    if isinstance(epochs, list):
        own = epochs[epoch] if 0 <= epoch < len(epochs) else None
        return own if isinstance(own, dict) else {}
    return detail if epoch == 0 else {}


def sample_right(detail: dict[str, Any], metric: str) -> bool:
    """Whether a sample counts as right by `metric`: its reduced score is at least 0.5 (several
    epochs, or another reducer), else epoch 0's verdict."""
    scores = detail.get("scores")
    if isinstance(scores, dict):
        value = scores.get(metric, 0.0)
        return isinstance(value, (int, float)) and value >= 0.5
    return epoch_verdict(detail, 0).get("correct") is True


def sample_value(detail: dict[str, Any], metric: str) -> float:
    """A sample's score by `metric` in [0, 1] (its reduced value; one epoch: 1 right, 0 wrong; a
    ratio metric's [right, of] as right / of) — what compare's paired tests pair."""
    scores = detail.get("scores")
    if isinstance(scores, dict):
        value = scores.get(metric, 0.0)
        if isinstance(value, (list, tuple)) and len(value) == 2:
            return float(value[0]) / float(value[1]) if value[1] else 0.0
        return float(value) if isinstance(value, (int, float)) else 0.0
    return 1.0 if epoch_verdict(detail, 0).get("correct") is True else 0.0


@contextlib.contextmanager
def _math_judge(whole: bool = False) -> Iterator[Judge]:
    """math-verify's judge, its worker process started at the first sample and ended with the dataset
    (`whole`: lm-eval's reading of the whole texts, `extract = "whole"`)."""
    with MathChecker() as checker:
        yield checker.judge_whole if whole else checker.judge


@contextlib.contextmanager
def _gsm8k_judge() -> Iterator[Judge]:
    """gsm8k's judge, with math-verify for an answer that is an expression ("3 + 6"): its worker
    is started only by the first such answer."""
    with MathChecker() as checker:
        yield functools.partial(judge_gsm8k, math_checker=checker)


def _judge_text(judging: contextlib.AbstractContextManager[Judge], predictions: Iterable[dict[str, Any]], reduction: Reduction) -> Iterator[dict[str, Any]]:
    with judging as judge:
        yield from _judge_all(judge, predictions, reduction)


def _judge_all(judge: Judge, predictions: Iterable[dict[str, Any]], reduction: Reduction) -> Iterator[dict[str, Any]]:
    for position, sample in enumerate(predictions):
        if reduction.trivial:
            if _failed_at_inference(sample):
                yield _detail(position, sample, None, False)
                continue
            verdict = judge(_as_text(sample.get("prediction")), _as_text(sample.get("gold")))
            yield _detail(position, sample, verdict.extracted, verdict.correct)
            continue
        gold = _as_text(sample.get("gold"))
        epochs = []
        for prediction, error in epoch_answers(sample):
            if error is not None:
                epochs.append(_epoch_verdict(None, False, error))
            else:
                extracted, correct = judge(prediction, gold)
                epochs.append(_epoch_verdict(extracted, correct, None))
        yield _reduced_detail(position, sample, epochs, reduction)


def _scored_judge(name: str, evaluator: Any) -> ScoredJudge:
    if name == "exact_match":
        return make_exact_match(evaluator)
    if name == "loglikelihood":
        return make_loglikelihood(evaluator)
    if name == "ifeval":  # imported only here: NLTK and langdetect load for an IFEval dataset alone
        from .ifeval import make_ifeval

        return make_ifeval(evaluator)
    raise ValueError(f"evaluator type {name!r} is judged by what the engine gives (scoring/judges/)")


def _judge_scored(judge: ScoredJudge, predictions: Iterable[dict[str, Any]], reduction: Reduction) -> Iterator[dict[str, Any]]:
    """Details of an evaluator of several metrics: each with every metric's value (`scores`),
    reduced over the epochs (each epoch's under `epochs` when there are several). A failed
    epoch scores 0 by every metric (a ratio metric keeps what it is out of)."""
    for position, sample in enumerate(predictions):
        gold = _as_text(sample.get("gold"))
        epochs = []
        for prediction, error in epoch_answers(sample):
            if error is not None:
                zero = {k: [0.0, v[1]] if isinstance(v, (list, tuple)) else 0.0 for k, v in judge("", gold, sample).scores.items()}
                epochs.append(_epoch_verdict(None, False, error, scores=zero))
            else:
                verdict = judge(prediction, gold, sample if not epochs else {**sample, "epoch": len(epochs)})
                epochs.append({**_epoch_verdict(verdict.extracted, verdict.correct, None, scores=verdict.scores), **(verdict.extra or {})})
        detail = _detail(position, sample, epochs[0]["extracted"], epochs[0]["correct"])
        if len(epochs) > 1:
            detail["epochs"] = epochs
        elif "error" not in detail:  # one epoch: its detail is its verdict (a judge's explanation, an evaluator's error)
            detail.update((k, v) for k, v in epochs[0].items() if k not in detail and k != "scores")
        detail["scores"] = reduction.reduce_scores([e["scores"] for e in epochs], [e["correct"] for e in epochs])
        yield detail


def iter_details(
    evaluator: Any, predictions: Iterable[dict[str, Any]], reduction: Reduction | None = None, judge: ScoredJudge | None = None
) -> Iterator[dict[str, Any]]:
    """One detail per sample, lazily, for every evaluator but code_exec (`reduction`: how its
    epochs are reduced; by default one epoch, nothing reduced; `judge`: what judges a python or
    judged dataset's answers, which the engine makes: scoring/judges/).

    Lets the watch-scorer stream a dataset of millions of predictions from file to result file
    without holding them; code_exec runs its samples in parallel and needs them all at once.
    """
    name = type_name(getattr(evaluator, "type", None))
    main_metric(name)
    if name == "code_exec":
        raise ValueError("code_exec is scored with score(), which runs samples in parallel")
    if name in SCORED_TYPES:
        return _judge_scored(judge or _scored_judge(name, evaluator), predictions, reduction or Reduction.of(evaluator, ONE_EPOCH))
    if name == "math":
        judging: contextlib.AbstractContextManager[Judge] = _math_judge(getattr(evaluator, "extract", "answer") == "whole")
    elif name == "gsm8k":
        judging = _gsm8k_judge()
    elif name == "opencompass":
        judging = contextlib.nullcontext(make_opencompass_judge(evaluator))
    elif name == "regex":  # compiled here: a bad pattern is said before the first sample
        judging = contextlib.nullcontext(make_regex_judge(getattr(evaluator, "pattern", None)))
    else:
        judging = contextlib.nullcontext(_FIXED_JUDGES[name])
    return _judge_text(judging, predictions, reduction or Reduction.of(evaluator, ONE_EPOCH))


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
    evaluator: Any,
    predictions: Sequence[dict[str, Any]],
    records: Sequence[Any] | None,
    workers: int,
    tmp_root: str | None,
    reduction: Reduction,
    run_code: CodeRunner,
) -> list[dict[str, Any]]:
    if records is None:
        raise ValueError("evaluator type 'code_exec' needs the dataset records (prompt, test, entry_point)")
    answers = [epoch_answers(sample) for sample in predictions]
    runnable = [
        (position, epoch, prediction)
        for position, sample in enumerate(predictions)
        for epoch, (prediction, error) in enumerate(answers[position])
        if error is None
    ]
    program, rule = getattr(evaluator, "program", None), str(getattr(evaluator, "completion", "cleaned"))
    results = run_code(
        [(prediction, with_program(_record_for(position, predictions[position], records), program, rule)) for position, _, prediction in runnable],
        timeout=float(getattr(evaluator, "timeout", 10.0)),
        memory_mb=int(getattr(evaluator, "memory_mb", 1024)),
        workers=workers,
        tmp_root=tmp_root,
    )
    ran = dict(zip(((position, epoch) for position, epoch, _ in runnable), results, strict=True))
    details = []
    for position, sample in enumerate(predictions):
        epochs = []
        for epoch, (_, error) in enumerate(answers[position]):
            completion, result = ran.get((position, epoch), (None, _inference_failure(error)))
            epochs.append(_epoch_verdict(completion, is_pass(result), error, result=result))
        if reduction.trivial:
            detail = _detail(position, sample, epochs[0]["extracted"], epochs[0]["correct"])
            detail["result"] = epochs[0]["result"]
        else:
            detail = _reduced_detail(position, sample, epochs, reduction)
        details.append(detail)
    return details


def score(
    evaluator: Any,
    predictions: Sequence[dict[str, Any]],
    records: Sequence[Any] | None = None,
    *,
    workers: int = 2,
    tmp_root: str | None = None,
    epochs: Epochs = ONE_EPOCH,
    run_code: CodeRunner = run_code_samples,
) -> dict[str, Any]:
    """`{<metric>: percent rounded to 2 decimals, ..., "uncertainty": {<metric>: {stderr, ci95, n}},
    "details": [one per sample]}`, the main metric first (several with pass_at_k of several k);
    `uncertainty` only when there is one (two samples or more).

    `tmp_root`: where code_exec puts each program's temporary directory; `epochs`: how many
    each entry holds and how they are reduced (`Plan.epochs`); `run_code`: what runs code_exec's programs
    (a thread pool of `workers` here by default)."""
    reduction = Reduction.of(evaluator, epochs)
    if type_name(getattr(evaluator, "type", None)) == "code_exec":
        details = _judge_code(evaluator, predictions, records, workers, tmp_root, reduction, run_code)
    else:
        details = list(iter_details(evaluator, predictions, reduction))
    sums = MetricSums(reduction)
    for detail in details:
        sums.add(detail)
    uncertainty = sums.uncertainty()
    return {**sums.result(), **({"uncertainty": uncertainty} if uncertainty else {}), "details": details}
