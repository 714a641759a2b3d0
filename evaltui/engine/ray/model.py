"""A model's units answered by Ray actors, as the worker pool sees them (`executor = "ray"`).

The driver runs the engine as a local run does — planning, resume, the worker pool, checkpoints,
status files, the watch-scorer, heartbeat, events — and only the units' requests leave it: the
pool asks this stand-in (an `Answerer`, like the local ModelAnswerer) for each unit's entry,
and it sends the unit to one of the model's actors (actor.py) and waits for the answer.

- **Actors.** A model has up to `actors_for` of them (the most `shards` any dataset has), made
  when first needed and killed when the pool's run ends; they serve all the model's datasets,
  each with one HTTP client, as the local run has one per model. A dataset's sample i goes to
  actor i mod shards: every epoch of a sample to the same actor, so its token_limit holds. A
  model with a limit that holds only within one process — a request rate, tokens_per_minute,
  max_workers_per_url, adaptive concurrency — has a single actor, so the limit holds exactly.
- **The model's max_workers across the cluster** is the pool's: its max_workers workers each
  hold one unit until its answer is back here, so no more than max_workers units are ever out
  over all the actors, with no limiter to ask per request (a limiter actor would cost two
  round trips per request; a share of max_workers per actor, recomputed as actors come and go,
  would leave slots idle on an actor whose units ran out). The price: a slot stays taken until
  the answer's batch reaches the driver (BATCH_WINDOW and the trip; see bench/RESULTS.md).
- **Batches.** Units handed out in one turn of the loop go to an actor in one call; answers
  come back in batches through the actor's streaming generator.
- **An actor that dies** (its node or process gone): every unit sent to it whose answer has not
  arrived is sent again, in order, to a new actor in its place — nothing lost, and nothing
  twice, as only answers received here are ever written. A slot whose actor dies MAX_DEATHS
  times in a row without an answer in between (it cannot start, or a unit keeps killing it)
  gives up: its units fail (type `worker`) and a re-run tries them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import anyio
import ray
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from ray.exceptions import RayError

from evaltui.backends import api_key_of, secrets_of
from evaltui.engine.ray.actor import Key, ModelActor, Unit
from evaltui.engine.stream import events as ev
from evaltui.engine.unit.answer import Answered
from evaltui.engine.unit.conversing import TurnLog
from evaltui.engine.unit.tries import Again, SampleTokens, failed_entry
from evaltui.failure import ErrorKind, error_record
from evaltui.latency import LatencyProfile
from evaltui.plan import DatasetConfig, ModelConfig, Plan
from evaltui.redaction import redact

MAX_DEATHS = 3


def actors_for(plan: Plan, model: ModelConfig) -> int:
    """How many actors the model's units are spread over (see the module's docstring)."""
    limits = model.limits
    if model.request_rate or model.tokens_per_minute or limits.capped_per_url or limits.adaptive:
        return 1
    return max(1, min(limits.max_workers, max(d.shards for d in plan.datasets)))


_remote_class: Any = None


def _actor_class() -> Any:
    """ModelActor as a Ray actor: no CPU claimed (it waits on the network; a claim could leave
    a model's actors waiting for each other's cores), spread over the nodes, never restarted
    by Ray (the driver replaces a dead one and knows what to send it)."""
    global _remote_class
    if _remote_class is None:
        _remote_class = ray.remote(num_cpus=0, max_restarts=0, scheduling_strategy="SPREAD")(ModelActor)
    return _remote_class


class _Waiting(NamedTuple):
    future: asyncio.Future[Answered]
    slot: _Slot
    unit: Unit
    tokens: SampleTokens | None


class _Slot:
    """One of a model's actors, and what is on its way to it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.actor: Any = None  # its handle, once it is made
        self.queue: list[Unit] = []  # to be sent at the end of this turn of the loop
        self.cancels: list[Key] = []
        self.flush_due = False
        self.deaths = 0  # in a row, with no answer between
        self.broken = ""  # why it gave up (MAX_DEATHS): its units fail at once
        self.load: ev.ModelLoad | None = None  # its actor's last report
        self.announced: set[tuple[str, int]] = set()  # token_limit: samples whose count it was given


