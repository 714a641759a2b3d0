"""The frames between the engine and its worker process (engine/worker.py): a 4-byte length,
then a pickle.

The first frame in is (plan, work dir, code workers); each next one is ("score", job, model,
dataset, statuses), ("score_many", job, those three for each pair), ("files", job, DoneFiles for
each dataset) or ("plan", job, model, dataset abbrs, their record counts); each frame out is
(job, temporary, value, exception): a Scored and its result's temporary; each pair's temporary
and Scored or error; each dataset's (temporary, path) pairs and all the temporaries; a Planned;
or the exception (the first, job UP, says the worker is up). Datasets in a reply go by abbr (_by_abbr):
the parent links its own (PlanLinks) rather than unpickling 10,000 copies of them.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from evaltui.engine.stream import events as ev
from evaltui.plan import DatasetConfig, Plan

if TYPE_CHECKING:
    from evaltui.engine.run.runs import DatasetRun

HEADER = struct.Struct("<I")
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
    """`obj` as a frame; `by_abbr`: its datasets as references (by abbr), not copies."""
    if by_abbr:
        buffer = io.BytesIO()
        _AbbrPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        body = buffer.getvalue()
    else:
        body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def _by_abbr(ds: DatasetConfig) -> tuple[Any, tuple[str]]:
    return _linked, (ds.abbr,)


def _linked(abbr: str) -> DatasetConfig:
    """A dataset sent by abbr, as the receiving process's own (PlanLinks.load)."""
    plan = _LINKING.get()
    if plan is None:
        raise pickle.UnpicklingError("a dataset sent by abbr, read outside PlanLinks")
    return plan.dataset(abbr)


_LINKING: ContextVar[Plan | None] = ContextVar("_LINKING", default=None)


class _AbbrPickler(pickle.Pickler):
    """Datasets by abbr through the dispatch table, looked up by the object's exact type, rather
    than a `persistent_id` method, which the pickler calls for every object of a reply: for a
    chunk of 1,024 planned runs that call was a third of the frame's cost."""

    @property
    def dispatch_table(self) -> dict[type, Any]:  # type: ignore[override]
        """Read once as each frame's pickler is made: copyreg's table as it stands then (with what a
        user's evaluator module registered since), and datasets by abbr."""
        return {**copyreg.dispatch_table, DatasetConfig: _by_abbr}


class PlanLinks(pickle.Unpickler):
    """A reply's datasets, sent by abbr, as the receiving process's own DatasetConfig."""

    def __init__(self, file: IO[bytes], plan: Plan):
        super().__init__(file)
        self._plan = plan

    def load(self) -> Any:
        token = _LINKING.set(self._plan)
        try:
            return super().load()
        finally:
            _LINKING.reset(token)


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
