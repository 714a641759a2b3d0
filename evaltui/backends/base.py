"""What every backend shares: the retry policy, the request and token budgets, error classes.

The reference client retried some failures forever, dropped others on the floor, and let the
rate limit be bypassed under concurrency. Here a single loop, `Backend._post`, owns every
attempt: each one waits for its request and token budgets, is given a replica by the model's
Router (replicas.py: routing, caps, the adaptive limit, ejection), has its own timeout, is
classified (retry or fail now), and the loop is bounded by `retry` on every path — a re-send
after its replica was ejected does not count, and is bounded on its own.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import aiohttp
import anyio
from yarl import URL

from evaltui import fastjson
from evaltui.backends.adaptive import AdaptiveLimit
from evaltui.backends.client import ModelClient, Reply, ReplyTooLarge, RequestFailed
from evaltui.backends.pacing import MAX_RETRY_AFTER, Backoff, TokenBucket, TokenBudget, estimate_tokens, parse_retry_after
from evaltui.backends.params import Settings, max_new_tokens, merged
from evaltui.backends.replica import EJECT_AFTER, NO_REPLY, REFUSALS, TIMED_OUT, Replica, ReplicasDown
from evaltui.backends.replicas import Router
from evaltui.backends.replies import TEXT_CHARS, BadReply, Tokens, answer_of, server_message
from evaltui.backends.sse import Stream
from evaltui.backends.trace import NO_TRACE, Trace, Untraced
from evaltui.conversation import Conversation, as_text
from evaltui.failure import ErrorKind, error_record
from evaltui.latency import LatencyProfile
from evaltui.redaction import redact
from evaltui.text import one_line

if TYPE_CHECKING:
    from evaltui.plan import ModelConfig

T = TypeVar("T")
Streamed = Callable[[Callable[[], float]], Stream]  # a new Stream for an attempt, on the backend's clock

RETRY_STATUSES = frozenset({408, 429})
HOLD_SAID = 5.0  # s of Retry-After from which the wait is said (shorter ones pass unnoticed anyway)
LATE = 0.5  # an attempt's timeout firing later than this (× `timeout`, s at least) measured the event loop, not the server
PROBE_TIMEOUT = 10.0  # s a health check of an ejected replica may take (at most the model's timeout)


class BackendError(Exception):
    """A request that failed for good. `kind` is the error class a user sees in the failures list."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.retryable = retryable

    def as_dict(self) -> dict[str, Any]:
        return error_record(self.kind, self.message, status=self.status, attempts=self.attempts)

    def __str__(self) -> str:
        code = f" {self.status}" if self.status is not None else ""
        return f"{self.kind}{code}: {self.message}"


class _Retry(Exception):
    """An attempt that failed in a way worth another (`free`: its replica went out of service)."""

    def __init__(self, error: BackendError, *, retry_after: float | None = None, free: bool = False):
        self.error, self.retry_after, self.free = error, retry_after, free


def secrets_of(cfg: ModelConfig, api_key: str | None) -> tuple[str, ...]:
    """What a model's requests carry that a server may echo back: its key, its secret headers' values."""
    return tuple(s for s in (api_key, *cfg.secret_header_values()) if s)


