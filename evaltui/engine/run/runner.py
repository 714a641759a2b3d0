"""The runner: one evaluation run from plan to leaderboard, and the small command API front ends use.

    runner = Runner(plan, sink=print_event)
    exit_code = await runner.run()            # or anyio.run(runner.run)
    await runner.retry([("llama", "gsm8k")])  # from the UI: re-run that pair's failed samples
    runner.cancel()

It owns the run-wide pieces — work directory, plan snapshot, simulator, heartbeat thread, one
HTTP client per model, the watch-scorer — and reports only through the event stream (its
EventBus), which folds every event into `runner.state` so a front end can ask where things stand
at any time.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from evaltui.backends import backend_class
from evaltui.datasets import DatasetError, count_records, known_count
from evaltui.engine.disk.details import PairDetails, read_pair_details
from evaltui.engine.disk.guard import checked, mark
from evaltui.engine.disk.runlog import RunLog
from evaltui.engine.disk.workdir import StatusWriter, WorkDir, WorkDirBusy
from evaltui.engine.run.executor import make_executor
from evaltui.engine.run.fetch import fetch_benchmarks
from evaltui.engine.run.session import Session
from evaltui.engine.run.simproc import SimulatorError, SimulatorProcess, sim_url_for
from evaltui.engine.run.verdict import EndReads, current_result, only_os_errors
from evaltui.engine.score.gate import ScoreGate
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.bus import EventBus
from evaltui.engine.stream.events import Pair
from evaltui.engine.stream.pair import board_values
from evaltui.engine.stream.state import RunState
from evaltui.engine.unit.heap import settle_heap
from evaltui.exitcode import ExitCode
from evaltui.fsutil import Unreadable, atomic_write_text
from evaltui.plan import ModelConfig, Plan
from evaltui.plan.snapshot import dumps_snapshot, snapshot_to_write

if TYPE_CHECKING:
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.summary import RunSummary


class Runner:
    watching = False  # it drives its run (see engine/stream/source.py: the follower only follows one)
    retry_advice = ""  # it retries itself

    def __init__(
        self,
        plan: Plan,
        *,
        sink: ev.Sink | None = None,
        work_dir: str | Path | None = None,
        fresh: bool = False,
        code_workers: int = 2,
        snapshot_of: Plan | None = None,
        ray_address: str | None = None,
    ):
        """`snapshot_of`: the whole plan when `plan` is a --models/--datasets subset of it, so
        the work dir's plan.toml stays the plan the work dir belongs to. `ray_address`: with
        `[run] executor = "ray"`, the cluster to join (else RAY_ADDRESS, else one started here;
        a process that has joined one already keeps it).

        WorkDirRefused (saying why) when the work dir may not be used (`workdir_guard`): checked
        here, once, before anything is written."""
        self.plan = plan
        self._snapshot_of = snapshot_of or plan
        self.workdir = WorkDir(checked(work_dir if work_dir is not None else plan.default_work_dir()))
        self.fresh = fresh
        self.code_workers = code_workers
        self.executor = make_executor(plan, ray_address)
        self.state = RunState()  # the runner's own fold of its events, always current
        self.bus = EventBus(self.state, sink)
        # the bus's own methods rather than wrappers: emit runs once per sample
        self.subscribe = self.bus.subscribe  # a consumer that comes late is sent the state first
        self.emit = self.bus.emit
        self._summary: RunSummary | None = None
        self._cancel_scope: anyio.CancelScope | None = None
        self._urls: dict[str, list[str]] = {}
        self._sim: SimulatorProcess | None = None
        self._sim_stopper: weakref.finalize[[], Runner] | None = None
        self._totals: dict[str, int] = {}
        self._statuses: StatusWriter | None = None
        self._live: Session | None = None  # the session running now, which a retry joins
        self._gate = ScoreGate()  # runner-wide: a scoring abandoned by one session never writes in a later one
        self.interrupted = False
        self.pairs = [(m.abbr, d.abbr) for m in plan.tested for d in plan.datasets]  # a judge is sent no dataset

    # ------------------------------------------------------------------ queries
    @property
    def title(self) -> str:
        return self.plan.title

    @property
    def heartbeat_timeout(self) -> float:
        return self.plan.run.heartbeat_timeout

    @property
    def epochs(self) -> dict[str, int]:
        """Each dataset's epochs (its own, else the run's)."""
        return {d.abbr: self.plan.epochs(d).count for d in self.plan.datasets}

    @property
    def models(self) -> dict[str, ModelConfig]:
        return {m.abbr: m for m in self.plan.models}

    def failed_pairs(self) -> list[Pair]:
        """The pairs whose inference or scoring failed: what a retry-all re-runs."""
        with self.bus.lock:  # the engine's thread adds pairs to the state as it plans them
            failed = self.state.failed_pairs()
        return [p for p in failed if p in self.pairs]

    def leaderboard(self) -> Leaderboard:
        """The leaderboard as it fills, from the scores known so far (no disk reads)."""
        with self.bus.lock:  # called from a front end's thread while the engine's adds pairs
            values = board_values(self.state.pairs.values(), set(self.pairs))
        return self._run_summary().leaderboard(*values)

    def pair_details(self, model: str, dataset: str, *, predictions: int = 5, max_failures: int = 1000) -> PairDetails:
        """A pair's failed samples with their errors and a few predictions next to their gold.

        Reads the pair's files: call it from a worker thread, not the event loop."""
        if (model, dataset) not in self.pairs:
            raise ValueError(f"no pair {model}/{dataset} in this plan")
        p = self.state.pairs.get((model, dataset))
        status = p.status if p is not None else ev.PairStatus.PENDING
        return read_pair_details(self.workdir, self.plan, model, dataset, status, predictions=predictions, max_failures=max_failures)

    # ------------------------------------------------------------------ command API
    def cancel(self) -> None:
        """Stop the run (or retry) in progress; finished samples are kept and a re-run resumes.

        Idempotent: a second call (or one when nothing runs) changes nothing more. A scoring
        thread still running is fenced off: it never writes its result afterwards."""
        self.interrupted = True
        self._gate.invalidate_all()
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    def close(self) -> None:
        """Stop the sim:// simulator, which outlives `run()` so a retry reuses it; idempotent.

        Done anyway when the runner is garbage-collected or the interpreter exits."""
        self._stop_simulator()

    async def run(self) -> int:
        """The whole run; returns the exit code of SPEC §2 (0 all scored, 1 otherwise, 130 cancelled)."""
        wd = self.workdir
        lock = self._take_workdir()
        if lock is None:
            return ExitCode.USAGE
        try:
            with self._run_log():
                self._statuses = StatusWriter(wd)
                # The plan lives as long as the run: frozen before the snapshot's 600,000 short-lived
                # containers of 10,000 datasets, whose collections walked it again and again (~30 ms).
                settle_heap()
                try:
                    self._write_snapshot()
                except OSError as e:  # a full disk, before anything of the run's own
                    why = f"cannot write {wd.plan_file.name}: {e.strerror or e}"
                    self.emit(ev.Notice(f"cannot use the work dir {wd.root}: {why} — fix this and run again", "error"))
                    return ExitCode.USAGE
                self.emit(ev.RunStarted(str(wd.root), tuple(m.abbr for m in self.plan.tested), tuple(d.abbr for d in self.plan.datasets), self.plan.title))
                if self.fresh:
                    aside = {wd.set_aside_pair(*pair) for pair in self.pairs} - {None}
                    if aside:
                        self.emit(ev.Notice(f"--fresh: the earlier work is set aside in {aside.pop()}"))
                for notice in _repeated_greedily(self.plan):
                    self.emit(notice)
                return await self._session(self.pairs, retry=False)
        finally:
            os.close(lock)

    async def retry(self, pairs: Sequence[Pair]) -> int:
        """Run the failed samples of `pairs` again (succeeded ones are kept) and score them again.

        While a run is in progress the work joins it (its simulator, clients and limits) and
        this returns when that run ends; after it ended, a new session runs them, reusing the
        simulator if it is still up (see close()). A pair being inferred right now is left
        to finish (with a Notice). Returns the exit code the whole plan has then; ValueError
        for a pair not in the plan.
        """
        wanted = list(dict.fromkeys((m, d) for m, d in pairs))
        unknown = [f"{m}/{d}" for m, d in wanted if (m, d) not in self.pairs]
        if unknown:
            raise ValueError(f"not in this plan: {', '.join(unknown)}")
        if self._statuses is None and self._live is None:
            raise RuntimeError("retry() needs a runner that has run")
        if not wanted:
            return self._exit_code(self.pairs)
        while self._live is not None:
            live = self._live
            if await live.join(wanted):
                await live.ended.wait()
                return live.exit_code
            await live.ended.wait()  # it was ending: run them in a session of their own
        self.interrupted = False
        lock = self._take_workdir()
        if lock is None:
            return ExitCode.USAGE
        try:
            with self._run_log():
                return await self._session(wanted, retry=True)
        finally:
            os.close(lock)

    def _take_workdir(self) -> int | None:
        """Create, lock and mark the work dir, clear what a killed run left; None (after saying
        why) when that is impossible. The lock is released again should a later step fail."""
        wd = self.workdir
        fd: int | None = None
        try:
            wd.root.mkdir(parents=True, exist_ok=True)
            mark(wd.root)  # before the lock: a kill between them must not leave a lone lock file
            fd = wd.lock()
            wd.prepare()
            wd.clear_leftovers()
            return fd
        except WorkDirBusy as e:
            self.emit(ev.Notice(str(e), "error"))
        except OSError as e:
            self.emit(ev.Notice(f"cannot use the work dir {wd.root}: {e.strerror or e}", "error"))
        if fd is not None:
            os.close(fd)
        return None

    @contextmanager
    def _run_log(self) -> Iterator[None]:
        """logs/run.log and logs/failures.jsonl follow the events from the first one on."""
        runlog = RunLog(self.workdir, self.epochs)
        self.bus.subscribe(runlog, replay=False)  # what happened before is in the log already
        try:
            yield
        finally:
            self.bus.unsubscribe(runlog)
            runlog.close()

    async def _session(self, pairs: list[Pair], *, retry: bool) -> int:
        """Infer and score `pairs` (and what joins meanwhile), then write the summary and report RunFinished."""
        assert self._statuses is not None
        session = self._live = Session(
            self.plan, self.workdir, self._statuses, self.emit, code_workers=self.code_workers, gate=self._gate, executor=self.executor
        )
        started = time.monotonic()
        ending = EndReads(self.plan, self.workdir)  # the end reads each result once, for the exit code and the leaderboard
        exit_code: int = ExitCode.FAILED
        stopped = 0  # a fatal stop's exit code: whatever the files say, the run did not do its work
        try:
            with anyio.CancelScope() as scope:
                self._cancel_scope = scope
                if self.interrupted:  # Ctrl-C came before there was anything to cancel
                    scope.cancel()
                if await self._prepare():
                    session.urls, session.totals = self._urls, self._totals
                    try:
                        await session.run(pairs, retry=retry)
                    except BaseException as e:
                        err = only_os_errors(e)
                        if err is None:
                            raise
                        # Disk full, too many open files, permissions: say so, keep what is done.
                        self.emit(ev.Notice(f"stopped: {err} — finished samples are kept; fix this and run again", "error"))
                        # a work-dir file that is no file of its kind: as a work dir that cannot be used
                        stopped = ExitCode.USAGE if isinstance(err, Unreadable) else ExitCode.FAILED
            exit_code = ExitCode.INTERRUPTED if self.interrupted else stopped or self._exit_code(self.pairs, ending)
        finally:
            with anyio.CancelScope(shield=True):
                self._cancel_scope = None
                session.close_intake()  # run() may never have begun: a retry waiting to join goes on
                if self.interrupted:
                    self._stop_simulator()  # stopped for good; a retry after a quit starts it again
                summary = self._run_summary()
                scores, extra, intervals = summary.result_metrics(ending)
                table = summary.leaderboard(scores, extra, intervals)
                files = {}
                if not self.interrupted or any(v is not None for v in scores.values()):
                    files = self._write_summary(table)
                if self.interrupted:
                    exit_code = ExitCode.INTERRUPTED
                self.emit(ev.RunFinished(exit_code, self.interrupted, files, table, time.monotonic() - started))
                session.exit_code = exit_code
                self._live = None
                session.ended.set()
        return exit_code

    # ------------------------------------------------------------------ parts
    def _write_snapshot(self) -> None:
        data = snapshot_to_write(self._snapshot_of)
        data["run"]["work_dir"] = str(self.workdir.root)
        atomic_write_text(self.workdir.plan_file, dumps_snapshot(data))

    async def _prepare(self) -> bool:
        """Count the datasets' records, start the simulator and the executor (join the Ray
        cluster); False after saying why not. Counted again for each session (a retry after a data
        file grew plans its new records: the counts are cached by each file's stat, so this is cheap)."""
        if not self._totals and not await fetch_benchmarks(self.plan, self.emit):
            return False
        try:
            self._totals = await self._count()
        except (DatasetError, OSError) as e:
            self.emit(ev.Notice(f"cannot read a dataset: {e}", "error"))
            return False
        try:
            await self._start_simulator()
        except (SimulatorError, DatasetError, OSError) as e:
            self.emit(ev.Notice(f"cannot start the simulated model server: {e}", "error"))
            return False
        problem = await self.executor.start()
        if problem is not None:
            self.emit(ev.Notice(problem, "error"))
            return False
        return True

    async def _count(self) -> dict[str, int]:
        """Each dataset's records: those load_plan counted, in one trip to a worker thread (a stat
        each: a trip a dataset was most of the cost of 10,000 small ones); the others read there
        one by one, so a Ctrl-C need not wait for all of them."""
        datasets = self.plan.datasets
        totals = await anyio.to_thread.run_sync(lambda: {d.abbr: known_count(self.plan, d) for d in datasets})
        return {d.abbr: n if (n := totals[d.abbr]) is not None else await anyio.to_thread.run_sync(count_records, self.plan, d) for d in datasets}

    async def _start_simulator(self) -> None:
        """Start the simulator for sim:// models, unless the one kept from before still runs."""
        if self._sim is not None and self._sim.running():
            return
        self._stop_simulator()
        for m in self.plan.models:
            self._urls[m.abbr] = list(m.urls)
        if not any(m.is_sim for m in self.plan.models):
            return
        self._sim = SimulatorProcess(self.plan)
        self._sim_stopper = weakref.finalize(self, self._sim.stop)  # if close() never comes
        base = self._sim.start()
        for m in self.plan.models:
            if m.is_sim:
                self._urls[m.abbr] = [sim_url_for(base, m)]
        self.emit(ev.SimulatorStarted(base))

    def _stop_simulator(self) -> None:
        if self._sim_stopper is not None:
            self._sim_stopper()  # SimulatorProcess.stop, at most once
            self._sim_stopper = None
        self._sim = None

    def _run_summary(self) -> RunSummary:
        if self._summary is None:
            from evaltui.scoring.summary import RunSummary  # when first needed: not on the path to the first request

            self._summary = RunSummary(self.plan)
        return self._summary

    def _write_summary(self, table: Leaderboard) -> dict[str, str]:
        from evaltui import scoring
        from evaltui.scoring.summary import ModelRow

        models = [ModelRow(m, load.profile.snapshot(), load.usage, load.cost) for m, load in self.state.load.items() if load.profile is not None]
        try:
            paths = scoring.write_summary(self.workdir.root, table, datetime.now(), models)
        except OSError as e:
            self.emit(ev.Notice(f"could not write the summary: {e}", "error"))
            return {}
        return {ext: str(p) for ext, p in paths.items()}

    def _exit_code(self, pairs: list[Pair], read: Callable[[str, str], dict[str, Any] | None] | None = None) -> int:
        read = read or self._result
        return ExitCode.OK if all((r := read(*p)) is not None and "error" not in r for p in pairs) else ExitCode.FAILED

    def _result(self, model: str, dataset: str) -> dict[str, Any] | None:
        return current_result(self.plan, self.workdir, model, dataset)


def _repeated_greedily(plan: Plan) -> list[ev.Notice]:
    """A warning for each model that decodes greedily but is sent datasets of several epochs:
    every epoch would get the same answer (pass@k would be pass@1)."""
    notices = []
    repeated = [d.abbr for d in plan.datasets if plan.epochs(d).count > 1]
    for m in plan.models if repeated else ():
        if not backend_class(m).samples(m.generation_kwargs):
            runs = "runs" if len(repeated) == 1 else "run"
            notices.append(ev.Notice(
                f"{m.abbr}: {', '.join(repeated)} {runs} several epochs, but the model decodes greedily (no do_sample = true or temperature > 0 "
                "in generation_kwargs): every epoch will get the same answer", "warning"))
    return notices
