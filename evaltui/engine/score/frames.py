"""The frames between the engine and its worker process (engine/worker.py): a 4-byte length,
then a pickle.

The first frame in is (plan, work dir, code workers); each next one is ("score", job, model,
dataset, statuses) or ("plan", job, model, dataset abbrs, their record counts); each frame out
is (job, temporary, value, exception): a Scored and its result's temporary, a Planned, or the
exception (the first, job UP, says the worker is up). Datasets in a reply go by abbr (DATASET):
the parent links its own (PlanLinks) rather than unpickling 10,000 copies of them.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from evaltui.engine.stream import events as ev
from evaltui.plan import DatasetConfig, Plan

if TYPE_CHECKING:
    from evaltui.engine.run.runs import DatasetRun

HEADER = struct.Struct("<I")
DATASET = "dataset"
UP = -1  # the job of the worker's first frame: it has started (imported, read the plan)


def read_frame(stream: IO[bytes]) -> Any:
    """The next object, or None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    body = stream.read(size)
    return pickle.loads(body) if len(body) == size else None


def frame(obj: Any, *, by_abbr: bool = False) -> bytes:
    """`obj` as a frame; `by_abbr`: its datasets as references (DATASET, abbr), not copies."""
    if by_abbr:
        buffer = io.BytesIO()
        _AbbrPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        body = buffer.getvalue()
    else:
        body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


class _AbbrPickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        return (DATASET, obj.abbr) if isinstance(obj, DatasetConfig) else None


class PlanLinks(pickle.Unpickler):
    """A reply's datasets, sent by abbr, as the receiving process's own DatasetConfig."""

    def __init__(self, file: IO[bytes], plan: Plan):
        super().__init__(file)
        self._plan = plan

    def persistent_load(self, pid: Any) -> Any:
        kind, abbr = pid
        if kind != DATASET:
            raise pickle.UnpicklingError(f"unknown reference {kind!r}")
        return self._plan.dataset(abbr)


def portable(e: BaseException) -> Exception:
    """`e` as it can cross the pipe: itself when it pickles, else a RuntimeError saying it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e if isinstance(e, Exception) else RuntimeError(f"{type(e).__name__}: {e}")
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


class Planned(NamedTuple):
    """A chunk of datasets planned: their runs, the pairs that await scoring, and the events
    planning said (DatasetPlanned, notices), for the parent to emit."""

    runs: list[DatasetRun]
    pending: list[tuple[str, str]]
    events: list[ev.Event]
