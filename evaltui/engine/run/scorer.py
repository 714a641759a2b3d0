"""The watch-scorer (SPEC §7): scores each model×dataset as soon as all its shards are done.

It reads the same status and heartbeat files a separate OpenCompass watcher would, so what it
believes is what is on disk, never an in-memory shortcut: a pair is scored only when every shard
status says `done` and the final predictions file exists. The in-process runner may `wake` it
early and tells it when inference has ended, so it neither waits out `watch_interval` for a
finished dataset nor `heartbeat_timeout` at the end of a run.

Scoring runs in worker threads (code execution in subprocesses), never on the event loop, at
most `eval_workers` at a time; an evaluator that raises becomes an error result for its pair.
A thread cannot be stopped, so a scoring that a retry or a quit abandons is fenced off instead:
it may only put its result in place while the pair's generation in the ScoreGate is the one it
started under, checked under a lock together with the rename. It keeps its `eval_workers` slot
until its thread really ends, so abandoned scorings never add to the ones running.

Pairs can be added while it runs (a retry joining the live run) and forgotten (a retry of a pair
it was about to score or was scoring).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from anyio.abc import TaskGroup

from evaltui.datasets import load_records
from evaltui.engine.disk.heartbeat import stale
from evaltui.engine.disk.predictions import iter_predictions, read_predictions
from evaltui.engine.disk.versions import dataset_fingerprint, evaluator_version
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.fsutil import atomic_writer, dumps_readable, json_bytes
from evaltui.plan import DatasetConfig, Epochs, Plan, samples_spec

if TYPE_CHECKING:
    from evaltui.engine.judge.judging import Judges
    from evaltui.scoring.code.code_exec import CodeRunner
    from evaltui.scoring.reference.parts import PartSums

Replace = Callable[[str, Path], None]


class StaleResult(Exception):
    """The pair was retried, or the run stopped, while it was being scored."""


class ScoreGate:
    """Generations of each pair's scoring; a result is put in place only under a current one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: dict[Pair, int] = {}
        self._all = 0

    def token(self, pair: Pair) -> tuple[int, int]:
        return self._all, self._pairs.get(pair, 0)

    def current(self, pair: Pair, token: tuple[int, int]) -> bool:
        return self.token(pair) == token

    def invalidate(self, pair: Pair) -> None:
        """A retry of `pair` begins: any scoring of it now running is stale."""
        with self._lock:
            self._pairs[pair] = self._pairs.get(pair, 0) + 1

    def invalidate_all(self) -> None:
        """The run stops: scorings still running in threads must not write afterwards."""
        with self._lock:
            self._all += 1

    def replacer(self, pair: Pair, token: tuple[int, int]) -> Replace:
        """An `os.replace` that refuses once the token is stale; the check and the rename hold
        the lock together, so an invalidation comes entirely before a rename or after it (and a
        retry deletes the result after it invalidates)."""

        def replace(tmp: str, path: Path) -> None:
            with self._lock:
                if not self.current(pair, token):
                    raise StaleResult(f"{pair[0]}/{pair[1]}: scored from predictions that are no longer current")
                os.replace(tmp, path)

        return replace


class Scored(NamedTuple):
    metrics: dict[str, float]  # the main one first
    parts: ev.Parts = ()  # a grouped benchmark's parts
    intervals: ev.Intervals = ()  # each metric's standard error and 95 % interval