class RayModel:
    """The worker pool's Answerer for a model whose units run on Ray actors."""

    def __init__(self, plan: Plan, model: ModelConfig, urls: Sequence[str], emit: ev.Sink, actors: int):
        self.model = model
        self.urls = list(urls)
        self.emit = emit
        self._datasets: dict[str, DatasetConfig] = {d.abbr: d for d in plan.datasets}
        self._count = actors
        self._key = api_key_of(model)  # read on the driver; handed to each actor in memory
        self._secrets = secrets_of(model, self._key)  # as its actors' backends mask
        self._slots: list[_Slot] = []
        self._waiting: dict[Key, _Waiting] = {}
        self._tg: TaskGroup | None = None
        self._submitted: MemoryObjectSendStream[Any] | None = None
        self._retired = (0, 0)  # retries and tokens of actors that are gone
        self._replica_states: dict[str, str] = {}  # each replica's state as last said

    # ------------------------------------------------------------------ the pool's side
    async def answer(
        self, cfg: DatasetConfig, shard: int, index: int, epoch: int, record: dict[str, Any] | str, tokens: SampleTokens | None, traced: bool,
        turns: TurnLog | None = None, again: Again | None = None, requeue: bool = False,
    ) -> Answered:
        """`turns` is not sent: on Ray a conversation is answered whole by one actor, from its
        first request (its turns are not checkpointed one by one). An actor makes a unit's
        retry_on_error tries in place: `again` and `requeue` are for a local pool."""
        slot = self._slots[index % min(len(self._slots), cfg.shards)]
        if slot.broken:
            answered: Answered = _worker_failure(index, epoch, slot.broken), None
        else:
            key = (cfg.abbr, index, epoch)
            waiting = _Waiting(asyncio.get_running_loop().create_future(), slot, (cfg.abbr, shard, index, epoch, record, traced, 0, 0), tokens)
            self._waiting[key] = waiting
            self._send(slot, waiting)
            try:
                answered = await waiting.future
            except BaseException:  # cancelled (the pool stops): the actor need not go on with it
                if self._waiting.get(key) is waiting:
                    del self._waiting[key]
                    self._withdraw(slot, key)
                raise
        if tokens is not None:
            tokens.finished(index)
            if not tokens.left(index):
                slot.announced.discard((cfg.abbr, index))
        return answered

    def load(self, samples: int) -> ev.ModelLoad:
        """The actors' last reports added up (and what actors now gone did)."""
        cfg, most = self.model, self.model.limits.max_workers
        loads = [s.load for s in self._slots if s.load is not None]
        retries, tokens = self._retired
        retries += sum(x.retries for x in loads)
        tokens += sum(x.tokens for x in loads)
        replicas: dict[str, ev.ReplicaLoad] = {}
        for x in loads:
            for r in x.replicas:
                seen = replicas.get(r.url)
                if seen is None:
                    replicas[r.url] = r
                else:  # up if any actor has it up; its counters added up
                    state = seen.state if seen.state == "up" else r.state
                    replicas[r.url] = ev.ReplicaLoad(r.url, state, seen.in_flight + r.in_flight, min(most, seen.limit + r.limit),
                                                     seen.attempts + r.attempts, seen.errors + r.errors)
        limit = min(most, sum(x.limit for x in loads)) if loads and replicas else most
        in_flight = sum(x.in_flight for x in loads)
        profile = LatencyProfile()  # the actors' answers together (a dead actor's with it: the next report has none of them)
        for x in loads:
            if x.profile is not None:
                profile.merge(x.profile)
        return ev.ModelLoad(cfg.abbr, in_flight, most, retries, samples, limit, tuple(replicas.values()), tokens, profile)

    def silent(self) -> bool:
        """Each actor keeps its own replicas' counts: the pool's stop for a model that found no
        server rests on its own count (NO_SERVER_AFTER samples in a row, none answered), as at one URL."""
        return True

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """While the pool runs: the actors' answers received, the calls' outcomes collected; the
        actors killed when it ends."""
        self._slots = [_Slot(k) for k in range(self._count)]
        send, receive = anyio.create_memory_object_stream[Any](math.inf)
        self._submitted = send
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._collect, receive)
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = self._submitted = None
            for slot in self._slots:
                self._retire(slot)  # a next pass makes new slots: the counters go on from these
                if slot.actor is not None:
                    with contextlib.suppress(RayError):  # (gone already)
                        ray.kill(slot.actor, no_restart=True)
                    slot.actor = None
            self._waiting.clear()

    # ------------------------------------------------------------------ sending
    def _send(self, slot: _Slot, waiting: _Waiting) -> None:
        unit, tokens = waiting.unit, waiting.tokens
        if tokens is not None:
            sample = (unit[0], unit[2])
            first = sample not in slot.announced
            slot.announced.add(sample)
            # with the sample's first unit at this actor: how many of its units it is to count, and
            # the tokens it used at an actor that died (else the new one would count from 0)
            unit = (*unit[:6], tokens.left(unit[2]) if first else 0, tokens.used(unit[2]) if first else 0)
        slot.queue.append(unit)
        self._schedule(slot)

    def _withdraw(self, slot: _Slot, key: Key) -> None:
        """A unit nobody waits for any more: not sent if it is still queued, else stopped at its actor."""
        for i, u in enumerate(slot.queue):
            if (u[0], u[2], u[3]) == key:
                del slot.queue[i]
                return
        slot.cancels.append(key)
        self._schedule(slot)

    def _schedule(self, slot: _Slot) -> None:
        if not slot.flush_due:
            slot.flush_due = True
            asyncio.get_running_loop().call_soon(self._flush, slot)

    def _flush(self, slot: _Slot) -> None:
        """What this turn of the loop gave the slot, in one call to its actor."""
        slot.flush_due = False
        if (not slot.queue and not slot.cancels) or self._tg is None or self._submitted is None:
            return
        if slot.actor is None:
            if not slot.queue:
                slot.cancels.clear()  # its actor is gone, and the units with it
                return
            slot.actor = _actor_class().remote(self.model, self._datasets, self.urls, self._key)
            self._tg.start_soon(self._receive, slot, slot.actor)
        units, slot.queue = slot.queue, []
        cancels, slot.cancels = slot.cancels, []
        self._submitted.send_nowait(slot.actor.submit.remote(units, cancels))

    async def _collect(self, refs: MemoryObjectReceiveStream[Any]) -> None:
        """The outcome of every call sent, so none is left unread (a dead actor's are read by `_receive`)."""
        async with refs:
            async for ref in refs:
                with contextlib.suppress(RayError):  # a dead actor's calls: `_receive` hears of its death
                    await ref

    # ------------------------------------------------------------------ receiving
    async def _receive(self, slot: _Slot, actor: Any) -> None:
        try:
            async for ref in actor.results.options(num_returns="streaming").remote():
                self._take(slot, await ref)
        except RayError as e:  # the actor died (or its results raised)
            if slot.actor is actor:
                self._lost(slot, e)

    def _take(self, slot: _Slot, batch: Any) -> None:
        answers, events, load = batch
        if answers:
            slot.deaths = 0
        for event in events:
            if isinstance(event, ev.ReplicaStateChanged):  # each actor routes by what it sees: a line per change, not per actor
                if self._replica_states.get(event.url) == event.state:
                    continue
                self._replica_states[event.url] = event.state
            self.emit(event)
        if load is not None:
            slot.load = load
        for key, entry, line, used in answers:
            waiting = self._waiting.pop(key, None)
            if waiting is not None and waiting.tokens is not None:
                waiting.tokens.carry(key[1], used)
            if waiting is not None and not waiting.future.done():
                waiting.future.set_result((entry, line))

    def _retire(self, slot: _Slot) -> None:
        """What the slot's actor counted (retries, tokens) kept once it is gone."""
        if slot.load is not None:
            self._retired = (self._retired[0] + slot.load.retries, self._retired[1] + slot.load.tokens)
            slot.load = None

    def _lost(self, slot: _Slot, error: RayError) -> None:
        """Its actor is gone: what it had not answered goes to a new one (or fails, MAX_DEATHS)."""
        with contextlib.suppress(RayError):  # should it be only out of reach, it must not go on with its units
            ray.kill(slot.actor, no_restart=True)
        slot.actor = None
        self._retire(slot)
        slot.deaths += 1
        slot.announced.clear()
        slot.queue.clear()
        slot.cancels.clear()
        why = redact(_why_gone(error), self._secrets)
        mine = [(key, w) for key, w in self._waiting.items() if w.slot is slot]
        m = self.model.abbr
        if slot.deaths >= MAX_DEATHS:
            slot.broken = f"the Ray actor answering it died {slot.deaths} times in a row (last: {why})"
            self.emit(ev.Notice(f"{m}: a Ray actor died {slot.deaths} times in a row ({why}); its samples fail — run again once the cluster is sound", "error"))
            for key, w in mine:
                del self._waiting[key]
                w.future.set_result((_worker_failure(w.unit[2], w.unit[3], slot.broken), None))
            return
        self.emit(ev.Notice(f"{m}: a Ray actor died ({why}); its {len(mine)} unanswered samples go to a new one", "warning"))
        for _, w in mine:
            self._send(slot, w)


def _worker_failure(index: int, epoch: int, why: str) -> dict[str, Any]:
    return failed_entry(index, epoch, error_record(ErrorKind.WORKER, why))


def _why_gone(error: BaseException) -> str:
    """Why an actor is gone, in a line: Ray's message is a paragraph (a traceback when the actor
    could not start, the worker's exit detail when its process died)."""
    text = _ANSI.sub("", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if "creation task" in lines[0]:
        return f"it could not start: {lines[-1][:300]} (is evaltui, of this version, installed on every node?)"
    pid, ip = re.search(r"\bpid: (\d+)", text), re.search(r"\bip: (\S+)", text)
    detail = re.search(r"Worker exit detail: (.*?)(?: Some common causes|$)", " ".join(lines))
    if pid is None or ip is None:
        return " ".join(lines)[:300]
    return f"its process {pid.group(1)} on {ip.group(1)} ended" + (f": {detail.group(1)[:200]}" if detail else "")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
