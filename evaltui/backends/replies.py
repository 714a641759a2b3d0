"""Reading a server's reply: its JSON, its own words about an error, what came instead of the
protocol's JSON, and the numbers a protocol reads from it (token counts, log-probabilities).

Every piece of a server's text is put on one line and cut short here, where it is read; the
backend masks the secrets in it once, as the failure leaves `Backend._post`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaltui import fastjson
from evaltui.backends.client import Reply
from evaltui.backends.sse import Stream, StreamUnparseable
from evaltui.text import one_line


class Unparseable(Exception):
    """The reply came back but is not what the protocol promises; retried like a 5xx."""



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


class BadReply(Exception):
    """A 2xx reply without the protocol's answer; `again`: another try may get one."""

    def __init__(self, message: str, *, again: bool) -> None:
        super().__init__(message)
        self.message, self.again = message, again


Tokens = tuple[int, int]  # (prompt, completion), as a reply reports them


def answer_of(reply: Reply, parse: Callable[[Any], Any], stream: Stream | None, usage: Callable[[Any], Tokens | None]) -> tuple[Any, Tokens | None]:
    """A 2xx reply's answer — parsed from its JSON, or the text its events streamed (`stream`) —
    and the (prompt, completion) tokens it reports; BadReply when it has none. A server that
    streams what was asked whole streams again on a retry: not worth one."""
    try:
        if reply.streamed:
            assert stream is not None
            return stream.answer(), stream.usage
        data = reply_json(reply.body)
        return parse(data), usage(data)
    except (ValueError, Unparseable, KeyError, IndexError, TypeError, StreamUnparseable) as e:
        if stream is None and is_event_stream(reply):
            raise BadReply(EVENT_STREAM, again=False) from None
        raise BadReply(str(e) if isinstance(e, StreamUnparseable) else unparseable(reply, e), again=True) from None


def is_event_stream(reply: Reply) -> bool:
    return reply.headers.get("content-type", "").startswith("text/event-stream") or reply.body.startswith(b"data:")


def unparseable(reply: Reply, error: Exception) -> str:
    """What came instead of the protocol's JSON, shortened; an HTML page said as such."""
    snippet = one_line(reply.body[: 4 * SNIPPET_CHARS + 4096].decode("utf-8", "replace"), SNIPPET_CHARS)
    if "html" in reply.headers.get("content-type", "") or snippet.startswith("<"):
        return f"the server answered with an HTML page, not JSON (is the model's url its API?): {snippet!r}"
    return f"unparseable reply ({one_line(str(error), SNIPPET_CHARS)}): {snippet!r}"



#: More tokens than one request can use (4 billion): a reply that says so reports no count.
MAX_REPORTED_TOKENS = 1 << 32


def count_tokens(value: Any) -> int:
    """A token count from a reply: a non-negative integer below MAX_REPORTED_TOKENS, else 0 (a
    5,000-digit `prompt_tokens` is no count, and must not fail the answer beside it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_REPORTED_TOKENS else 0



def ppl_from_logprobs(logprobs: list[float]) -> float:
    """Mean negative log-likelihood, OpenCompass's ce_loss: -sum(lp)/len(lp); 0.0 for no tokens."""
    return -sum(logprobs) / len(logprobs) if logprobs else 0.0
