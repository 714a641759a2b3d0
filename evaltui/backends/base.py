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
from evaltui.backends.client import ModelClient, Reply, ReplyTooLarge, RequestFailed, one_line
from evaltui.redaction import redact

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


#: Characters of a server's text kept in a failure message: its JSON error message, or its raw text.
MESSAGE_CHARS, TEXT_CHARS, SNIPPET_CHARS = 1000, 500, 200


def server_message(reply: Reply) -> str:
    """The server's own words about an error: OpenAI's error.message, LightLLM's message, or the
    text — on one line, shortened (the secrets in it are masked when the failure leaves `_post`)."""
    try:
        data = fastjson.loads(reply.body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return one_line(str(err["message"]), MESSAGE_CHARS)
        for key in ("message", "detail", "error"):
            if isinstance(data.get(key), str) and data[key]:
                return one_line(data[key], MESSAGE_CHARS)
    text = one_line(reply.body[: 4 * TEXT_CHARS + 4096].decode("utf-8", "replace"), TEXT_CHARS)
    return text or reply.reason or f"HTTP {reply.status}"


EVENT_STREAM = (
    "the server sent an event stream (text/event-stream), not one JSON reply: evaltui asks for whole replies; "
    "turn streaming off in the server (or the proxy in front of it)"
)


def reply_json(body: bytes) -> Any:
    """The reply's JSON. A body that is not valid UTF-8 (a server that cut a character in two) is
    read with each bad byte as U+FFFD: the answer loses a character, not the whole sample."""
    try:
        return fastjson.loads(body)
    except ValueError:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return fastjson.loads(body.decode("utf-8", "replace"))
        raise


def is_event_stream(reply: Reply) -> bool:
    return reply.headers.get("content-type", "").startswith("text/event-stream") or reply.body.startswith(b"data:")


def unparseable(reply: Reply, error: Exception) -> str:
    """What came instead of the protocol's JSON, shortened; an HTML page said as such."""
    snippet = one_line(reply.body[: 4 * SNIPPET_CHARS + 4096].decode("utf-8", "replace"), SNIPPET_CHARS)
    if "html" in reply.headers.get("content-type", "") or snippet.startswith("<"):
        return f"the server answered with an HTML page, not JSON (is the model's url its API?): {snippet!r}"
    return f"unparseable reply ({one_line(str(error), SNIPPET_CHARS)}): {snippet!r}"


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
        #: What this backend sends that a server may echo back (masked in any form, whole or in part,
        #: in its failures; the engine masks its own failure messages with the same).
        self.secrets = tuple(s for s in (api_key, *cfg.secret_header_values()) if s)
        self._timeout = aiohttp.ClientTimeout(total=cfg.timeout)  # the whole attempt: connect, send, whole reply

    @abstractmethod
    async def generate(self, prompt: str, system: str = "") -> str:
        """The model's answer to one prompt (a BackendError when it fails for good)."""

    async def ppl(self, text: str) -> float:
        raise BackendError("config", f"type {self.cfg.type!r} cannot compute perplexity")

    async def _post(self, url: URL, payload: dict[str, Any], parse: Callable[[Any], T]) -> T:
        """POST `payload` until `parse` accepts a reply, at most retry+1 attempts; else BackendError,
        its message masked here, once (each piece of it was cut short where it was made)."""
        try:
            return await self._attempts(url, fastjson.dumps(payload), parse)
        except BackendError as e:
            e.message = redact(e.message, self.secrets)
            raise

    async def _attempts(self, url: URL, body: bytes, parse: Callable[[Any], T]) -> T:
        attempts = self.cfg.retry + 1
        last: BackendError | None = None
        retry_after: float | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self.retries += 1
                await self._sleep(self.backoff.delay(attempt - 1, retry_after))
            await self.bucket.acquire(held=retry_after is None)
            retry_after = None
            try:
                reply = await self.client.post(url, body, self._headers, self._timeout)
                message = None
            except ReplyTooLarge as e:
                if 200 <= e.reply.status < 300:  # the same question gets as long an answer again
                    raise BackendError("reply-too-large", e.message, status=e.reply.status, attempts=attempt) from None
                reply, message = e.reply, e.message  # an error reply too large to read: its status decides
            except RequestFailed as e:
                if e.kind == "tls":  # an untrusted certificate stays untrusted: no retry
                    raise BackendError("connect", e.message, attempts=attempt) from None
                last = BackendError(e.kind, e.message, attempts=attempt, retryable=True)
                continue
            if 200 <= reply.status < 300:
                try:
                    return parse(reply_json(reply.body))
                except (ValueError, Unparseable, KeyError, IndexError, TypeError) as e:
                    if is_event_stream(reply):  # it streams whatever it is asked: another try streams again
                        raise BackendError("bad-reply", EVENT_STREAM, status=reply.status, attempts=attempt) from None
                    last = BackendError("bad-reply", unparseable(reply, e), status=reply.status, attempts=attempt, retryable=True)
                    continue
                except BackendError as e:
                    e.attempts = attempt
                    raise
            last = self._http_error(reply, message or server_message(reply), url, attempt)
            if not last.retryable:
                raise last
            retry_after = parse_retry_after(reply.headers.get("retry-after"))
            if reply.status == 429 and retry_after:
                self.bucket.hold(min(retry_after, MAX_RETRY_AFTER))
        assert last is not None
        last.attempts = attempts
        raise last

    def _http_error(self, reply: Reply, message: str, url: URL, attempt: int) -> BackendError:
        """The failure a non-2xx reply is, said so a user can act on it; retryable for 408, 429, 5xx."""
        status = reply.status
        if 300 <= status < 400:  # a POST is never re-sent elsewhere behind the user's back
            where = one_line(reply.headers.get("location", ""), TEXT_CHARS)
            message = f"the server redirects to {where or 'another URL'}: put the URL it names in the plan ({message})"
        elif status in (404, 405):
            message = f"{message} — is the model's url right? ({URL_HINT}; this request went to {url})"
        retryable = status in RETRY_STATUSES or status >= 500
        return BackendError("http", message, status=status, attempts=attempt, retryable=retryable)


def ppl_from_logprobs(logprobs: list[float]) -> float:
    """Mean negative log-likelihood, OpenCompass's ce_loss: -sum(lp)/len(lp); 0.0 for no tokens."""
    return -sum(logprobs) / len(logprobs) if logprobs else 0.0
