"""The Ray actor that answers a model's units on some node of the cluster (`executor = "ray"`).

The driver's RayModel (model.py) makes one per slot of a model. It builds the model's
backend as a local run does — `make_client`, the backend of its type, the plan's own
ModelConfig, so replicas, adaptive concurrency, pacing, retries, time limits and traces behave
as they do locally — and answers every unit it is sent at once, with `ModelAnswerer.answer`,
the code the local pool runs. It holds no limit of its own: the driver never has more than the
model's `max_workers` units out across all its actors.

Answers go back in batches through `results`, a streaming generator: what finished within
BATCH_WINDOW s of the first answer of a batch, with the events that came before them (retries,
replicas' states) and the actor's load; an idle actor still reports its load every
LOAD_INTERVAL s. Nothing here touches the work dir: the driver writes every file.

This module does not import Ray: the driver wraps the class with `ray.remote`, and a worker
imports it by name (evaltui must be installed on every node).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from evaltui.backends import make_backend, make_client, secrets_of
from evaltui.engine.stream import events as ev
from evaltui.engine.unit.answer import Answered, ModelAnswerer
from evaltui.engine.unit.heap import settle_heap
from evaltui.engine.unit.tries import INTERNAL_CHARS, SampleTokens, failed_entry
from evaltui.failure import ErrorKind, error_record
from evaltui.plan import DatasetConfig, ModelConfig
from evaltui.redaction import redact, undumpable
from evaltui.text import one_line

BATCH_WINDOW = 0.005  # s a batch gathers answers after its first one
LOAD_INTERVAL = 1.0  # s between batches of an actor with nothing to send but its load

Key = tuple[str, int, int]  # (dataset, index, epoch): a unit, within one model
# (dataset, shard, index, epoch, record or why it is unreadable, traced, expect, used): `expect` > 0
# with a sample's first unit here under token_limit: how many of its units are to come, and
# `used` the tokens it spent already (at an actor that died)
Unit = tuple[str, int, int, int, "dict[str, Any] | str", bool, int, int]
# each answer with the tokens its sample has used here so far (token_limit; else 0)
Answer = tuple[Key, dict[str, Any], "dict[str, Any] | None", int]
Batch = tuple[list[Answer], list[ev.Event], "ev.ModelLoad | None"]


class ModelActor:
    def __init__(self, model: ModelConfig, datasets: dict[str, DatasetConfig], urls: list[str], api_key: str | None):
        """`api_key`: the key the driver read from its environment, held in this process's memory only."""
        undumpable()  # model-written code (code_exec on this node) must not read the key from /proc
        settle_heap()  # as the driver does: the collector kept out of the request loop
        self._model = model
        self._datasets = datasets
        self._urls = urls
        self._api_key = api_key
        self._secrets = secrets_of(model, api_key)
        self._answerer: ModelAnswerer | None = None
        self._stack = AsyncExitStack()
        self._opening = asyncio.Lock()
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._answers: list[Answer] = []
        self._events: list[ev.Event] = []
        self._ready = asyncio.Event()
        self._tokens: dict[str, SampleTokens] = {}
        self._background: set[asyncio.Task[None]] = set()

    def pid(self) -> int:
        return os.getpid()

    async def submit(self, units: list[Unit], cancels: list[Key]) -> None:
        """Answer these units (each at once) and stop those the driver no longer waits for."""
        for key in cancels:
            task = self._tasks.pop(key, None)
            if task is not None:
                task.cancel()
        if not units:
            return
        try:
            answerer = await self._open()
        except Exception as e:  # e.g. a ca_file this node does not have: each unit says so (the driver waits for them)
            why = redact(one_line(f"the Ray actor could not make the model's HTTP client: {type(e).__name__}: {e}", INTERNAL_CHARS), self._secrets)
            error = error_record(ErrorKind.WORKER, why)
            for dataset, _, index, epoch, *_ in units:
                self._answers.append(((dataset, index, epoch), failed_entry(index, epoch, error), None, 0))
            self._ready.set()
            return
        for unit in units:
            key = (unit[0], unit[2], unit[3])
            self._tasks[key] = asyncio.create_task(self._answer(answerer, key, unit))

    async def results(self) -> AsyncIterator[Batch]:
        """The answers as they finish, in batches, until the actor is killed."""
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._ready.wait(), LOAD_INTERVAL)
            if self._answers:
                await asyncio.sleep(BATCH_WINDOW)
            self._ready.clear()
            answers, self._answers = self._answers, []
            events, self._events = self._events, []
            yield answers, events, self._answerer.load(0) if self._answerer is not None else None

    async def _open(self) -> ModelAnswerer:
        """The model's HTTP client and backend, made with the first units (on this actor's loop)."""
        async with self._opening:
            if self._answerer is None:
                m = self._model
                client = await self._stack.enter_async_context(make_client(m, self._urls))
                backend = make_backend(m, client, urls=self._urls, api_key=self._api_key)
                self._answerer = ModelAnswerer(m, backend, self._emit)
                serving = asyncio.create_task(self._answerer.serve())  # the probes of ejected replicas
                self._background.add(serving)
            return self._answerer

    async def _answer(self, answerer: ModelAnswerer, key: Key, unit: Unit) -> None:
        dataset, shard, index, epoch, record, traced, expect, used = unit
        cfg = self._datasets[dataset]
        tokens = None
        if cfg.token_limit:
            tokens = self._tokens.setdefault(dataset, SampleTokens(cfg.token_limit))
            if expect:
                tokens.expect(index, expect, used)
        try:
            answered: Answered = await answerer.answer(cfg, shard, index, epoch, record, tokens, traced)
        except Exception as e:  # a bug must cost one unit, and the driver must hear of it (it waits)
            message = redact(one_line(f"{type(e).__name__}: {e}", INTERNAL_CHARS), answerer.secrets)
            answered = failed_entry(index, epoch, error_record(ErrorKind.INTERNAL, message)), None
        finally:
            if self._tasks.get(key) is asyncio.current_task():  # (not a later unit of the same key)
                del self._tasks[key]
        self._answers.append((key, *answered, tokens.used(index) if tokens is not None else 0))
        self._ready.set()

    def _emit(self, event: ev.Event) -> None:
        self._events.append(event)
        self._ready.set()
