"""The engine's side of its worker process (engine/worker.py, `[run] scorer_process`), as
OpenCompass runs its scorer apart from inference.

A run of thousands of small datasets is bound by the engine process's Python time (one GIL for
the event loop, its requests and every dataset's files): scoring them there took a quarter of
it, planning them another tenth. Here each small pair of a light evaluator, and each chunk of
datasets to plan after the first, is sent to one child process on the other core; the engine
pays a frame each way (and a rename for a result).

The child leaves each result under a temporary name and the engine renames it into place with
the pair's `replace` (the ScoreGate's): a pair retried or a run stopped meanwhile is fenced off
exactly as a thread's scoring is. Should the child die or fail to start, `score` says None and
the caller scores the pair here instead; a notice says so once, with the child's last words in
`logs/scorer_process.log`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from evaltui.engine.disk.predictions import DoneFiles
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.score.frames import HEADER, UP, PlanLinks, Planned, frame
from evaltui.engine.score.pairscore import Replace, Scored
from evaltui.engine.stream import events as ev
from evaltui.engine.unit.heap import made_for_the_run
from evaltui.fsutil import discard
from evaltui.plan import DatasetConfig, Plan

LOG_NAME = "scorer_process.log"  # in logs/: what the child printed (an evaluator's prints, a crash's traceback)
#: What reading the child's replies ends with once its pipe is closed (it ended, or was killed).
CLOSED = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError)
#: A reply: (job, its result's temporary (score_many: each pair's), what was made, the error).
Reply = tuple[int, "str | tuple[str | None, ...] | None", Any, "Exception | None"]
STOP_WAIT = 5.0  # s a child is given to finish the pair it is on once the pipe is closed, before it is killed


class _Waiter:
    """One request sent: the child's reply once it comes."""

    __slots__ = ("done", "tmp", "value", "error", "lost")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.tmp: str | tuple[str | None, ...] | None = None  # a scored pair's result under its temporary name (score_many: each one's)
        self.value: Any = None  # what the child made: Scored, or a chunk's Planned
        self.error: Exception | None = None
        self.lost = False  # the child died first


