"""What the details screen shows for one model×dataset, read from its files.

The files, not the event stream, because they also hold what earlier runs did: a pair that
failed yesterday lists its failures today. Reading is synchronous and streams line by line
(a checkpoint can hold millions of samples), so callers run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from evaltui import fastjson
from evaltui.engine.checkpoint import iter_predictions, scan_checkpoint
from evaltui.engine.events import PairStatus, SampleError
from evaltui.engine.state import Failure
from evaltui.engine.workdir import WorkDir


class PredictionSample(NamedTuple):
    sample_index: int
    prompt: str
    prediction: str
    gold: str
    correct: bool | None  # None until the pair is scored


class PairDetails(NamedTuple):
    model: str
    dataset: str
    status: PairStatus
    failures: list[Failure]  # the samples that still stand failed, in index order
    predictions: list[PredictionSample]


def read_pair_details(
    workdir: WorkDir, model: str, dataset: str, status: PairStatus, *, predictions: int = 5, max_failures: int = 1000
) -> PairDetails:
    entries = _entries(workdir, model, dataset)
    succeeded: set[int] = set()
    failed: dict[int, dict[str, Any]] = {}
    # the answered samples of lowest index (checkpoints are in completion order): a max-heap
    # by index, each entry read only when it joins
    lowest: list[tuple[int, dict[str, Any]]] = []
    for index, ok, entry in entries:
        if ok:
            succeeded.add(index)
            failed.pop(index, None)
            if predictions <= 0 or any(-i == index for i, _ in lowest):
                continue
            if len(lowest) < predictions:
                heapq.heappush(lowest, (-index, entry()))
            elif index < -lowest[0][0]:
                heapq.heapreplace(lowest, (-index, entry()))
        elif index not in succeeded:
            failed[index] = entry()  # a later failure of the same sample replaces the earlier
    samples = [{"index": -i, **e} for i, e in sorted(lowest, reverse=True)]
    failures = [
        Failure(model, dataset, i, SampleError.from_dict(e.get("error") or {})) for i, e in sorted(failed.items())[:max_failures]
    ]
    verdicts = _verdicts(workdir.result_file(model, dataset), {s["index"] for s in samples})
    shown = [
        PredictionSample(s["index"], _text(s.get("origin_prompt")), _text(s.get("prediction")), _text(s.get("gold")), verdicts.get(s["index"]))
        for s in samples
    ]
    return PairDetails(model, dataset, status, failures, shown)


def _read_at(f: BinaryIO, offset: int) -> dict[str, Any]:
    """One checkpoint line, parsed only when it is asked for (most lines never are)."""
    f.seek(offset)
    try:
        data = fastjson.loads(f.readline())
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _entries(workdir: WorkDir, model: str, dataset: str) -> Iterator[tuple[int, bool, Any]]:
    """(index, succeeded, entry loader) of every sample on disk: the checkpoints, or the final
    predictions when the checkpoints were deleted after the merge."""
    checkpoints = workdir.checkpoint_files(model, dataset)
    if checkpoints:
        for path in checkpoints:
            try:
                reader = open(path, "rb")
            except FileNotFoundError:
                continue
            with reader:
                for index, ok, offset in scan_checkpoint(path):
                    yield index, ok, partial(_read_at, reader, offset)
        return
    path = workdir.predictions_file(model, dataset)
    if not path.exists():
        return
    try:
        for entry in iter_predictions(path):
            yield entry["index"], entry.get("error") is None, (lambda e=entry: e)
    except (OSError, ValueError):
        return  # unreadable: the next scoring says so; the details screen shows what it has


def _verdicts(result: Path, wanted: set[int]) -> dict[int, bool]:
    """`correct` of the wanted samples, from the result file's details (one per line as written)."""
    found: dict[int, bool] = {}
    if not wanted:
        return found
    with contextlib.suppress(OSError), open(result, "rb") as f:  # not scored (yet): no verdicts
        for raw in f:
            line = raw.strip().rstrip(b",")
            if not (line.startswith(b"{") and line.endswith(b"}") and b'"correct"' in line):
                continue
            try:
                detail = fastjson.loads(line)
            except ValueError:
                continue
            index = detail.get("index")
            if index in wanted and isinstance(detail.get("correct"), bool):
                found[index] = detail["correct"]
                if len(found) == len(wanted):
                    break
    return found


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)