def score_pair(
    plan: Plan, workdir: WorkDir, model: str, dataset: str, workers: int, replace: Replace = os.replace, run_code: CodeRunner | None = None
) -> Scored:
    """Score one pair from its files, write its result file, return its metrics (the main one first).

    Runs in a worker thread. Text evaluators stream: predictions are read, judged and written
    out as details one at a time, so scoring a million samples holds none of them; code_exec
    runs samples in parallel subprocesses (or Ray tasks: `run_code`) and takes the (small)
    dataset whole.
    """
    from evaltui import scoring  # first imported here, in a worker thread, off the start-up path
    from evaltui.engine.judge.judging import scoring_judge
    from evaltui.scoring.reference.parts import as_parts, mean_of_parts
    from evaltui.scoring.think import stripped_entries

    ds = plan.dataset(dataset)
    epochs = plan.epochs(ds)
    path = workdir.predictions_file(model, dataset)
    scored_with = evaluator_version(ds)  # a later run with another evaluator scores again
    out = workdir.result_file(model, dataset)
    if ds.evaluator.type == "code_exec":
        predictions = read_predictions(path)
        if predictions is None:
            raise ValueError(f"predictions file missing or unreadable: {path}")
        runner = {} if run_code is None else {"run_code": run_code}
        predictions = list(stripped_entries(predictions, plan.model(model).reasoning_tags))
        result = scoring.score(ds.evaluator, predictions, load_records(plan, ds), workers=workers, tmp_root=str(workdir.sandbox_dir), epochs=epochs, **runner)
        details = result.pop("details")
        uncertainty = result.pop("uncertainty", {})
        head = {**_run_as(plan, ds, epochs, workdir, model), **({"uncertainty": uncertainty} if uncertainty else {})}
        with atomic_writer(out, replace=replace) as w:
            w.write(dumps_readable({**result, **head, "scored_with": scored_with, "details": details}).encode("utf-8"))
        return Scored({name: float(value) for name, value in result.items()}, intervals=scoring.result_intervals(head))
    reduction = scoring.Reduction.of(ds.evaluator, epochs)
    sums = scoring.MetricSums(reduction)
    parts = _part_sums(plan, ds, reduction)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+b", dir=str(out.parent)) as details:  # a file past 4 MiB
        answers = stripped_entries(iter_predictions(path), plan.model(model).reasoning_tags)  # a reasoning model's thinking cut out
        for detail in scoring.iter_details(ds.evaluator, answers, reduction, scoring_judge(plan, workdir, model, ds)):
            details.write(b"%s\n    %s" % (b"," if sums.count else b"", json_bytes(detail)))
            sums.add(detail)
            if parts is not None:
                parts.add(detail)
        metrics, head, intervals = sums.result(), _run_as(plan, ds, epochs, workdir, model), sums.intervals()
        if parts is not None:
            head["parts"] = by_part = parts.result()
            if ds.evaluator.aggregate == "parts":  # OpenCompass's naive average of the parts
                metrics = mean_of_parts(by_part, reduction.metrics)
                intervals = parts.mean_intervals(metrics)
        if intervals:
            head["uncertainty"] = {name: interval.as_json() for name, interval in intervals.items()}
        details.seek(0)
        with atomic_writer(out, replace=replace) as w:
            w.write(b"{\n")
            for name, value in {**metrics, **head}.items():
                w.write(b"  %s: %s,\n" % (json.dumps(name).encode(), json.dumps(value).encode()))
            w.write(b'  "scored_with": "%s",\n  "details": [' % scored_with.encode())
            shutil.copyfileobj(details, w)
            w.write(b"\n  ]\n}\n" if sums.count else b"]\n}\n")
    return Scored(metrics, as_parts(head.get("parts"), reduction.metrics), tuple(intervals.items()))


def _part_sums(plan: Plan, ds: DatasetConfig, reduction: Any) -> PartSums | None:
    """A grouped benchmark's per-part sums (its records name each sample's `subset`), else None."""
    if not ds.benchmark:
        return None
    records = load_records(plan, ds)
    if not records or "subset" not in records[0]:
        return None
    from evaltui.scoring.reference.parts import PartSums

    def part_of(index: int) -> str | None:
        return records[index].get("subset") if 0 <= index < len(records) else None

    return PartSums(reduction, part_of)


def _run_as(plan: Plan, ds: DatasetConfig, epochs: Epochs, workdir: WorkDir, model: str) -> dict[str, Any]:
    """What a result says of how its samples were run: the dataset's fingerprint (which
    `evaltui compare` checks), and when not all once by mean, its epochs and reducer, the
    selection (`samples`) when not all of them; the urls whose answers it scored (its status
    files keep them over runs: a server moved to another host is on record)."""
    head: dict[str, Any] = {"dataset_version": dataset_fingerprint(plan, ds)}
    if not epochs.trivial:
        head.update(epochs=epochs.count, reducer=epochs.reducer)
    if ds.sample_ids is not None:
        head["samples"] = samples_spec(ds.sample_ids)
    urls: dict[str, None] = {}
    for k in range(ds.shards):
        status = workdir.read_status(model, ds.abbr, k, ds.shards) or {}
        urls.update((u, None) for u in status.get("urls", ()) if isinstance(u, str))
    if urls:
        head["urls"] = list(urls)
    return head


