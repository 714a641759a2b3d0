"""What every backend shares: the retry policy, the token bucket and error classes.

The reference client retried some failures forever, dropped others on the floor, and let the
rate limit be bypassed under concurrency. Here a single loop, `Backend._post`, owns every
attempt: each one waits for a token, has its own timeout, is classified (retry or fail now),
and the loop is bounded by `retry` on every path.
"""

from __future__ import annotations

import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import aiohttp
import anyio
from yarl import URL

from evaltui import fastjson
from evaltui.backends.client import ModelClient, Reply, RequestFailed
from evaltui.backends.trace import NO_TRACE, Trace
from evaltui.redaction import REDACTED

if TYPE_CHECKING:
    from evaltui.plan import ModelConfig

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 429})
URL_HINT = "type lightllm wants the full /generate URL, the other types the base URL, e.g. http://host:8000/v1"
MAX_BACKOFF = 60.0
MAX_RETRY_AFTER = 300.0


class BackendError(Exception):
    """A request that failed for good. `kind` is the error class a user sees in the failures list."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.retryable = retryable

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "status": self.status, "message": self.message, "attempts": self.attempts}

    def __str__(self) -> str:
        code = f" {self.status}" if self.status is not None else ""
        return f"{self.kind}{code}: {self.message}"


class Unparseable(Exception):
    """The reply came back but is not what the protocol promises; retried like a 5xx."""


class TokenBucket:
    """`rate` requests per second shared by every caller: one token every 1/rate s, no burst.

    Each caller reserves its slot before it sleeps, and reservation has no await in it, so any
    number of concurrent callers together never exceed the rate. The clock and sleep are
    injectable so tests can check the schedule without waiting for it.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.rate = rate
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None  # when the next token is free
        self._held_until = 0.0  # a server's Retry-After: no caller goes before then

    def hold(self, seconds: float) -> None:
        """A 429 with Retry-After speaks for the server, not for one request: every caller waits."""
        self._held_until = max(self._held_until, self._clock() + seconds)

    async def acquire(self, *, held: bool = True) -> None:
        """`held=False` for the request that already slept out the Retry-After it was given."""
        now = self._clock()
        at = max(now, self._held_until) if held else now
        if self.interval != 0.0:
            at = at if self._next is None else max(self._next, at)
            self._next = at + self.interval
        if at > now:
            await self._sleep(at - now)


