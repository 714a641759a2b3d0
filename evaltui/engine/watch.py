"""The watch-scorer (SPEC §7): scores each model×dataset as soon as all its shards are done.

It reads the same status and heartbeat files a separate OpenCompass watcher would, so what it
believes is what is on disk, never an in-memory shortcut: a pair is scored only when every shard
status says `done` and the final predictions file exists. The in-process runner may `wake` it
early and tells it when inference has ended, so it neither waits out `watch_interval` for a
finished dataset nor `heartbeat_timeout` at the end of a run.

Scoring runs in worker threads (code execution in subprocesses), never on the event loop, at
most `eval_workers` at a time; an evaluator that raises becomes an error result for its pair.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import tempfile
import time
from typing import Callable

import anyio

from evaltui.datasets import load_records
from evaltui.engine import events as ev
from evaltui.engine.versions import evaluator_version
from evaltui.engine.workdir import WorkDir, iter_predictions, read_predictions
from evaltui.fsutil import atomic_write_json, atomic_writer, json_bytes
from evaltui.plan import Plan

Pair = tuple[str, str]


def score_pair(plan: Plan, workdir: WorkDir, model: str, dataset: str, workers: int) -> float:
    """Score one pair from its files, write its result file, return the main metric.

    Runs in a worker thread. Text evaluators stream: predictions are read, judged and written
    out as details one at a time, so scoring a million samples holds none of them; code_exec
    runs samples in parallel subprocesses and takes the (small) dataset whole.
    """
    from evaltui import scoring  # first imported here, in a worker thread, off the start-up path

    ds = plan.dataset(dataset)
    path = workdir.predictions_file(model, dataset)
    metric = scoring.main_metric(ds.evaluator.type)
    scored_with = evaluator_version(ds)  # a later run with another evaluator scores again
    out = workdir.result_file(model, dataset)
    if ds.evaluator.type == "code_exec":
        predictions = read_predictions(path)
        if predictions is None:
            raise ValueError(f"predictions file missing or unreadable: {path}")
        result = scoring.score(ds.evaluator, predictions, load_records(plan, ds), workers=workers, tmp_root=str(workdir.sandbox_dir))
        details = result.pop("details")
        atomic_write_json(out, {**result, "scored_with": scored_with, "details": details})
        return result[metric]
    total = correct = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out.parent) as details:
        for detail in scoring.iter_details(ds.evaluator, iter_predictions(path)):
            details.write(b"%s\n    %s" % (b"," if total else b"", json_bytes(detail)))
            total += 1
            correct += bool(detail["correct"])
        value = scoring.percent(correct, total)
        details.seek(0)
        with atomic_writer(out) as w:
            w.write(b'{\n  %s: %s,\n  "scored_with": "%s",\n  "details": [' % (json.dumps(metric).encode(), json.dumps(value).encode(), scored_with.encode()))
            shutil.copyfileobj(details, w)
            w.write(b"\n  ]\n}\n" if total else b"]\n}\n")
    return value


class WatchScorer:
    def __init__(
        self,
        plan: Plan,
        workdir: WorkDir,
        emit: ev.Sink,
        pairs: list[Pair],
        *,
        clock: Callable[[], float] = time.time,
        code_workers: int = 2,
    ):
        self.plan = plan
        self.workdir = workdir
        self.emit = emit
        self.pending: list[Pair] = [p for p in pairs if not workdir.has_scored_result(*p)]
        self.clock = clock
        self.code_workers = code_workers
        self._wake = anyio.Event()
        self._inference_done = False
        self._limiter = anyio.CapacityLimiter(plan.run.eval_workers)

    def wake(self) -> None:
        self._wake.set()

    def inference_finished(self) -> None:
        self._inference_done = True
        self._wake.set()

    def _ready(self, pair: Pair) -> bool:
        model, dataset = pair
        n = self.plan.dataset(dataset).shards
        try:
            for k in range(n):
                status = self.workdir.read_status(model, dataset, k, n)
                if not status or status.get("status") != "done":
                    return False
            return self.workdir.predictions_file(model, dataset).exists()
        except OSError:  # cannot look now (e.g. out of file handles): not ready yet
            return False

    async def run(self) -> None:
        interval = self.plan.run.watch_interval
        timeout = self.plan.run.heartbeat_timeout
        started = self.clock()
        warm_up = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._warm_up, warm_up)
            while self.pending:
                final_scan = self._inference_done  # read before scanning: no finish slips between
                for pair in [p for p in self.pending if self._ready(p)]:
                    self.pending.remove(pair)
                    tg.start_soon(self._score, pair)
                if not self.pending:
                    break
                if final_scan:
                    self.emit(ev.WatchSkipped(tuple(self.pending), "inference finished; these did not end done (see infer_status/)"))
                    break
                now = self.clock()
                try:
                    age = self.workdir.heartbeat_age(now)
                except OSError:
                    age = None
                if age is None:  # no beat yet: count from our own start, as a beat that never came
                    age = now - started
                if age > timeout:
                    self.emit(ev.WatchSkipped(tuple(self.pending), f"heartbeat stale for {age:.0f} s (> heartbeat_timeout {timeout:g} s): inference is gone"))
                    break
                with anyio.move_on_after(interval):
                    await self._wake.wait()
                self._wake = anyio.Event()
            self.pending = []
            warm_up.cancel()  # nothing is left to score: a run that ends now must not wait for it

    async def _warm_up(self, scope: anyio.CancelScope) -> None:
        """Import the evaluators in a thread while inference waits on the network.

        Not at once (it would compete with start-up for the GIL and delay the first request) and
        not at the first scoring (after the last dataset it would add to the run's wall time).
        """
        with scope:
            await anyio.sleep(0.5)
            await anyio.to_thread.run_sync(importlib.import_module, "evaltui.scoring")

    async def _score(self, pair: Pair) -> None:
        from evaltui.scoring import main_metric

        model, dataset = pair
        metric = main_metric(self.plan.dataset(dataset).evaluator.type)
        result_file = str(self.workdir.result_file(model, dataset))
        self.emit(ev.DatasetScoring(model, dataset))
        try:
            # Its own limiter (eval_workers), not anyio's default pool that loading data and
            # merging checkpoints use; abandon_on_cancel: Ctrl-C must not wait for a long
            # code_exec batch to finish.
            value = await anyio.to_thread.run_sync(
                score_pair, self.plan, self.workdir, model, dataset, self.code_workers,
                abandon_on_cancel=True, limiter=self._limiter,
            )
        except Exception as e:  # one evaluator's failure is that pair's error, not the run's
            message = f"{type(e).__name__}: {e}"
            with contextlib.suppress(OSError):  # the event below still says it; the next run scores again
                atomic_write_json(self.workdir.result_file(model, dataset), {"error": message})
            self.emit(ev.DatasetScored(model, dataset, metric, None, message, result_file))
            return
        self.emit(ev.DatasetScored(model, dataset, metric, value, "", result_file))