class Scorer:
    def __init__(
        self,
        plan: Plan,
        workdir: WorkDir,
        emit: ev.Sink,
        *,
        clock: Callable[[], float] = time.time,
        code_workers: int = 2,
        gate: ScoreGate | None = None,
        run_code: CodeRunner | None = None,
        inferring: Callable[[], bool] | None = None,
        judges: Judges | None = None,
    ):
        """`run_code`: what runs code_exec's programs (by default a thread pool of `code_workers`).
        `inferring`: whether the inference it scores is under way, when the scorer can know (it
        runs in the same process): then a stale heartbeat says nothing — the process was paused
        (SIGSTOP, a laptop asleep), not gone — and only a scorer that cannot know goes by it."""
        self.plan = plan
        self.workdir = workdir
        self.emit = emit
        self.pending: dict[Pair, None] = {}  # added (add) as their inference is queued; in order
        self._due: dict[Pair, None] = {}  # pending pairs to look at: added, or said inferred, since the last scan
        self.clock = clock
        self.code_workers = code_workers
        self.run_code = run_code
        self.gate = gate or ScoreGate()
        self.inferring = inferring
        self.judges = judges  # a judged pair's answers not judged while it was inferred are sent to its judge before it is scored
        self.running = False  # run() is watching (a pair added now is seen)
        self._scoring: dict[Pair, anyio.CancelScope] = {}
        self._wake = anyio.Event()
        self._inference_done = False
        self._warmed = False
        # Its own thread limiter, not anyio's default one that loading data and merging
        # checkpoints use. The loop gives its token back when it abandons a scoring
        # (abandon_on_cancel), so the slots are also taken inside the thread, until it really ends.
        self._limiter = anyio.CapacityLimiter(plan.run.eval_workers)
        self._slots = threading.BoundedSemaphore(plan.run.eval_workers)

    def wake(self) -> None:
        self._wake.set()

    def inferred(self, pair: Pair) -> None:
        """A pair's inference ended here: look at it now (a scorer that knows its inference looks at no other)."""
        self._due[pair] = None
        self._wake.set()

    def inference_finished(self) -> None:
        self._inference_done = True
        self._wake.set()

    def inference_restarted(self) -> None:
        """More inference began (a retry): pairs not done yet are waited for again."""
        self._inference_done = False

    def add(self, pairs: Iterable[Pair]) -> None:
        """Watch these pairs too (their inference was queued); run() must be running or started."""
        for pair in pairs:
            self.pending[pair] = None
            self._due[pair] = None
        self._wake.set()

    def forget(self, pair: Pair) -> None:
        """Stop watching `pair` and abandon its scoring, whose result could only be stale now."""
        self.gate.invalidate(pair)
        self.pending.pop(pair, None)
        scope = self._scoring.pop(pair, None)
        if scope is not None:
            scope.cancel()
        self._wake.set()

    def _ready(self, pair: Pair) -> bool:
        model, dataset = pair
        n = self.plan.dataset(dataset).shards
        try:
            for k in range(n):
                status = self.workdir.read_status(model, dataset, k, n)
                if not status or status.get("status") != "done":
                    return False
            baseline = self.plan.dataset(dataset).evaluator.baseline  # pairwise: judged against its answers
            if baseline is not None and baseline != model and not self._ready((baseline, dataset)):
                return False
            return self.workdir.predictions_file(model, dataset).exists()
        except OSError:  # cannot look now (e.g. out of file handles): not ready yet
            return False

    async def run(self) -> None:
        """Score pending pairs as they become ready; return when none is pending or scoring."""
        self.running = True
        interval = self.plan.run.watch_interval
        timeout = self.plan.run.heartbeat_timeout
        started = self.clock()
        try:
            async with anyio.create_task_group() as tg:
                if not self._warmed:
                    self._warmed = True
                    tg.start_soon(self._warm_up)
                while self.pending or self._scoring:
                    if self.pending:
                        self._scan(tg, started, timeout)
                    if not self.pending and not self._scoring:
                        break
                    with anyio.move_on_after(interval):
                        await self._wake.wait()
                    self._wake = anyio.Event()
                self.running = False  # from here on, a pair added needs another run()
                tg.cancel_scope.cancel()  # the warm-up, if it is still importing
        finally:
            self.running = False

    def _scan(self, tg: TaskGroup, started: float, timeout: float) -> None:
        final_scan = self._inference_done  # read before scanning: no finish slips between
        due, self._due = self.pending if final_scan or self.inferring is None else [p for p in self._due if p in self.pending], {}
        for pair in [p for p in due if self._ready(p)]:
            del self.pending[pair]
            self._scoring[pair] = anyio.CancelScope()
            tg.start_soon(self._score, pair, self._scoring[pair])
        if not self.pending:
            return
        if final_scan:
            self.emit(ev.ScoringSkipped(tuple(self.pending), "inference finished; these did not end done (see infer_status/)"))
            self.pending = {}
            return
        if self.inferring is not None and self.inferring():
            return  # its own inference, alive: it says when it has finished
        now = self.clock()
        try:
            age = self.workdir.heartbeat_age(now)
        except OSError:
            age = None
        if age is None:  # no beat yet: count from our own start, as a beat that never came
            age = now - started
        if stale(age, timeout):
            self.emit(ev.ScoringSkipped(tuple(self.pending), f"heartbeat stale for {age:.0f} s (> heartbeat_timeout {timeout:g} s): inference is gone"))
            self.pending = {}

    async def _warm_up(self) -> None:
        """Import the evaluators in a thread while inference waits on the network.

        Not at once (it would compete with start-up for the GIL and delay the first request) and
        not at the first scoring (after the last dataset it would add to the run's wall time).
        """
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(importlib.import_module, "evaltui.scoring")

    def _score_in_slot(self, pair: Pair, token: tuple[int, int], replace: Replace) -> Scored:
        """In a worker thread: score `pair` once one of the `eval_workers` slots is free."""
        with self._slots:
            if not self.gate.current(pair, token):
                raise StaleResult(f"{pair[0]}/{pair[1]}: retried or stopped before it was scored")
            return score_pair(self.plan, self.workdir, pair[0], pair[1], self.code_workers, replace, self.run_code)

    async def _score(self, pair: Pair, scope: anyio.CancelScope) -> None:
        from evaltui.scoring import Reduction

        model, dataset = pair
        ds = self.plan.dataset(dataset)
        metric = Reduction.of(ds.evaluator, self.plan.epochs(ds)).main
        result_file = str(self.workdir.result_file(model, dataset))
        token = self.gate.token(pair)
        replace = self.gate.replacer(pair, token)
        try:
            with scope:  # cancelled by forget(): a retry of this pair began
                if scope.cancel_called:  # forgotten before it started
                    return
                self.emit(ev.DatasetScoring(model, dataset))
                try:
                    if self.judges is not None:
                        await self.judges.judge_pair(self.workdir, model, dataset)
                    # abandon_on_cancel: Ctrl-C must not wait for a long code_exec batch to finish
                    # (the gate keeps the abandoned thread from writing, _slots from adding up).
                    scored = await anyio.to_thread.run_sync(self._score_in_slot, pair, token, replace, abandon_on_cancel=True, limiter=self._limiter)
                except StaleResult:
                    return
                except Exception as e:  # one evaluator's failure is that pair's error, not the run's
                    message = f"{type(e).__name__}: {e}" + _os_hint(e)
                    # (OSError: the event below still says it; the next run scores again)
                    with contextlib.suppress(OSError, StaleResult), atomic_writer(result_file, replace=replace) as w:
                        w.write(dumps_readable({"error": message}).encode("utf-8"))
                    if self.gate.current(pair, token):
                        self.emit(ev.DatasetScored(model, dataset, metric, None, message, result_file))
                    return
                if self.gate.current(pair, token):
                    metrics = scored.metrics
                    extra: ev.Metrics = tuple((name, value) for name, value in metrics.items() if name != metric)
                    self.emit(ev.DatasetScored(model, dataset, metric, metrics[metric], "", result_file, extra, scored.parts, scored.intervals))
        finally:
            if self._scoring.get(pair) is scope:
                del self._scoring[pair]
            self._wake.set()


def _os_hint(e: Exception) -> str:
    """What to do when scoring failed for the machine's sake (a full disk, no file handles), not
    the evaluator's: the predictions are safe, and the next run scores them."""
    if not isinstance(e, OSError):
        return ""
    fix = "free space and run again" if e.errno == errno.ENOSPC else "fix this and run again"
    return f" — the predictions are kept; {fix} to score them"
