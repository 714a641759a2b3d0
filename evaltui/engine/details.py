"""What the details screen shows for one model×dataset, read from its files.

The files, not the event stream, because they also hold what earlier runs did: a pair that
failed yesterday lists its failures today. Reading is synchronous and streams line by line
(a checkpoint can hold millions of samples), so callers run it in a worker thread.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from evaltui import fastjson
from evaltui.engine.checkpoint import iter_predictions, scan_checkpoint
from evaltui.engine.events import PairStatus, SampleError
from evaltui.engine.records import iter_result_details
from evaltui.engine.samplelog import records_of
from evaltui.engine.state import Failure
from evaltui.engine.workdir import WorkDir
from evaltui.scoring.score import epoch_answers


class PredictionSample(NamedTuple):
    sample_index: int
    prompt: str
    prediction: str
    gold: str
    correct: bool | None  # None until the pair is scored (epoch 0's verdict, for several epochs)
    epoch: int = 0


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


RECORDED = 20  # failed units whose log records the details show

def read_pair_details(
    workdir: WorkDir, model: str, dataset: str, status: PairStatus, *, predictions: int = 5, max_failures: int = 1000
) -> PairDetails:
    entries = _entries(workdir, model, dataset)
    succeeded: set[tuple[int, int]] = set()
    failed: dict[tuple[int, int], dict[str, Any]] = {}
    # the answered (sample, epoch) units of lowest index (checkpoints are in completion order):
    # a max-heap by (index, epoch), each entry read only when it joins
    lowest: list[tuple[tuple[int, int], dict[str, Any]]] = []
    for index, epoch, ok, entry in entries:
        key = (index, epoch)
        if ok:
            succeeded.add(key)
            failed.pop(key, None)
            mine = (-index, -epoch)
            if predictions <= 0 or any(k == mine for k, _ in lowest):
                continue
            if len(lowest) < predictions:
                heapq.heappush(lowest, (mine, entry()))
            elif mine > lowest[0][0]:
                heapq.heapreplace(lowest, (mine, entry()))
        elif key not in succeeded:
            failed[key] = entry()  # a later failure of the same unit replaces the earlier
    samples = [{**e, "index": -k[0], "epoch": -k[1]} for k, e in sorted(lowest, reverse=True)]
    failures = [
        Failure(model, dataset, i, SampleError.from_dict(e.get("error") or {}), epoch=ep) for (i, ep), e in sorted(failed.items())[:max_failures]
    ]
    verdicts = _verdicts(workdir.result_file(model, dataset), {s["index"] for s in samples})
    shown = []
    for s in samples:
        verdict = _verdict(verdicts.get(s["index"]), s["epoch"])
        shown.append(PredictionSample(s["index"], _text(s.get("origin_prompt")), _text(s.get("prediction")), _text(s.get("gold")), verdict, s["epoch"]))
    wanted = {(f.sample_index, f.epoch) for f in failures[:RECORDED]} | {(p.sample_index, p.epoch) for p in shown}
    records = records_of(workdir.sample_log_files(model, dataset), wanted, workdir.checkpoint_files(model, dataset)) if wanted else {}
    return PairDetails(model, dataset, status, failures, shown, records)


def _read_at(f: BinaryIO, offset: int) -> dict[str, Any]:
    """One checkpoint line, parsed only when it is asked for (most lines never are)."""
    f.seek(offset)
    try:
        data = fastjson.loads(f.readline())
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _entries(workdir: WorkDir, model: str, dataset: str) -> Iterator[tuple[int, int, bool, Any]]:
    """(index, epoch, succeeded, entry loader) of every (sample, epoch) on disk: the checkpoints,
    or the final predictions when the checkpoints were deleted after the merge."""
    checkpoints = workdir.checkpoint_files(model, dataset)
    if checkpoints:
        for path in checkpoints:
            try:
                reader = open(path, "rb")
            except FileNotFoundError:
                continue
            with reader:
                for index, epoch, ok, offset in scan_checkpoint(path):
                    yield index, epoch, ok, partial(_read_at, reader, offset)
        return
    path = workdir.predictions_file(model, dataset)
    if not path.exists():
        return
    try:
        for entry in iter_predictions(path):
            for epoch, (prediction, error) in enumerate(epoch_answers(entry)):
                line = {**entry, "prediction": prediction, "error": error}
                yield entry["index"], epoch, error is None, (lambda e=line: e)
    except (OSError, ValueError):
        return  # unreadable: the next scoring says so; the details screen shows what it has


def _verdict(detail: dict[str, Any] | None, epoch: int) -> bool | None:
    """One epoch's verdict in a sample's detail (a one-epoch detail has only epoch 0's)."""
    if detail is None:
        return None
    epochs = detail.get("epochs")
    if isinstance(epochs, list):
        verdict = epochs[epoch] if epoch < len(epochs) and isinstance(epochs[epoch], dict) else {}
        value = verdict.get("correct")
    else:
        value = detail.get("correct") if epoch == 0 else None
    return value if isinstance(value, bool) else None


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


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)
