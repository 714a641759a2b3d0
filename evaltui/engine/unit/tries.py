"""One (sample, epoch) through the backend: its tries, its limits, and the checkpoint entry they end in.

The backend retries each request (`retry`, with backoff); `retry_on_error = N` tries the whole
sample again up to N more times once a request's retries are spent on errors worth retrying
(connection, timeout, 408, 429, 5xx, an unparseable reply) — a server down for longer than one
request's backoff. An error a try cannot change (a 400, a template that does not fill) fails
at once. The entry of a sample that failed for good keeps why each earlier try failed.

Limits end a unit as failed with their own error class: `time-limit` (time_limit seconds for
all its tries together) and `token-limit` (token_limit tokens for all of a sample's epochs and
tries, as the server reports them: a request is not sent once the sample has used them; the
reply that crosses the limit is kept; SampleTokens holds it under concurrency).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio

from evaltui.backends import Backend, BackendError, Trace
from evaltui.datasets import Sample
from evaltui.engine.unit.conversing import TurnLog, converse
from evaltui.failure import RECORD_KEYS, ErrorKind, error_record
from evaltui.plan import DatasetConfig
from evaltui.redaction import redact
from evaltui.text import one_line

OnRetry = Callable[[int, dict[str, Any]], None]  # (the try about to start, from 2; why the last one failed)


def head(index: int, epoch: int) -> dict[str, Any]:
    """A checkpoint line's first keys: the index, and the epoch when it is not the first (so a
    one-epoch run writes the lines it always wrote, and older checkpoints read as epoch 0)."""
    return {"index": index, "epoch": epoch} if epoch else {"index": index}


def failed_entry(index: int, epoch: int, error: dict[str, Any]) -> dict[str, Any]:
    """The entry of a sample that failed before a request could be made (its record or templates)."""
    return {**head(index, epoch), "origin_prompt": "", "prediction": "", "gold": "", "error": error}


INTERNAL_CHARS = 1000  # of an unexpected exception's text kept as a sample's failure

class SampleTokens:
    """token_limit for the samples of one dataset in this run: the tokens each has used over its
    epochs and tries, and the estimates its requests in flight hold.

    A request goes while its sample has tokens left (the reply that crosses the limit is kept).
    Under concurrency a sample's epochs would all go before any usage came back, so each
    request holds its estimate (prompt + max_new_tokens) until its reply settles it: one whose
    estimate does not fit beside the holds of the sample's requests in flight waits for one of
    them to settle, then looks again. A loose budget lets a sample's epochs go together; a tight
    one sends them one after another, and a sample sends the same requests whatever max_workers
    is. A sample is known while it has units queued or in flight (`expect`, then `finished` for
    each), so this holds as many entries as samples are under way, not the dataset. A resumed
    run counts afresh for the units it still has to send."""

    def __init__(self, limit: int):
        self.limit = limit
        self._used: dict[int, int] = {}
        self._left: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._settled: dict[int, anyio.Event] = {}  # set when one of the sample's holds is given back

    def expect(self, index: int, units: int, used: int = 0) -> None:
        """`used`: tokens the sample spent elsewhere already (a Ray actor that died: see ray/model.py)."""
        self._left[index] = self._left.get(index, 0) + units
        if used:
            self._used[index] = max(self._used.get(index, 0), used)

    def used(self, index: int) -> int:
        return self._used.get(index, 0)

    def carry(self, index: int, used: int) -> None:
        """The count reported for the sample where its units are answered (the driver's copy, on Ray)."""
        if index in self._left:
            self._used[index] = max(self._used.get(index, 0), used)

    def finished(self, index: int) -> None:
        left = self._left.get(index, 0) - 1
        if left > 0:
            self._left[index] = left
        else:
            self._left.pop(index, None)
            self._used.pop(index, None)

    async def admit(self, index: int, estimate: int) -> str | None:
        while True:
            used = self._used.get(index, 0)
            if used >= self.limit:
                return f"the sample has used {used} tokens (the server's count, over its epochs and tries) of its token_limit = {self.limit}"
            held = self._held.get(index, 0)
            if not held or used + held + estimate <= self.limit:
                self._held[index] = held + estimate
                return None
            settled = self._settled.get(index)
            if settled is None:
                settled = self._settled[index] = anyio.Event()
            await settled.wait()

    def left(self, index: int) -> int:
        """The sample's units queued or in flight."""
        return self._left.get(index, 0)

    def settle(self, index: int, estimate: int, tokens: int) -> None:
        self._used[index] = self._used.get(index, 0) + tokens
        held = self._held.get(index, 0) - estimate
        if held > 0:
            self._held[index] = held
        else:
            self._held.pop(index, None)
        settled = self._settled.pop(index, None)
        if settled is not None:
            settled.set()

    def of(self, index: int) -> _Budget:
        return _Budget(self, index)


class _Budget:
    """One sample's share of SampleTokens, as a Trace asks it (backends.trace.SampleBudget)."""

    __slots__ = ("tokens", "index")

    def __init__(self, tokens: SampleTokens, index: int):
        self.tokens, self.index = tokens, index

    async def admit(self, estimate: int) -> str | None:
        return await self.tokens.admit(self.index, estimate)

    def settle(self, estimate: int, tokens: int) -> None:
        self.tokens.settle(self.index, estimate, tokens)


class Again(NamedTuple):
    """A (sample, epoch) whose try failed in a way another may mend, sent to the back of its
    dataset's queue (retry_on_error) with what its tries did so far: a burst of failures is
    outlived by the units queued before it, instead of spending all of one sample's tries."""

    number: int  # the try it comes back for: 2, 3, ...
    earlier: tuple[dict[str, Any], ...]  # why each try before it failed
    wait: float  # s it waits at least: the backoff its next retry would have waited
    spent: float  # s its tries took (time_limit counts them, not the time in line)
    attempts: tuple[Any, ...]  # its tries' attempts so far (the per-sample log keeps them all)


class Answer(NamedTuple):
    entry: dict[str, Any]  # the checkpoint entry ({} when it goes again)
    trace: Trace | None  # its attempts and tokens, when they were kept
    tries: int  # whole tries made (retry_on_error)
    turns: TurnLog | None = None  # a conversation's: its requests answered, and what is known of each
    again: Again | None = None  # it goes to the back of the queue for another try


class SampleInference:
    """How one model's pool turns a rendered sample into its checkpoint entry."""

    def __init__(self, backend: Backend):
        self.backend = backend

    async def answer(
        self, cfg: DatasetConfig, sample: Sample, epoch: int, on_retry: OnRetry, tokens: SampleTokens | None = None, traced: bool = False,
        turns: TurnLog | None = None,
    ) -> Answer:
        """One (sample, epoch)'s checkpoint entry — its answer (gen), chosen continuation (ppl)
        or error, after up to 1 + retry_on_error tries within its limits — with the trace of its
        attempts when one is kept (`traced`: the per-sample log wants it; a limit needs it).
        `turns`: a conversation's requests answered before, and where each answered now is
        written (conversing.py); a conversation without one starts from its first request."""
        entry = head(sample.index, epoch)
        entry["origin_prompt"] = sample.prompt
        trace = Trace(tokens.of(sample.index)) if tokens is not None else Trace() if traced or cfg.time_limit else None
        earlier: list[dict[str, Any]] = []
        log = (turns or TurnLog()) if sample.script is not None else None
        if log is not None:
            entry["turns"] = log.turns  # filled as the requests are answered, and kept if one fails
        if not cfg.time_limit:
            await self._tries(cfg, sample, epoch, entry, on_retry, trace, earlier, log)
            return Answer(_turns_last(entry), trace, len(earlier) + 1, log)
        with anyio.move_on_after(cfg.time_limit) as scope:
            await self._tries(cfg, sample, epoch, entry, on_retry, trace, earlier, log)
        if scope.cancelled_caught:
            _timed_out(cfg, sample, entry, trace, earlier)
        return Answer(_turns_last(entry), trace, len(earlier) + 1, log)

    async def one_try(
        self, cfg: DatasetConfig, sample: Sample, epoch: int, on_retry: OnRetry, tokens: SampleTokens | None, traced: bool, again: Again | None
    ) -> Answer:
        """As `answer`, but one try at a time: a try that fails in a way another may mend, with
        tries left, comes back as an `Again` (no entry) for the pool to queue at the back; `again`
        is such a unit coming round for its next try."""
        number, earlier = (again.number, list(again.earlier)) if again is not None else (1, [])
        entry = head(sample.index, epoch)
        entry["origin_prompt"] = sample.prompt
        trace = Trace(tokens.of(sample.index)) if tokens is not None else Trace() if traced or cfg.time_limit else None
        if trace is not None and again is not None:
            trace.attempts[:0] = list(again.attempts)
        if number > 1:
            on_retry(number, earlier[-1])
        spent = again.spent if again is not None else 0.0
        started = time.monotonic()
        budget = cfg.time_limit - spent if cfg.time_limit else math.inf
        with anyio.move_on_after(max(0.0, budget)) as scope:
            error, retryable = await self._try(cfg, sample, epoch, entry, trace, None)
        if scope.cancelled_caught:
            _timed_out(cfg, sample, entry, trace, earlier)
        elif error is not None and retryable and number <= cfg.retry_on_error:
            earlier.append(_reason(error))
            wait = self.backend.backoff.delay(self.backend.cfg.retry + number)  # the schedule its request retries were on, continued
            attempts = tuple(trace.attempts) if trace is not None else ()
            return Answer({}, trace, number, again=Again(number + 1, tuple(earlier), wait, spent + time.monotonic() - started, attempts))
        elif error is not None:
            if earlier:
                error["tries"] = [*earlier, _reason(error)]
            entry.update(prediction="", gold=sample.target, error=error)
        return Answer(entry, trace, number)

    async def _tries(
        self, cfg: DatasetConfig, sample: Sample, epoch: int, entry: dict[str, Any], on_retry: OnRetry, trace: Trace | None, earlier: list[dict[str, Any]],
        log: TurnLog | None,
    ) -> None:
        """Up to 1 + retry_on_error tries, the reason of each failed one but the last added to
        `earlier`. A conversation's try that got some of its requests answered before one failed
        is progress: the failed request starts tries of its own (the answers are kept, and the
        next try goes on from it), so each request of a conversation has its retry_on_error."""
        tries = 1 + cfg.retry_on_error
        number = 1
        while True:
            answered = len(entry.get("turns", ()))
            error, again = await self._try(cfg, sample, epoch, entry, trace, log)
            if error is None:
                return
            if len(entry.get("turns", ())) > answered:
                number = 1
                earlier.clear()
            if not again or number == tries:
                if earlier:
                    error["tries"] = [*earlier, _reason(error)]
                entry.update(prediction="", gold=sample.target, error=error)
                return
            earlier.append(_reason(error))
            number += 1
            on_retry(number, earlier[-1])
            # the schedule the request retries were on, continued (a try's first attempt
            # waits what a retry after the last one would have): the server gets a breather
            await anyio.sleep(self.backend.backoff.delay(self.backend.cfg.retry + number - 1))

    async def _try(
        self, cfg: DatasetConfig, sample: Sample, epoch: int, entry: dict[str, Any], trace: Trace | None, log: TurnLog | None
    ) -> tuple[dict[str, Any] | None, bool]:
        """One try: fills `entry` with the answer, or returns (the error, whether another try may help)."""
        try:
            if cfg.mode == "ppl":
                ppls = [await self.backend.ppl(sample.prompt + c, trace=trace) for c in sample.choices]
                best = min(range(len(ppls)), key=ppls.__getitem__)
                entry.update(prediction=sample.choices[best], gold=sample.target, ppl=ppls)
            elif cfg.mode == "loglikelihood":
                # lm-eval's multiple choice: each choice's log-likelihood as the continuation of the
                # context (system and prompt, as a completions model gets them); the highest is the pick
                context = f"{sample.system}{cfg.system_join}{sample.prompt}" if sample.system else sample.prompt
                sums = await self.backend.loglikelihoods(context, sample.choices, trace=trace)
                best = max(range(len(sums)), key=sums.__getitem__)
                entry.update(prediction=sample.choices[best], gold=sample.target, ll=sums, choices=list(sample.choices))
            elif sample.script is not None and log is not None:
                entry.update(prediction=await converse(self.backend, cfg, sample.script, epoch, log, trace), gold=sample.target)
            else:
                settings = cfg.generation_overrides() or None
                answer = await self.backend.generate(sample.prompt, sample.system, epoch=epoch, trace=trace, settings=settings, join=cfg.system_join)
                entry.update(prediction=answer, gold=sample.target)
            return None, False
        except BackendError as e:  # its message cut short and masked by the backend
            return e.as_dict(), e.retryable
        except Exception as e:  # a bug must cost one sample, not the whole run
            if trace is not None:
                trace.interrupted(ErrorKind.INTERNAL)  # the attempt it cut short (and its token hold) ends here
            message = redact(one_line(f"{type(e).__name__}: {e}", INTERNAL_CHARS), self.backend.secrets)
            return error_record(ErrorKind.INTERNAL, message, attempts=1), False


def _turns_last(entry: dict[str, Any]) -> dict[str, Any]:
    """A conversation's entry reads as any other's first (prediction, gold, error), its turns after."""
    if "turns" in entry:
        entry["turns"] = entry.pop("turns")
    return entry


def _timed_out(cfg: DatasetConfig, sample: Sample, entry: dict[str, Any], trace: Trace | None, earlier: list[dict[str, Any]]) -> None:
    """`entry` as a unit whose time_limit ran out: the request in flight dropped, the reason said."""
    assert trace is not None
    trace.interrupted(ErrorKind.TIME_LIMIT)
    message = f"no answer within time_limit = {cfg.time_limit:g} s"
    error = error_record(ErrorKind.TIME_LIMIT, message, attempts=len(trace.attempts))
    if earlier:
        error["tries"] = [*earlier, _reason(error)]
    entry.update(prediction="", gold=sample.target, error=error)
    for key in ("ppl", "ll", "choices"):
        entry.pop(key, None)


def _reason(error: dict[str, Any]) -> dict[str, Any]:
    """What one failed try says in the entry's `tries`."""
    return {key: error.get(key) for key in RECORD_KEYS}