class Backend(ABC):
    """One model behind HTTP. Subclasses build payloads and read replies; this class sends them."""

    # What a protocol is, declared by its class (as harlequin's adapters declare theirs), so that
    # the plan, the engine and the commands ask the backend rather than name its type.

    #: Whether `ppl` works: the protocol gives the prompt's log-probabilities. The plan asks it
    #: of every model a ppl-mode dataset is sent to.
    computes_ppl: ClassVar[bool] = False
    #: What a model's url names, said when a request finds nothing there (a 404) or none is answered.
    url_form: ClassVar[str] = "the base URL, e.g. http://host:8000/v1"
    #: Where on a server its API lies (after a prefix of the model's own, on the bundled simulator):
    #: what a `sim://` model's url becomes, and `evaltui benchmarks show`'s example url.
    api_path: ClassVar[str] = "/v1"
    #: Whether the plan must name the model (`model`): the server routes requests by it.
    needs_model: ClassVar[bool] = True

    @classmethod
    def samples(cls, kwargs: Mapping[str, Any]) -> bool:
        """Whether these generation_kwargs make the model sample rather than decode greedily
        (greedily, every epoch of a sample gets the same answer). OpenAI's rule: a temperature
        above 0, or `do_sample = true` where no temperature is given."""
        temperature = kwargs.get("temperature")
        if temperature is None:
            return kwargs.get("do_sample") is True
        return isinstance(temperature, (int, float)) and temperature > 0

    def url_hint(self) -> str:
        """`type lightllm wants the full /generate URL`."""
        return f"type {self.cfg.type} wants {self.url_form}"

    def __init__(
        self, cfg: ModelConfig, client: ModelClient, *, api_key: str | None = None, url: str | None = None, urls: Sequence[str] | None = None,
        backoff: Backoff | None = None, bucket: TokenBucket | None = None, tokens: TokenBudget | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep, clock: Callable[[], float] = time.monotonic,
    ):
        """`urls` (or `url`): where the engine resolved the plan's urls to (a simulator's)."""
        self.cfg = cfg
        self.client = client
        self.urls = list(urls or ([url] if url else cfg.urls))
        self.url = self.urls[0]
        self.backoff = backoff or Backoff(base=cfg.backoff)
        self.bucket = bucket or TokenBucket(cfg.request_rate)
        if tokens is None and cfg.tokens_per_minute:
            tokens = TokenBudget(cfg.tokens_per_minute)
        self.tokens = tokens  # tokens_per_minute, or None
        self._max_new_tokens = max_new_tokens(cfg.generation_kwargs)
        self._sleep = sleep
        self._clock = clock
        self.retries = 0  # attempts beyond each request's first, for the engine's load report
        self.tokens_used = 0  # tokens charged for answered requests (the server's count when it gives one)
        self.profile = LatencyProfile()  # every answered attempt's time (and, streamed, its tokens' times)
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update({k.lower(): v for k, v in cfg.headers.items()})  # one of each, whatever the case
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._probe_headers = {k: v for k, v in headers.items() if k != "content-type"}
        #: What this backend sends that a server may echo back (masked in any form, whole or in part,
        #: in its failures; the engine masks its own messages with the same).
        self.secrets = secrets_of(cfg, api_key)
        self._timeout = aiohttp.ClientTimeout(total=cfg.timeout)  # the whole attempt: connect, send, whole reply
        self._probe_timeout = aiohttp.ClientTimeout(total=min(cfg.timeout, PROBE_TIMEOUT))
        self.router = Router(self._replicas(), down_timeout=cfg.down_timeout, probe=self._health, clock=clock)
        #: Said to when a server's Retry-After holds requests back for HOLD_SAID s or more (the engine reports it).
        self.on_hold: Callable[[str], None] | None = None
        self._said_until = 0.0  # the end of the last hold said

    def _replicas(self) -> list[Replica]:
        limits = self.cfg.limits_for(len(self.urls))
        cap, lo = limits.per_url, limits.floor_per_url
        return [
            Replica(i, u, self._endpoint_url(u), self._health_url(u), cap, AdaptiveLimit(lo, cap, clock=self._clock) if limits.adaptive else None)
            for i, u in enumerate(self.urls)
        ]

    @abstractmethod
    def _endpoint_url(self, url: str) -> URL:
        """Where this protocol's requests go on the server at `url` (a plan url)."""

    @abstractmethod
    def _health_url(self, url: str) -> URL:
        """What tells whether the server at `url` is up: its health check, probed after an ejection."""

    @abstractmethod
    async def generate(
        self, prompt: str, system: str = "", *, epoch: int = 0, trace: Trace | None = None, settings: Settings | None = None, join: str = "\n\n"
    ) -> str:
        """The model's answer to one prompt (a BackendError when it fails for good).

        `epoch` ≥ 1 (a dataset run for several epochs): the request of that epoch, with the
        seed varied where the protocol takes one (see `epoch_seed`); epoch 0 is the request a
        one-epoch run sends. `trace`: where every attempt and the reported tokens go.
        `settings`: what the dataset sets over generation_kwargs (`stop`, `max_new_tokens`,
        `temperature`: DatasetConfig.generation_overrides). `join`: what a protocol that takes one
        text (completions, LightLLM) puts between `system` and `prompt` (the dataset's system_join)."""

    @abstractmethod
    def payload(self, prompt: str, system: str = "", *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        """The body `generate` sends for this prompt (what `evaltui benchmarks show` prints)."""

    async def converse(self, conversation: Conversation, *, epoch: int = 0, trace: Trace | None = None,
                       settings: Settings | None = None, join: str = "\n\n") -> str:
        """The answer to a conversation: one text (conversation/text.py) here; the chat types send messages."""
        return await self.generate(as_text(conversation, join), epoch=epoch, trace=trace, settings=settings)

    def conversation_payload(self, conversation: Conversation, *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        return self.payload(as_text(conversation, join), epoch=epoch, settings=settings)

    async def ppl(self, text: str, *, trace: Trace | None = None) -> float:
        raise BackendError(ErrorKind.CONFIG, f"type {self.cfg.type!r} cannot compute perplexity")

    async def loglikelihoods(self, context: str, continuations: Sequence[str], *, trace: Trace | None = None) -> list[float]:
        """Each continuation's log-likelihood given `context`, as lm-eval computes it
        (backends/loglikelihood.py); only protocols that give prompt log-probs can."""
        raise BackendError(ErrorKind.CONFIG, f"type {self.cfg.type!r} gives no prompt log-probabilities (loglikelihood needs openai-completions or lightllm)")

    def ll_payloads(self, context: str, continuations: Sequence[str]) -> list[dict[str, Any]]:
        """The bodies `loglikelihoods` sends, in order (what `evaltui benchmarks show` prints)."""
        return []

    def usage(self, data: Any) -> tuple[int, int] | None:
        """The (prompt, completion) tokens a reply reports, None when it reports none."""
        return None

    def merged(self, settings: Settings | None) -> dict[str, Any]:
        """generation_kwargs with a dataset's settings over them (the model's own when it has none)."""
        return merged(self.cfg.generation_kwargs, settings)

    def cost(self, text: str, new_tokens: int | None = None) -> int:
        """What a request is charged before it is sent — by tokens_per_minute, and by its
        sample's token_limit — the prompt's estimate plus the tokens it may generate."""
        return estimate_tokens(text) + (self._max_new_tokens if new_tokens is None else new_tokens)

    async def _post(
        self, payload: dict[str, Any], parse: Callable[[Any], T], cost: int = 0, trace: Trace | None = None, stream: Streamed | None = None
    ) -> T:
        """POST `payload` until `parse` accepts a reply, at most retry+1 attempts; else BackendError,
        its message masked here, once (each piece of it was cut short where it was made).

        An attempt that says nothing about its request (see replicas.py: no reply from one of
        several replicas, a refusal another replica could take instead, or a failure at a
        replica ejected meanwhile) is sent again at once and does not count — at most
        EJECT_AFTER times per replica (enough to find each one out), so this too ends. With a `trace`, every
        attempt is noted in it, and one is not sent once its token budget is spent."""
        try:
            return await self._attempts(fastjson.dumps(payload), parse, cost, trace, stream)
        except BackendError as e:
            e.message = redact(e.message, self.secrets)
            raise

    async def _attempts(self, body: bytes, parse: Callable[[Any], T], cost: int, trace: Trace | None, stream: Streamed | None) -> T:
        noted = NO_TRACE if trace is None else trace
        attempts = self.cfg.retry + 1
        attempt, avoid = 1, None
        free = EJECT_AFTER * len(self.urls)  # enough to find every replica out, and no more
        retry_after: float | None = None
        while True:
            await self.bucket.acquire(held=retry_after is None)
            refusal = await noted.start(cost)
            if refusal is not None:
                raise BackendError(ErrorKind.TOKEN_LIMIT, refusal, attempts=attempt - 1)
            if self.tokens is not None:
                await self.tokens.acquire(cost)
            used: int | None = None  # the tokens the server counted, once it answered
            try:
                try:
                    replica = await self.router.acquire(avoid)
                except ReplicasDown as e:
                    noted.end(None, ErrorKind.DOWN)
                    raise BackendError(ErrorKind.DOWN, str(e), attempts=attempt) from None
                if trace is not None and len(self.urls) > 1:
                    trace.replica = replica.url
                answer, used = await self._send(replica, body, parse, attempt, cost, noted, stream)
                return answer
            except _Retry as r:
                last, retry_after, avoid = r.error, r.retry_after, replica
                if r.free and free:
                    free -= 1
                    continue
            finally:
                if self.tokens is not None:  # every way out settles the charge, cancellation included
                    self._settle(cost, used)
            if attempt >= attempts:
                last.attempts = attempts
                raise last
            attempt += 1
            self.retries += 1
            await self._sleep(self.backoff.delay(attempt - 1, retry_after))

    async def _send(
        self, replica: Replica, body: bytes, parse: Callable[[Any], T], attempt: int, cost: int, noted: Untraced, streamed: Streamed | None = None
    ) -> tuple[T, int | None]:
        """One attempt at `replica`: the parsed answer (and the tokens the reply says it used,
        when there is a token budget), a BackendError that ends the request, or _Retry; how it
        went is noted in `noted` (a Trace, or nothing)."""
        epoch, sent, load = replica.epoch, self._clock(), replica.in_flight
        tag = replica.limit.on_send() if replica.limit is not None else 0  # the adaptive limit's probe window
        stream = None if streamed is None else streamed(self._clock)
        try:
            endpoint = replica.endpoint if stream is None else self._stream_url(replica.endpoint)
            reply = await self.client.post(endpoint, body, self._headers, self._timeout, replica.index, stream)
        except ReplyTooLarge as e:
            status = e.reply.status
            if 200 <= status < 300:  # the same prompt gets as long a reply again: no retry
                noted.end(status, ErrorKind.REPLY_TOO_LARGE)
                self.router.release(replica, epoch, sent, status, load=load, tag=tag)
                raise BackendError(ErrorKind.REPLY_TOO_LARGE, e.message, status=status, attempts=attempt) from None
            # an error reply too large to read: its status decides, as any other error's
            noted.end(status, ErrorKind.HTTP)
            free = self.router.release(replica, epoch, sent, status, f"HTTP {status}: {e.message}", tag=tag)
            raise self._failed(e.reply, e.message, replica, attempt, free) from None
        except RequestFailed as e:
            noted.end(None, e.kind)
            no_reply = e.kind != ErrorKind.TIMEOUT
            free = self.router.release(replica, epoch, sent, NO_REPLY if no_reply else TIMED_OUT, e.message, tag=tag)
            if e.kind == ErrorKind.TLS:  # an untrusted certificate stays untrusted: no retry
                raise BackendError(ErrorKind.CONNECT, e.message, attempts=attempt) from None
            if no_reply and not free:  # one url: free if its server turns out to be down (replicas.py)
                free = await self.router.confirm_down(replica, epoch)
            elif self._clock() - sent > self.cfg.timeout + max(LATE, LATE * self.cfg.timeout):  # the timer fired late: the loop was starved
                free = True  # (not the server slow): sent again, not charged to it
            raise _Retry(BackendError(e.kind, e.message, attempts=attempt, retryable=True), free=free) from None
        except BaseException:  # cancelled: no outcome to learn from, but the slot is free again
            self.router.release_unused(replica, tag)
            raise
        status = reply.status
        if 200 <= status < 300:
            self.router.release(replica, epoch, sent, status, load=load, tag=tag)
            answer, usage = self._answer(reply, parse, stream, attempt, noted, sent)
            if self.tokens is None:
                return answer, None
            return answer, cost if usage is None else usage[0] + usage[1]
        noted.end(status, ErrorKind.HTTP)
        message = server_message(reply)
        free = self.router.release(replica, epoch, sent, status, f"HTTP {status}: {message}", tag=tag)
        raise self._failed(reply, message, replica, attempt, free)

    def _answer(self, reply: Reply, parse: Callable[[Any], T], stream: Stream | None, attempt: int, noted: Untraced, sent: float) -> tuple[T, Tokens | None]:
        """A 2xx reply's answer and reported tokens, noted (and its time in the profile); _Retry
        or a BackendError when it has none."""
        status = reply.status
        try:
            answer, usage = answer_of(reply, parse, stream, self.usage)
        except BadReply as e:
            noted.end(status, ErrorKind.BAD_REPLY)
            error = BackendError(ErrorKind.BAD_REPLY, e.message, status=status, attempts=attempt, retryable=e.again)
            raise (_Retry(error) if e.again else error) from None
        except BackendError as e:
            e.attempts = attempt
            noted.end(status, e.kind)
            raise
        timings = stream.timings(sent) if stream is not None and reply.streamed else None
        noted.end(status, "ok", usage, timings)
        tokens = usage[1] if usage is not None else stream.tokens() if stream is not None and timings else 0
        self.profile.add(sent, self._clock() - sent, tokens, *(timings or (None, None)))
        return cast(T, answer), usage

    def _stream_url(self, endpoint: URL) -> URL:
        """Where a streamed request goes (LightLLM: /generate_stream beside /generate)."""
        return endpoint

    def _failed(self, reply: Reply, message: str, replica: Replica, attempt: int, free: bool) -> _Retry | BackendError:
        """What a reply other than 2xx means: another attempt (408, 429, 5xx) or the end of the request.

        A Retry-After speaks for the server: with one url every request of the model waits it
        out (429s; a 503's only delays its own request); with several it holds that replica
        alone, and the request goes to another at once."""
        status, url = reply.status, replica.endpoint
        if 300 <= status < 400:  # a POST is never re-sent elsewhere behind the user's back
            where = one_line(reply.headers.get("location", ""), TEXT_CHARS)
            message = f"the server redirects to {where or 'another URL'}: put the URL it names in the plan ({message})"
        elif status in (404, 405):
            message = f"{message} — is the model's url right? ({self.url_hint()}; this request went to {url})"
        if status in RETRY_STATUSES or status >= 500:
            retry_after = parse_retry_after(reply.headers.get("retry-after"))
            if retry_after and len(self.urls) > 1 and status in REFUSALS:
                self.router.hold(replica, min(retry_after, MAX_RETRY_AFTER))
                self._say_hold(replica, status, retry_after, "no request goes to it")
                retry_after = None
            elif status == 429 and retry_after:
                self.bucket.hold(min(retry_after, MAX_RETRY_AFTER))
                self._say_hold(replica, status, retry_after, "every request of the model waits")
            elif retry_after:
                self._say_hold(replica, status, retry_after, "its request waits")
            return _Retry(BackendError(ErrorKind.HTTP, message, status=status, attempts=attempt, retryable=True), retry_after=retry_after, free=free)
        return BackendError(ErrorKind.HTTP, message, status=status, attempts=attempt)

    def _say_hold(self, replica: Replica, status: int, asked: float, who: str) -> None:
        """A Retry-After long enough to notice, said once per hold (not once per request it holds):
        what asked for it, how long is waited — at most MAX_RETRY_AFTER — and until when. A
        request sleeping it out otherwise shows only as a count that does not move."""
        wait = min(asked, MAX_RETRY_AFTER)
        until = time.time() + wait
        if self.on_hold is None or wait < HOLD_SAID or until < self._said_until + HOLD_SAID:
            return
        self._said_until = until
        capped = f" (it asked for {asked:,.0f} s; {MAX_RETRY_AFTER:g} s is the most evaltui waits)" if asked > MAX_RETRY_AFTER else ""
        at = datetime.fromtimestamp(until).strftime("%H:%M:%S")
        self.on_hold(f"{replica.url} answered HTTP {status} with Retry-After: {who} {wait:,.0f} s, until {at}{capped}")

    def _settle(self, cost: int, used: int | None) -> None:
        """An attempt's charge settled: by the tokens the server counted when it answered, given
        back when it generated nothing."""
        assert self.tokens is not None
        self.tokens.settle(cost, used or 0)
        self.tokens_used += used or 0

    async def _health(self, replica: Replica) -> str | None:
        """The health check of an ejected replica: None when the server answers anything but a
        5xx (a proxy that serves the model may 404 or 401 its health check: the server is
        there all the same), else what went wrong."""
        try:
            status = await self.client.get(replica.health, self._probe_headers, self._probe_timeout, replica.index)
        except RequestFailed as e:
            return f"{e.kind}: {e.message}"
        return None if status < 500 else f"{replica.health} answered HTTP {status}"

