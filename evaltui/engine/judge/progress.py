"""How far each judged pair's judging is, said on the one event stream (PairJudged), and each
judge's load (ModelLoad), so the screens and the headless lines show a judge like any model.

Counted here as verdicts come back, said by a task about once a second while a judge works —
counters read, never one event per verdict: a judge answering hundreds a second must not cost a
repaint each — and once more when the pair's judging ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from evaltui.backends import Backend
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.plan import ModelConfig

JUDGE_REPORT_INTERVAL = 1.0  # s between reports of a judge at work (as engine/run/pool.py's LOAD_REPORT_INTERVAL)


class Tally:
    """One pair's verdicts: those that stand (earlier runs' included), those its answers need so
    far (while it is inferred: its answers that reached the judge's queue), those not given."""

    def __init__(self, model: str, dataset: str, judge: str) -> None:
        self.model, self.dataset, self.judge = model, dataset, judge
        self.judged = self.answered = self.failed = 0
        self.said: ev.PairJudged | None = None

    def event(self, ended: bool = False) -> ev.PairJudged:
        return ev.PairJudged(self.model, self.dataset, self.judge, self.judged, self.answered, self.failed, ended)


class Reports:
    """The session's tallies and each judge's verdicts in this run (its load's `samples`)."""

    def __init__(self, emit: ev.Sink) -> None:
        self.emit = emit
        self.tallies: dict[Pair, Tally] = {}
        self.verdicts: dict[str, int] = {}

    def tally(self, model: str, dataset: str, judge: str) -> Tally:
        found = self.tallies.get((model, dataset))
        if found is None or found.judge != judge:
            found = self.tallies[(model, dataset)] = Tally(model, dataset, judge)
        return found

    def verdict(self, tally: Tally, graded: bool) -> None:
        """One verdict came back (or the judge gave none)."""
        if graded:
            tally.judged += 1
        else:
            tally.failed += 1
        self.verdicts[tally.judge] = self.verdicts.get(tally.judge, 0) + 1

    def say(self, tally: Tally, cfg: ModelConfig, backend: Backend | None, *, ended: bool = False) -> None:
        """The judge's load (its requests in flight move without a verdict) and the pair's
        counts, when they moved since last said."""
        if backend is not None:
            self.emit(judge_load(cfg, backend, self.verdicts.get(cfg.abbr, 0)))
        now = tally.event(ended)
        if now != tally.said:
            tally.said = now
            self.emit(now)

    @asynccontextmanager
    async def reporting(self, tally: Tally, cfg: ModelConfig, backend: Backend) -> AsyncIterator[None]:
        """While the block runs: say the tally and the judge's load every JUDGE_REPORT_INTERVAL."""

        async def tick() -> None:
            while True:
                self.say(tally, cfg, backend)
                await anyio.sleep(JUDGE_REPORT_INTERVAL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self.say(tally, cfg, backend)


def judge_load(cfg: ModelConfig, backend: Backend, verdicts: int) -> ev.ModelLoad:
    """The judge's load, as a tested model's pool reports its own: the strip and the fleet
    screen show it like any model's (`verdicts`: its requests answered or failed in this run)."""
    router = backend.router
    replicas: tuple[ev.ReplicaLoad, ...] = ()
    if len(router.replicas) > 1:
        replicas = tuple(ev.ReplicaLoad(r.url, r.state, r.in_flight, r.capacity(), r.attempts, r.errors) for r in router.replicas)
    profile = backend.profile.copy()
    return ev.ModelLoad(cfg.abbr, router.in_flight, cfg.max_workers, backend.retries, verdicts, cfg.max_workers, replicas, backend.tokens_used, profile)