class WorkerProcess:
    """The worker process: small light pairs scored, chunks of datasets planned; started by `start` or the first request."""

    def __init__(self, plan: Plan, workdir: WorkDir, workers: int, tasks: TaskGroup, emit: ev.Sink):
        """`tasks`: where its reader runs, for as long as the session lasts."""
        self.plan = plan
        self.workdir = workdir
        self.workers = workers
        self.tasks = tasks
        self.emit = emit
        self._proc: Process | None = None
        self._log: IO[bytes] | None = None
        self._starting = anyio.Lock()
        self._open = False  # started, its plan sent: requests may follow
        self._waiting: dict[int, _Waiter] = {}
        self._ids = itertools.count()
        self._broken = False  # it died or never started: every pair is scored here from now on
        self._closing = False
        self._up = False  # its first frame came: it has started
        self._replies: BufferedByteReceiveStream | None = None  # the child's stdout
        self._size: int | None = None  # the length of a reply whose header was read, not yet its body

    @property
    def ready(self) -> bool:
        """Up (it said so once it had read the plan) and not lost: a request sent now is not held
        up by its start."""
        return self._up and not self._broken

    @property
    def lost(self) -> bool:
        """It died or could not start: every request from now on is done in the run's own process."""
        return self._broken

    async def start(self) -> None:
        """Start the child now rather than at the first request."""
        await self._started()

    async def score(self, pair: tuple[str, str], statuses: Sequence[Mapping[str, Any]], replace: Replace) -> Scored | None:
        """Score `pair` in the child and put its result in place with `replace`; None when the
        child cannot (it died, or never started): then nothing was written, and the caller
        scores the pair itself. The child's error for the pair is raised here, as a thread's is."""
        waiter = await self._call(("score", pair[0], pair[1], tuple(statuses)))
        if waiter is None:
            return None
        assert isinstance(waiter.tmp, str) and isinstance(waiter.value, Scored)
        try:
            replace(waiter.tmp, self.workdir.result_file(*pair))
        except BaseException:
            _remove(waiter.tmp)
            raise
        return waiter.value

    async def score_many(self, pairs: Sequence[tuple[tuple[str, str], Sequence[Mapping[str, Any]], Replace]]) -> list[Scored | Exception] | None:
        """Score these pairs in the child in one request, each put in place with its `replace`:
        for each, its Scored or the error that stands for it (its scoring's, or StaleResult from
        its `replace`); None when the child cannot (nothing written). Pairs found ready together,
        as the datasets of a batch end (ending.py): a frame each way, not one per pair, and their
        replies handled one after another."""
        waiter = await self._call(("score_many", tuple((pair[0], pair[1], tuple(statuses)) for pair, statuses, _ in pairs)))
        if waiter is None:
            return None
        outcomes: list[Scored | Exception] = []
        for (pair, _, replace), tmp, outcome in zip(pairs, waiter.tmp or (), waiter.value, strict=True):
            if tmp is not None:
                try:
                    replace(tmp, self.workdir.result_file(*pair))
                except Exception as e:  # (StaleResult: retried meanwhile)
                    _remove(tmp)
                    outcome = e
            outcomes.append(outcome)
        return outcomes

    async def write_files(self, files: list[DoneFiles]) -> list[list[tuple[str, str]]] | None:
        """Make these datasets' `done` files in the child, in order, under temporary names (ending.py
        puts them in place): for each, its (temporary, path) pairs; it stops at the first that
        fails (the caller writes that one and the rest itself, and says what fails). None when it
        cannot. Cancelled, its reply's temporaries are removed as it comes (_read)."""
        waiter = await self._call(("files", tuple(files)))
        return None if waiter is None else list(waiter.value)

    async def plan_chunk(self, model: str, datasets: Sequence[DatasetConfig], totals: Mapping[str, int]) -> Planned | None:
        """Plan these datasets of `model` in the child (resume.plan_pairs: their `pending`
        statuses written, earlier work read and set aside where stale); None when the child
        cannot, and the caller plans them itself. Planning 10,000 datasets took ~3 s of this
        process's GIL, and more of the loop's while a thread held it."""
        abbrs = tuple(d.abbr for d in datasets)
        waiter = await self._call(("plan", model, abbrs, {a: totals[a] for a in abbrs}))
        if waiter is None:
            return None
        assert isinstance(waiter.value, Planned)
        return waiter.value

    async def _call(self, request: tuple[Any, ...]) -> _Waiter | None:
        """Send `request` and wait for its reply; None when the child cannot answer (it died, or
        never started). The child's error is raised here."""
        if self._broken or not await self._started():
            return None
        assert self._proc is not None and self._proc.stdin is not None
        job, waiter = next(self._ids), _Waiter()
        self._waiting[job] = waiter
        try:
            # (Not under a lock: a frame is one write to the pipe's transport, never interleaved.)
            await self._proc.stdin.send(frame((request[0], job, *request[1:])))
            await waiter.done.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._waiting.pop(job, None)
            self._lose("its pipe closed")
            return None
        except BaseException:  # cancelled (a retry forgot the pair, or a quit): its result is not wanted
            if self._waiting.pop(job, None) is None:
                _remove(waiter.tmp)
            raise
        if waiter.lost:
            return None
        if waiter.error is not None:
            raise waiter.error
        return waiter

    async def _started(self) -> bool:
        # Without the lock once started: hundreds of pairs sent at once each queued on it, and an
        # anyio lock hands over through the loop, once a waiter: a chunk to plan waited seconds.
        if self._open or self._broken:
            return not self._broken
        async with self._starting:
            if self._proc is None and not self._broken:
                try:
                    await self._start()
                except (OSError, pickle.PicklingError, TypeError, AttributeError) as e:
                    self._lose(f"it could not start: {type(e).__name__}: {e}")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):  # it ended before it read its plan
                    self._lose("it ended as it started")
                else:
                    self._open = True
            return self._open and not self._broken

    async def _start(self) -> None:
        log_dir = self.workdir.logs_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(log_dir / LOG_NAME, "ab")  # noqa: SIM115 (closed in aclose)
        start = frame((self.plan, str(self.workdir.root), self.workers))  # pickled before the child exists: a plan that cannot be is said at once
        # Without the environment's keys (the plan's own `api_key_env` too): it judges text, and asks no model anything.
        hidden = set(self.plan.key_variables())
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_KEY", "_TOKEN", "_SECRET")) and k not in hidden}
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._proc = await anyio.open_process(
            [sys.executable, "-m", "evaltui.engine.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._replies = BufferedByteReceiveStream(self._proc.stdout)
        self.tasks.start_soon(self._read, self._proc)
        await self._proc.stdin.send(start)
        self.emit(ev.Notice(f"planning and scoring small datasets in a process of its own (pid {self._proc.pid})"))

    async def _read(self, proc: Process) -> None:
        """Each reply to its waiter; a reply nobody waits for any more has its temporary removed."""
        try:
            while True:
                job, tmp, value, error = await self._next_reply()
                if job == UP:
                    self._up = True
                    continue
                waiter = self._waiting.pop(job, None)
                if waiter is None:
                    _remove(tmp)
                    continue
                waiter.tmp, waiter.value, waiter.error = tmp, value, error
                waiter.done.set()
        except CLOSED:  # its pipe closed: it ended, or was killed
            if not self._closing:
                self._lose(f"it ended (exit code {await _exit_code(proc)})")
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as e:
            self._lose(f"it sent what cannot be read ({type(e).__name__}: {e})")

    async def _next_reply(self) -> Reply:
        """The next frame from the child. Cancel-safe (the reader is cancelled as its session
        ends, and aclose reads on): what was received stays in the buffer, a header read is kept."""
        assert self._replies is not None
        if self._size is None:
            (self._size,) = HEADER.unpack(await self._replies.receive_exactly(HEADER.size))
        body = await self._replies.receive_exactly(self._size)
        self._size = None
        reply: Reply = made_for_the_run(PlanLinks(io.BytesIO(body), self.plan).load, lasting=_planned)
        return reply

    def _lose(self, why: str) -> None:
        """The child is of no more use: every pair waiting on it, and every later one, is scored here."""
        if self._broken:
            return
        self._broken = True
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.lost = True
            waiter.done.set()
        if self._closing:
            return
        self.emit(
            ev.Notice(
                f"the worker process stopped: {why}; what it planned and scored is done in the run's own process (logs/{LOG_NAME} has what it printed)",
                "warning",
                short="the worker process stopped; its work goes on here",
            )
        )
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def _drop_unread(self) -> None:
        """Once the child has ended: the replies it wrote that nobody read (a run stopped while
        pairs were out) have their temporaries removed, so a stop leaves no file behind."""
        if self._replies is None:
            return
        with contextlib.suppress(*CLOSED, pickle.UnpicklingError, EOFError):
            while True:
                _remove((await self._next_reply())[1])

    async def aclose(self) -> None:
        """End the child: the pipe closed and SIGUSR1 (pairs still queued there, when a run
        stops, are not scored), killed if it has not ended in STOP_WAIT; then the replies
        nobody read have their temporaries removed."""
        self._closing = True
        self._broken = True  # no request from now on: a late one is done in this process, as one still waiting
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.lost = True
            waiter.done.set()
        proc, self._proc = self._proc, None
        if proc is not None:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    if proc.stdin is not None:
                        await proc.stdin.aclose()
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGUSR1)  # (not SIGTERM: the child leaves one sent to the process group to this process)
                with anyio.move_on_after(STOP_WAIT):
                    await proc.wait()
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
                await self._drop_unread()
                await proc.aclose()
        if self._log is not None:
            self._log.close()
            self._log = None


def _planned(reply: Reply) -> bool:
    return isinstance(reply[2], Planned)


def _remove(tmp: str | tuple[str | None, ...] | None) -> None:
    discard(tmp if isinstance(tmp, tuple) else (tmp,))


async def _exit_code(proc: Process) -> int | None:
    with anyio.move_on_after(1.0):
        return await proc.wait()
    return proc.returncode
