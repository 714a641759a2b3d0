"""The `--no-ui` renderer: plain lines for CI, SSH and cron, and the leaderboard at the end.
The same lines follow a run another process drives (`evaltui watch --no-ui`).

It consumes the same event stream as the interactive app: one line per state change (the same
words as logs/run.log), a progress line every `log_interval`, then the table and the paths of
the summary files. No ANSI escapes, ever, so logs stay greppable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TextIO

import anyio

from evaltui.engine.disk.runlog import EventLines, Stamp
from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.engine.stream.source import RunSource
from evaltui.engine.stream.state import RunState
from evaltui.exitcode import ExitCode
from evaltui.text import duration


class HeadlessRenderer:
    def __init__(self, out: TextIO, *, log_interval: float = 30.0, epochs: Mapping[str, int] | None = None, state: RunState | None = None):
        """`state`: the fold of the stream this renderer is sent, when its source keeps one (its
        EventBus folds each event before it hands it on), read rather than made a second time."""
        self.out = out
        self._folds = state is None
        self.state = RunState() if state is None else state
        self.log_interval = log_interval
        self.closed = False
        self._flush_due = False  # a flush is queued for the end of this turn of the loop
        self._lines = EventLines(epochs)
        self._stamp = Stamp(_clock_time)

    def __call__(self, e: ev.Event) -> None:
        if self._folds:
            self.state.apply(e)
        if type(e) is ev.SampleFinished:  # the hot path: one per answer, never a line of its own
            return
        line = self._lines(e)
        if line is not None:
            self.say(line)

    def say(self, text: str) -> None:
        self.write(f"[{self._stamp()}] {text}\n")

    def write(self, line: str) -> None:
        if self.closed:
            return
        try:
            try:
                self.out.write(line)
            except UnicodeEncodeError:
                self.out.write(line.encode("utf-8", "backslashreplace").decode("utf-8"))
        except (OSError, ValueError):
            self.closed = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the leaderboard at the end): now
            self.flush()
            return
        if not self._flush_due:
            # At the end of this turn of the loop, every line of the turn in one write: a file or
            # a pipe took a write per line, 20,000 of them for 10,000 datasets of 3 samples.
            self._flush_due = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_due = False
        if self.closed:
            return
        try:
            self.out.flush()
        except (OSError, ValueError):
            # `evaltui … | head`, or the terminal went away: the run goes on; logs/run.log has
            # every line.
            self.closed = True

    def progress_line(self) -> str:
        c, f, n = self.state.totals()
        parts = []
        for p in self.state.pairs.values():
            if p.status == PairStatus.RUNNING:
                rate = p.throughput()
                eta = p.eta()
                extra = f" {rate:.0f}/s" if rate else ""
                extra += f" ETA {duration(eta)}" if eta is not None else ""
                fails = f" ({p.failed} failed)" if p.failed else ""
                fails += f" ({p.sample_retries} tried again)" if p.sample_retries else ""
                sent = f" ({p.requests} requests)" if p.conversation else ""  # a conversation's units take several
                sent += f" ({p.judged_text()} by {p.judge})" if p.judging else ""
                parts.append(f"{p.model}/{p.dataset} {p.completed + p.failed}/{p.total}{sent}{fails}{extra}")
            elif p.status in (PairStatus.DONE, PairStatus.SCORING) and p.judging:  # a judge grading its answers (watched: not yet said scoring): how far it is
                parts.append(f"{p.model}/{p.dataset} {p.judged_text()} by {p.judge}")
            elif p.status == PairStatus.SCORING:  # code execution can take a while: say what is going on
                parts.append(f"{p.model}/{p.dataset} scoring")
        running = "; ".join(parts) if parts else "no dataset running"
        fleet = "".join(f" | {part}" for part in map(self._fleet_part, self.state.load.values()) if part)
        return f"progress: {c + f}/{n} samples, {f} failed | {running}{fleet}"

    def _fleet_part(self, load: ev.ModelLoad) -> str:
        """A model with several replicas or an adaptive limit: its limit now; with several, how
        many are up and each one's in flight against its limit (or its state, when out)."""
        if not load.replicas:
            return ""
        text = f"{load.model}: {load.in_flight} in flight, limit {load.limit} (max {load.max_workers})"
        if len(load.replicas) > 1:
            views = list(self.state.replicas.get(load.model, {}).values())
            up = sum(1 for v in views if v.state == "up")
            names = replica_names([v.url for v in views])
            each = ", ".join(f"{n} {v.in_flight}/{v.limit}" if v.state == "up" else f"{n} {v.state}" for n, v in zip(names, views, strict=True))
            text += f", replicas {up}/{len(load.replicas)} up [{each}]"
        down = self.state.down_for(load.model)
        if down is not None:
            text += f", all down for {duration(down)}"
        return text

    async def tick(self) -> None:
        while True:
            await anyio.sleep(self.log_interval)
            self.say(self.progress_line())


