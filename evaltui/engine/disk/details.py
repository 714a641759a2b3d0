"""What the details screen shows for one model×dataset, read from its files.

The files, not the event stream, because they also hold what earlier runs did: a pair that
failed yesterday lists its failures today. Reading is synchronous and streams line by line
(a checkpoint can hold millions of samples), so callers run it in a worker thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from evaltui import fastjson
from evaltui.engine.disk.checkpoint import LineIndex
from evaltui.engine.disk.predictions import iter_predictions
from evaltui.engine.disk.records import iter_result_details, result_parts, sample_extent
from evaltui.engine.disk.samplelog import records_of
from evaltui.engine.disk.units import unit_of
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream.events import PairStatus, SampleError
from evaltui.engine.stream.pair import Failure
from evaltui.plan import Plan
from evaltui.plan.judges import JUDGED
from evaltui.scoring.score import epoch_answers, epoch_verdict, gold_answer


class PredictionSample(NamedTuple):
    sample_index: int
    prompt: str
    prediction: str
    gold: str
    correct: bool | None  # None until the pair is scored (epoch 0's verdict, for several epochs)
    epoch: int = 0
    extracted: str | None = None  # the answer the evaluator took from the prediction, once scored
    gold_answer: str | None = None  # what of the gold it compares with (gsm8k: the number); None: the gold whole
    explanation: str | None = None  # why its verdict (a judge's reasoning: its reply, REPLY_KEPT characters), when its evaluator says


class PairDetails(NamedTuple):
    model: str
    dataset: str
    status: PairStatus
    failures: list[Failure]  # the samples that still stand failed, in index order
    predictions: list[PredictionSample]
    # the records of the units shown (the first RECORDED failures, the predictions), by
    # (index, epoch): the per-sample log's attempts, tries, time and tokens (a unit the log
    # lacks: its checkpoint line's, none of those)
    records: dict[tuple[int, int], dict[str, Any]]
    parts: dict[str, dict[str, Any]] = {}  # a grouped benchmark's parts, as its result has them
    judge: str = ""  # a judged dataset's judge model: the explanations are its reasoning


RECORDED = 20  # failed units whose log records the details show


def read_pair_details(
    workdir: WorkDir, plan: Plan, model: str, dataset: str, status: PairStatus, *, predictions: int = 5, max_failures: int = 1000
) -> PairDetails:
    """The units still failed (the first `max_failures`, in (index, epoch) order, each with its
    latest error) and the answered units of lowest index (`predictions` of them), from the
    pair's checkpoints — or from its final predictions when the checkpoints were deleted after
    the merge. The checkpoints are indexed as `evaltui show` reads them (checkpoint.LineIndex,
    ~13 bytes a unit), never as a set of every unit."""
    ds = plan.dataset(dataset)
    epochs = plan.epochs(ds).count
    checkpoints = [p for p in workdir.checkpoint_files(model, dataset) if p.exists()]
    if checkpoints:
        samples = sample_extent(workdir, plan, model, ds, checkpoints)
        failed, answered = _from_checkpoints(checkpoints, samples, epochs, predictions, max_failures)
    else:
        failed, answered = _from_predictions(workdir.predictions_file(model, dataset), predictions, max_failures)
    failures = [Failure(model, dataset, i, SampleError.from_dict(e.get("error") or {}), epoch=ep) for (i, ep), e in failed]
    verdicts = _verdicts(workdir.result_file(model, dataset), {i for (i, _), _ in answered})
    judge = ds.evaluator.judge or "" if ds.evaluator.type in JUDGED else ""
    # not scored yet (being judged): the judge's verdicts as they come back
    judging = _judging(workdir.verdicts_file(model, dataset), {k for k, _ in answered if k[0] not in verdicts}) if judge else {}
    shown = []
    for (index, epoch), e in answered:
        own = epoch_verdict(verdicts[index], epoch) if index in verdicts else judging.get((index, epoch), {})
        correct = own.get("correct") if isinstance(own.get("correct"), bool) else None
        extracted = own.get("extracted")
        gold = _text(e.get("gold"))
        shown.append(PredictionSample(index, _text(e.get("origin_prompt")), _text(e.get("prediction")), gold, correct, epoch,
                                      extracted if isinstance(extracted, str) else None, gold_answer(ds.evaluator.type, gold), _explanation(own)))
    wanted = {(f.sample_index, f.epoch) for f in failures[:RECORDED]} | {(p.sample_index, p.epoch) for p in shown}
    records = records_of(workdir.sample_log_files(model, dataset), wanted, checkpoints) if wanted else {}
    return PairDetails(model, dataset, status, failures, shown, records, result_parts(workdir.read_result(model, dataset)), judge)


Units = list[tuple[tuple[int, int], dict[str, Any]]]  # ((index, epoch), its checkpoint entry), in order


def _from_checkpoints(paths: list[Path], samples: int, epochs: int, predictions: int, max_failures: int) -> tuple[Units, Units]:
    """(the units failed, none of their lines a success; the first answered units), each in
    (index, epoch) order, their entries read only for the units kept."""
    failed: Units = []
    answered: Units = []
    with LineIndex(paths, samples, epochs=epochs, latest=True) as lines:
        where, good = lines.where, lines.good
        for key in range(samples * epochs):
            if where[key] < 0:
                continue
            kept = answered if good[key] else failed
            if len(kept) < (predictions if good[key] else max_failures):
                kept.append((unit_of(key, epochs), _entry(lines.line(key))))
            elif len(answered) >= predictions and len(failed) >= max_failures:
                break
    return failed, answered


def _from_predictions(path: Path, predictions: int, max_failures: int) -> tuple[Units, Units]:
    """The same from the final predictions file (each unit once, in index order)."""
    failed: Units = []
    answered: Units = []
    if not path.exists():
        return failed, answered
    try:
        for entry in iter_predictions(path):
            for epoch, (prediction, error) in enumerate(epoch_answers(entry)):
                kept = failed if error is not None else answered
                if len(kept) < (max_failures if error is not None else predictions):
                    kept.append(((entry["index"], epoch), {**entry, "prediction": prediction, "error": error}))
            if len(answered) >= predictions and len(failed) >= max_failures:
                break
    except (OSError, ValueError):
        pass  # unreadable: the next scoring says so; the details screen shows what it has
    return failed, answered


def _entry(line: bytes | None) -> dict[str, Any]:
    """One checkpoint line, parsed (only those of the units shown are)."""
    try:
        data = fastjson.loads(line or b"")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _verdicts(result: Path, wanted: set[int]) -> dict[int, dict[str, Any]]:
    """The details of the wanted samples, from the result file."""
    found: dict[int, dict[str, Any]] = {}
    if not wanted:
        return found
    for detail in iter_result_details(result):
        if detail.get("index") in wanted:
            found[detail["index"]] = detail
            if len(found) == len(wanted):
                break
    return found


def _judging(path: Path, wanted: set[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The latest verdict line of each wanted (sample, epoch) — its first turn — from the pair's
    verdicts file, as `extracted` (the grade) and `explanation` (the judge's reply): what the
    details show of a pair still being judged, before its result holds them. Read here, not with
    engine/judge/verdicts.py's reader: the judge sits above the work dir's files (and this one
    wants every judging's latest line, not one fingerprint's)."""
    found: dict[tuple[int, int], dict[str, Any]] = {}
    if not wanted:
        return found
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    line = fastjson.loads(raw)
                except ValueError:  # a line torn by a kill
                    continue
                if not isinstance(line, dict) or line.get("turn", 0) != 0:
                    continue
                key = (line.get("index"), line.get("epoch", 0))
                if key in wanted:
                    grade = line.get("grade")
                    found[key] = {"extracted": str(grade) if grade is not None else None, "explanation": line.get("reply") or line.get("error")}
    except OSError:  # not judged yet
        return {}
    return found


def _explanation(verdict: dict[str, Any]) -> str | None:
    why = verdict.get("explanation")
    return why if isinstance(why, str) and why else None


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)