@dataclass
class Backoff:
    """Exponential backoff with jitter: attempt k waits base·2^(k-1) · U(0.5, 1], at most `cap`."""

    base: float = 1.0
    cap: float = MAX_BACKOFF
    rng: random.Random | None = None

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        rng = self.rng or random
        d: float = min(self.cap, self.base * 2 ** (retry_number - 1)) * (0.5 + 0.5 * rng.random())
        if retry_after is not None:
            d = max(d, min(retry_after, MAX_RETRY_AFTER))
        return d


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def masked(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by [redacted]; done before a reply's text is shortened,
    so a key the cut falls inside does not leave its first characters behind."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def server_message(reply: Reply, secrets: tuple[str, ...] = ()) -> str:
    """The server's own words about an error: OpenAI's error.message, LightLLM's message, or the
    text (shortened, with `secrets` masked first: servers and proxies echo requests back)."""
    text = reply.body.decode("utf-8", "replace")
    try:
        data = fastjson.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return masked(str(err["message"]), secrets)
        for key in ("message", "detail", "error"):
            if isinstance(data.get(key), str) and data[key]:
                return masked(data[key], secrets)
    text = " ".join(masked(text, secrets).split())
    return text[:500] if text else (reply.reason or f"HTTP {reply.status}")


class Backend(ABC):
    """One model behind HTTP. Subclasses build payloads and read replies; this class sends them."""

    #: Whether `ppl` works: the protocol gives the prompt's log-probabilities. The plan asks it
    #: of every model a ppl-mode dataset is sent to.
    computes_ppl: ClassVar[bool] = False

    def __init__(
        self,
        cfg: ModelConfig,
        client: ModelClient,
        *,
        api_key: str | None = None,
        url: str | None = None,
        backoff: Backoff | None = None,
        bucket: TokenBucket | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.cfg = cfg
        self.client = client
        self.url = url or cfg.url
        self.backoff = backoff or Backoff(base=cfg.backoff)
        self.bucket = bucket or TokenBucket(cfg.rate_per_worker)
        self._sleep = sleep
        self.retries = 0  # attempts beyond each request's first, for the engine's load report
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update({k.lower(): v for k, v in cfg.headers.items()})  # one of each, whatever the case
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        # what this backend sends that a server may echo back (longest first: none half-masked)
        sent = [s for s in (api_key, *cfg.secret_header_values()) if s]
        self._secrets = tuple(sorted({f for s in sent for f in (s, s.strip()) if f}, key=len, reverse=True))
        self._timeout = aiohttp.ClientTimeout(total=cfg.timeout)  # the whole attempt: connect, send, whole reply

    @abstractmethod
    async def generate(self, prompt: str, system: str = "", *, epoch: int = 0, trace: Trace | None = None) -> str:
        """The model's answer to one prompt (a BackendError when it fails for good).

        `epoch` ≥ 1 (a dataset run for several epochs): the request of that epoch, with the
        seed varied where the protocol takes one (see `epoch_seed`); epoch 0 is the request a
        one-epoch run sends. `trace`: where every attempt and the reported tokens go."""

    async def ppl(self, text: str, *, trace: Trace | None = None) -> float:
        raise BackendError("config", f"type {self.cfg.type!r} cannot compute perplexity")

    def usage(self, data: Any) -> tuple[int, int] | None:
        """The (prompt, completion) tokens a reply reports, None when it reports none."""
        return None

    async def _post(self, url: URL, payload: dict[str, Any], parse: Callable[[Any], T], trace: Trace | None = None) -> T:
        """POST `payload` until `parse` accepts a reply, at most retry+1 attempts; else BackendError.

        With a `trace`, every attempt is noted in it, and one is not sent once its token budget is spent."""
        noted = NO_TRACE if trace is None else trace
        body = fastjson.dumps(payload)
        attempts = self.cfg.retry + 1
        last: BackendError | None = None
        retry_after: float | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self.retries += 1
                await self._sleep(self.backoff.delay(attempt - 1, retry_after))
            await self.bucket.acquire(held=retry_after is None)
            retry_after = None
            refusal = noted.start()
            if refusal is not None:
                raise BackendError("token-limit", refusal, attempts=attempt - 1)
            try:
                reply = await self.client.post(url, body, self._headers, self._timeout)
            except RequestFailed as e:
                noted.end(None, e.kind)
                if e.kind == "tls":  # an untrusted certificate stays untrusted: no retry
                    raise BackendError("connect", e.message, attempts=attempt) from None
                last = BackendError(e.kind, e.message, attempts=attempt, retryable=True)
                continue
            status = reply.status
            if 200 <= status < 300:
                try:
                    data = fastjson.loads(reply.body)
                    result = parse(data)
                except (ValueError, Unparseable, KeyError, IndexError, TypeError) as e:
                    snippet = " ".join(masked(reply.body.decode("utf-8", "replace"), self._secrets).split())[:200]
                    last = BackendError("bad-reply", f"unparseable reply ({e}): {snippet!r}", status=status, attempts=attempt, retryable=True)
                    noted.end(status, last.kind)
                    continue
                except BackendError as e:
                    e.attempts = attempt
                    noted.end(status, e.kind)
                    raise
                noted.end(status, "ok", self.usage(data) if trace is not None else None)
                return result
            noted.end(status, "http")
            message = server_message(reply, self._secrets)
            if 300 <= status < 400:  # a POST is never re-sent elsewhere behind the user's back
                where = reply.headers.get("location", "")
                message = f"the server redirects to {where or 'another URL'}: put the URL it names in the plan ({message})"
            elif status in (404, 405):
                message = f"{message} — is the model's url right? ({URL_HINT}; this request went to {url})"
            if status in RETRY_STATUSES or status >= 500:
                retry_after = parse_retry_after(reply.headers.get("retry-after"))
                if status == 429 and retry_after:
                    self.bucket.hold(min(retry_after, MAX_RETRY_AFTER))
                last = BackendError("http", message, status=status, attempts=attempt, retryable=True)
                continue
            raise BackendError("http", message, status=status, attempts=attempt)
        assert last is not None
        last.attempts = attempts
        raise last


def count_tokens(value: Any) -> int:
    """A token count from a reply: a non-negative integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def epoch_seed(kwargs: dict[str, Any], epoch: int) -> int:
    """The seed of epoch ≥ 1: generation_kwargs' own `seed` (0 if none) plus the epoch, so each
    epoch samples differently and a re-run of the same epoch samples alike."""
    base = kwargs.get("seed", 0)
    return (base if isinstance(base, int) and not isinstance(base, bool) else 0) + epoch


def ppl_from_logprobs(logprobs: list[float]) -> float:
    """Mean negative log-likelihood, OpenCompass's ce_loss: -sum(lp)/len(lp); 0.0 for no tokens."""
    return -sum(logprobs) / len(logprobs) if logprobs else 0.0