def _clock_time(at: datetime) -> str:
    return at.strftime("%H:%M:%S")


def replica_names(urls: list[str]) -> list[str]:
    """Short names for a model's replicas in a progress line: each one's host:port, or its URL
    without the scheme where two share a host and port."""
    hosts = [u.split("://", 1)[-1].split("/", 1)[0] for u in urls]
    return [h if hosts.count(h) == 1 else u.split("://", 1)[-1] for h, u in zip(hosts, urls, strict=True)]


def summary_json(state: RunState, finished: ev.RunFinished) -> dict[str, Any]:
    table = finished.leaderboard
    return {
        "exit_code": finished.exit_code,
        "interrupted": finished.interrupted,
        "work_dir": state.work_dir,
        "summary_files": dict(finished.summary_files),
        "leaderboard": table.as_json() if table is not None else None,
        "pairs": [
            {
                "model": p.model,
                "dataset": p.dataset,
                "status": p.status.value,
                "total": p.total,
                "completed": p.completed,
                "failed": p.failed,
                "sample_retries": p.sample_retries,
                **({"requests": p.requests} if p.conversation else {}),
                "metric": p.metric,
                "score": p.score,
                "error": p.error,
                **({"uncertainty": {name: interval.as_json() for name, interval in p.intervals}} if p.intervals else {}),
                **({"parts": {name: dict(metrics) for name, metrics in p.parts}} if p.parts else {}),
            }
            for p in state.pairs.values()
        ],
        "elapsed": round(finished.elapsed, 3),
        # each model's answered requests in this run: latency p50/p90/p99 (and, streamed, time to
        # first token and between tokens), requests and tokens per second of its busy time
        "models": {m: _model_json(load) for m, load in state.load.items() if load.profile is not None},
        "cost": state.cost(),  # the priced models' tokens, this run (None: no model has a price)
    }


def _model_json(load: ev.ModelLoad) -> dict[str, Any]:
    assert load.profile is not None
    out = load.profile.snapshot().as_json()
    if load.cost is not None:
        out["cost"] = load.cost
        out["datasets"] = {d: {"prompt_tokens": p, "completion_tokens": c, "cost": cost} for d, p, c, cost in load.usage}
    return out


def run_headless(runner: Runner, *, as_json: bool = False, out: TextIO | None = None) -> int:
    """Run to the end printing lines; the exit code of SPEC §2."""
    return follow_headless(runner, runner.plan.run.log_interval, as_json=as_json, out=out, epochs=runner.epochs)


def follow_headless(
    source: RunSource, log_interval: float, *, as_json: bool = False, out: TextIO | None = None, epochs: Mapping[str, int] | None = None
) -> int:
    """Drive a runner, or follow a run (`evaltui watch --no-ui`), to its end printing lines
    (`epochs`: each dataset's, when known, so that a failure says its epoch)."""
    out = out or (sys.stderr if as_json else sys.stdout)
    folded = getattr(source, "state", None)  # a Runner's or a Follower's: its bus folds every event before it is sent on
    renderer = HeadlessRenderer(out, log_interval=log_interval, epochs=epochs, state=folded if isinstance(folded, RunState) else None)
    source.subscribe(renderer)

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_signal, source)
            tg.start_soon(renderer.tick)
            code = await source.run()
            tg.cancel_scope.cancel()
        return code

    code = anyio.run(main)
    renderer.flush()  # the last turn's lines, should its flush not have run before the loop closed
    source.close()  # the simulator, if the plan has sim:// models
    finished = renderer.state.finished
    if finished is not None and finished.leaderboard is not None:
        from evaltui.scoring import render_txt

        renderer.write("\n" + render_txt(finished.leaderboard) + "\n")
        if finished.summary_files:
            renderer.write("\nsummary: " + "  ".join(finished.summary_files[k] for k in sorted(finished.summary_files)) + "\n")
    if as_json and finished is not None:
        HeadlessRenderer(sys.stdout).write(json.dumps(summary_json(renderer.state, finished), indent=2) + "\n")
    return code


async def _cancel_on_signal(source: RunSource) -> None:
    """First Ctrl-C / SIGTERM / SIGHUP (the SSH session closed): stop gracefully, work kept,
    statuses saying so. A second one: leave at once."""
    asked = False
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            if asked:
                with contextlib.suppress(OSError, ValueError):
                    sys.stdout.flush()  # this turn's lines
                sys.stderr.write("interrupted twice: leaving now (finished samples are on disk)\n")
                os._exit(ExitCode.INTERRUPTED)
            asked = True
            source.cancel()
