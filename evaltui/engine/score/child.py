"""The scoring process itself (`python -m evaltui.engine.score.child`): scores the pairs its
parent sends, one after another, and leaves each result under a temporary name.

The parent puts each result in place itself, under its ScoreGate (engine/run/scorer.py): a pair
retried while it was scored here is fenced off there as a thread's would be. This process holds
no state of the run but the plan; it ends when its parent closes the pipe (at the end of the
session, or because the parent died: a `kill -9` of the run leaves no scorer behind).

Frames both ways: a 4-byte length, then a pickle. The first frame in is (plan, work dir, code
workers); each next one is (job, model, dataset, statuses); each frame out is (job, temporary,
Scored, exception) with either the temporary and Scored or the exception set.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from pathlib import Path
from typing import IO, Any

from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.score.pairscore import score_pair
from evaltui.plan import Plan

HEADER = struct.Struct("<I")


def read_frame(stream: IO[bytes]) -> Any:
    """The next object, or None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    body = stream.read(size)
    return pickle.loads(body) if len(body) == size else None


def frame(obj: Any) -> bytes:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def portable(e: BaseException) -> Exception:
    """`e` as it can cross the pipe: itself when it pickles, else a RuntimeError saying it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e if isinstance(e, Exception) else RuntimeError(f"{type(e).__name__}: {e}")
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


def main() -> int:
    # Ctrl-C reaches the whole process group: the parent handles it and ends this process by
    # closing the pipe, so a half-written result is never left by a KeyboardInterrupt here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (the run stopping with pairs still queued here): end now, not after the queue. A
    # result being written is removed on the way out (atomic_writer); replies already written the
    # parent reads and removes.
    signal.signal(signal.SIGTERM, _stop)
    # The frames own the real stdout; anything an evaluator prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    start = read_frame(sys.stdin.buffer)
    if start is None:
        return 0
    plan, root, workers = start

    from evaltui import scoring  # noqa: F401  (imported before the first pair, not during it)

    workdir = WorkDir(Path(root))
    while (job := read_frame(sys.stdin.buffer)) is not None:
        reply, kept = _score(plan, workdir, workers, *job)
        try:
            out.write(frame(reply))
            out.flush()
        except BaseException:  # the parent is gone (a broken pipe) or stops it: nobody will put this result in place
            if kept:
                Path(kept).unlink(missing_ok=True)
            return 0
    return 0


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _score(plan: Plan, workdir: WorkDir, workers: int, job_id: int, model: str, dataset: str, statuses: Any) -> tuple[tuple[Any, ...], str]:
    """The reply for one pair, and its result's temporary ("" when there is none)."""
    kept: list[str] = []
    try:
        scored = score_pair(plan, workdir, model, dataset, workers, lambda tmp, _path: kept.append(tmp), statuses=statuses)
        return (job_id, kept[-1], scored, None), kept[-1]
    except Exception as e:  # the pair's error result is the parent's to write, as for a thread
        for tmp in kept:
            Path(tmp).unlink(missing_ok=True)
        return (job_id, None, None, portable(e)), ""


if __name__ == "__main__":
    raise SystemExit(main())
