"""The run's worker process (`python -m evaltui.engine.worker`, `[run] scorer_process`): plans,
scores and makes the `done` files of what the engine sends it, one request after another, on
the other core.

A run of thousands of small datasets is bound by the engine process's Python time, and
planning and scoring each dataset were a third of it. The engine keeps what must stay there:
each scored result is left here under a temporary name and put in place by the engine, under
its ScoreGate (engine/score/gate.py), so a pair retried while it was scored here is fenced off
as a thread's would be; a batch's predictions and `done` statuses (engine/run/ending.py) are
too, and only while the engine still waits for them. This process holds no state of the run but the plan; it ends when its
parent closes the pipe or sends SIGUSR1 (the end of the session), or when the parent dies: a
`kill -9` of the run leaves no worker behind. Frames: engine/score/frames.py.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from evaltui.engine.disk.predictions import DoneFiles
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.resume import plan_chunk
from evaltui.engine.score.frames import UP, Planned, frame, portable, read_frame
from evaltui.engine.score.pairscore import ScoringFailed, failure_message, score_pair
from evaltui.engine.stream import events as ev
from evaltui.fsutil import discard
from evaltui.plan import Plan


def main() -> int:
    # Ctrl-C reaches the whole process group: the parent handles it and ends this process by
    # closing the pipe, so a half-written result is never left by a KeyboardInterrupt here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A SIGTERM to the whole process group (a terminal, `kill -- -PGID`) is the parent's to act
    # on too: ended here, a pair the parent may still put in place would be cut short, and its
    # end taken for a crash. SIGUSR1 is the parent's word (the run stopping with pairs still
    # queued here): end now, not after the queue. A result being written is removed on the way
    # out (atomic_writer); replies already written the parent reads and removes.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, _stop)
    # The frames own the real stdout; anything an evaluator prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    start = read_frame(sys.stdin.buffer)
    if start is None:
        return 0
    plan, root, workers = start
    workdir = WorkDir(Path(root))
    statuses = StatusWriter(workdir)
    out.write(frame((UP, None, None, None)))
    out.flush()
    kept: tuple[str, ...]  # the temporaries of the reply's results
    while (job := read_frame(sys.stdin.buffer)) is not None:
        if job[0] == "plan":
            reply, kept = _plan(plan, workdir, statuses, *job[1:]), ()
        elif job[0] == "files":
            reply, kept = _make_files(statuses, *job[1:])
        elif job[0] == "score_many":
            reply, kept = _score_many(plan, workdir, workers, *job[1:])
        else:
            reply, kept = _score(plan, workdir, workers, *job[1:])
        try:
            out.write(frame(reply, by_abbr=True))
            out.flush()
        except BaseException:  # the parent is gone (a broken pipe) or stops it: nobody will put these results in place
            discard(kept)
            return 0
    return 0


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _plan(plan: Plan, workdir: WorkDir, statuses: StatusWriter, job_id: int, model: str, abbrs: tuple[str, ...], totals: dict[str, int]) -> tuple[Any, ...]:
    """The reply for a chunk to plan (resume.plan_chunk, as Session._plan runs it in a thread)."""
    events: list[ev.Event] = []
    try:
        datasets = [plan.dataset(abbr) for abbr in abbrs]
        runs, pending = plan_chunk(plan, plan.model(model), workdir, statuses, totals, datasets, events.append)
        return (job_id, None, Planned(runs, pending, events), None)
    except Exception as e:  # (DatasetError, OSError, …): raised in the parent as planning in a thread raises it
        return (job_id, None, None, portable(e))


def _score(plan: Plan, workdir: WorkDir, workers: int, job_id: int, model: str, dataset: str, statuses: Any) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """The reply for one pair, and its result's temporary (none when it failed)."""
    kept: list[str] = []
    try:
        scored = score_pair(plan, workdir, model, dataset, workers, lambda tmp, _path: kept.append(tmp), statuses=statuses)
        return (job_id, kept[-1], scored, None), (kept[-1],)
    except Exception as e:  # the pair's error result is the parent's to write, as for a thread
        discard(kept)
        return (job_id, None, None, ScoringFailed(failure_message(e))), ()


def _score_many(plan: Plan, workdir: WorkDir, workers: int, job_id: int, pairs: tuple[tuple[str, str, Any], ...]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """The reply for pairs found ready together (WorkerProcess.score_many): each one's temporary
    (None when it failed) and its Scored or error, in order, and all the temporaries."""
    temporaries: list[str | None] = []
    outcomes: list[Any] = []
    try:
        for model, dataset, statuses in pairs:
            (_, tmp, scored, error), _ = _score(plan, workdir, workers, job_id, model, dataset, statuses)
            temporaries.append(tmp)
            outcomes.append(scored if error is None else error)
    except BaseException:  # stopped half way (SIGUSR1): those scored so far go into no reply
        discard(t for t in temporaries if t)
        raise
    kept = tuple(t for t in temporaries if t)
    return (job_id, tuple(temporaries), tuple(outcomes), None), kept


def _make_files(statuses: StatusWriter, job_id: int, files: tuple[DoneFiles, ...]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """The reply for a batch of datasets' `done` files, each left under temporary names for the
    engine to put in place: each one's (temporary, path) pairs, in order, up to the first that
    failed (the engine writes that one and the rest itself, and says what fails)."""
    made: list[list[tuple[str, str]]] = []
    mine: list[tuple[str, str]] = []
    try:
        for done in files:
            mine = []

            def left(tmp: str, path: Path, mine: list[tuple[str, str]] = mine) -> None:
                mine.append((tmp, str(path)))

            try:
                done.write(statuses, replace=left)
            except Exception:
                discard(tmp for tmp, _ in mine)
                break
            made.append(mine)
    except BaseException:  # stopped half way (SIGUSR1): none of it goes into a reply
        discard(tmp for one in (*made, mine) for tmp, _ in one)
        raise
    temporaries = tuple(tmp for one in made for tmp, _ in one)
    return (job_id, temporaries, made, None), temporaries



if __name__ == "__main__":
    raise SystemExit(main())
