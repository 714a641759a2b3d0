"""Where one model's units are answered: its backend, the per-unit code, its load and its replicas' events.

The worker pool (run/pool.py) schedules a model's (sample, epoch) units and keeps the work dir; for
each unit it asks an `Answerer` for the checkpoint entry and the per-sample log line. Locally
that is a `ModelAnswerer` on the pool's own loop. On Ray (`executor = "ray"`) it is a stand-in
(ray/model.py) that sends the unit to an actor, which runs a `ModelAnswerer` of its own: the
same `answer` — templates, tries, limits, traces — runs on either side, so a plan gives the
same entries wherever it runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from evaltui.backends import Backend
from evaltui.backends.replica import EJECTED, Replica
from evaltui.datasets import DatasetError, render_sample
from evaltui.engine.disk import samplelog
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import SampleError
from evaltui.engine.unit.conversing import TurnLog
from evaltui.engine.unit.tries import Again, SampleInference, SampleTokens, failed_entry
from evaltui.failure import ErrorKind, error_record
from evaltui.plan import DatasetConfig, ModelConfig
from evaltui.redaction import redact

#: A unit's checkpoint entry and its per-sample log line (None when the log is off).
Answered = tuple[dict[str, Any], "dict[str, Any] | None"]
AGAIN = "again"  # the key of an answer that is no entry: the unit goes to the back of its queue


class Answerer(Protocol):
    """What the worker pool needs of whatever answers its model's units."""

    @property
    def urls(self) -> Sequence[str]:
        """Where the model's requests go (for messages)."""

    async def answer(
        self, cfg: DatasetConfig, shard: int, index: int, epoch: int, record: dict[str, Any] | str, tokens: SampleTokens | None, traced: bool,
        turns: TurnLog | None = None, again: Again | None = None, requeue: bool = False,
    ) -> Answered:
        """One unit's entry (an error when its record or templates fail) and, when `traced`, its
        log line; `record` is a string when the record could not be read (why). The unit is
        settled with `tokens` (token_limit's count) before this returns. `turns`: a
        conversation's requests answered before, and where each one answered now is written.
        `requeue`: an answer `{AGAIN: Again}` instead sends it to the back of the queue (where
        it can: else its tries are made in place)."""

    def load(self, samples: int) -> ev.ModelLoad:
        """The model's load now (`samples`: the units the pool has counted)."""

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """What runs beside the pool's workers while it runs (started before the first unit is
        asked for, at each pass of the pool; cancelled when the pool ends)."""

    def silent(self) -> bool:
        """Whether every replica was tried in this pass of the pool and none answered (the pool
        stops a model that found no server only then)."""


class ModelAnswerer:
    """A model's units answered here, through `backend`; its events (retries, replicas) go to `emit`."""

    def __init__(self, model: ModelConfig, backend: Backend, emit: ev.Sink):
        self.model = model
        self.backend = backend
        self.urls = backend.urls
        self.emit = emit
        self.secrets = backend.secrets  # masked in failure messages: servers echo requests
        self._inference = SampleInference(backend)
        router = backend.router
        self.limits = model.limits_for(len(backend.urls))
        self._several = len(router.replicas) > 1
        router.on_change = self._replica_changed
        router.on_down = self._replicas_down
        backend.on_hold = self._held

    async def answer(
        self, cfg: DatasetConfig, shard: int, index: int, epoch: int, record: dict[str, Any] | str, tokens: SampleTokens | None, traced: bool,
        turns: TurnLog | None = None, again: Again | None = None, requeue: bool = False,
    ) -> Answered:
        """`requeue` (a local pool): one try at a time — an entry `{AGAIN: Again}` says the unit goes
        to the back of its queue (retry_on_error); `again` is such a unit come round again."""
        clock, started = time.monotonic(), time.time() if traced else 0.0
        answer = None
        try:
            if isinstance(record, str):
                raise DatasetError(record)
            sample = render_sample(cfg, index, record)
        except Exception as e:  # the file changed since it was checked: this sample fails, not the run
            kind, message = ErrorKind.TEMPLATE, f"record {index}: cannot fill the templates: {type(e).__name__}: {e}"
            if isinstance(e, DatasetError):
                kind, message = ErrorKind.DATASET, f"record {index}: {e}"
            entry = failed_entry(index, epoch, error_record(kind, message))
        else:
            on_retry = partial(self._retrying, cfg.abbr, shard, index, epoch)
            if requeue and sample.script is None:  # (a conversation's tries go on from its answered requests, in place)
                answer = await self._inference.one_try(cfg, sample, epoch, on_retry, tokens, traced, again)
                if answer.again is not None:
                    return {AGAIN: answer.again}, None
            else:
                answer = await self._inference.answer(cfg, sample, epoch, on_retry, tokens, traced=traced, turns=turns)
            entry = answer.entry
        if tokens is not None:
            tokens.finished(index)
        if not traced:
            return entry, None
        if answer is None:
            return entry, samplelog.record(entry, None, "", 1, started, time.monotonic() - clock)
        messages = None
        if sample.script is not None and answer.turns is not None:
            messages = sample.script.log_messages([t["answer"] for t in answer.turns.turns], answer.turns.facts)
        return entry, samplelog.record(entry, answer.trace, sample.system, answer.tries, started, time.monotonic() - clock, messages)

    def _retrying(self, dataset: str, shard: int, index: int, epoch: int, number: int, why: dict[str, Any]) -> None:
        self.emit(ev.SampleRetried(self.model.abbr, dataset, shard, index, number, SampleError.from_dict(why), epoch))

    def load(self, samples: int) -> ev.ModelLoad:
        backend, router, limits = self.backend, self.backend.router, self.limits
        replicas: tuple[ev.ReplicaLoad, ...] = ()
        if limits.per_replica:
            replicas = tuple(ev.ReplicaLoad(r.url, r.state, r.in_flight, r.capacity(), r.attempts, r.errors) for r in router.replicas)
        limit = router.limit(limits.max_workers) if limits.per_replica else limits.max_workers
        # the attempts out at the servers (not the samples waiting for a slot, or sleeping out a backoff)
        in_flight, profile = router.in_flight, backend.profile.copy()
        return ev.ModelLoad(self.model.abbr, in_flight, limits.max_workers, backend.retries, samples, limit, replicas, backend.tokens_used, profile)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The probes of ejected replicas (a model's one url is a fleet of one: replicas.py)."""
        self.backend.router.mark()  # `silent` counts from the start of this pass
        self.backend.router.restart()  # a model that gave up waiting may wait again
        task_status.started()
        await self.backend.router.run_probes()

    def silent(self) -> bool:
        return self.backend.router.silent()

    def _replica_changed(self, r: Replica) -> None:
        back_off = r.back_off if r.state == EJECTED else 0.0
        self.emit(ev.ReplicaStateChanged(self.model.abbr, r.url, r.state, redact(r.reason, self.secrets), back_off, r.failed_probes))

    def _held(self, message: str) -> None:
        self.emit(ev.Notice(f"{self.model.abbr}: {redact(message, self.secrets)}", "warning"))

    def _replicas_down(self, reason: str) -> None:
        self.emit(ev.ReplicasDown(self.model.abbr, self.model.down_timeout, redact(reason, self.secrets)))
