"""Streamed replies (a model's `stream = true`): server-sent events read as they arrive, timed.

The events are parsed by httpx-sse's decoders (its incremental line splitter and event decoder:
the spec's `\\r`, `\\n` and `\\r\\n` line ends, comments, multi-line `data:`, an event split
across network pieces), fed with the pieces aiohttp hands over as they come; evaltui parses no
SSE itself. (httpx-sse's public API reads an httpx response; its decoders are the part that
does not care where the bytes come from.)

What a stream means is the protocol's (backends/openai.py, backends/lightllm.py): a `Stream`
per attempt takes each event's data and says which text it carries, the usage it reports, and
whether it is the last (and, kept apart, the thinking a reasoning model streams beside its
answer); what is timed here is the time of each piece of text. From those: the
time to the first token (sent → first text), the inter-token latency (the mean time between
tokens after the first) and the tokens, as the server counts them or as the events were.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Any

import aiohttp

from evaltui import fastjson

EVENT_STREAM = "text/event-stream"


class StreamUnparseable(Exception):
    """An event that is not what the protocol sends, or a stream that ended before its last
    event (a connection cut mid-answer): retried like an unparseable reply."""


class StreamTooLarge(Exception):
    """More than max_reply_bytes came: not read further."""


class Stream:
    """One attempt's events. Subclasses read the protocol's JSON (`take`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.parts: list[str] = []
        self.first: float | None = None  # when the first text came
        self.last = 0.0
        self.pieces = 0  # events that carried text
        self.usage: tuple[int, int] | None = None  # (prompt, completion) tokens, when reported
        self.done = False  # the last event came ([DONE], or the protocol's own end)
        self.finished = False  # an event said why the answer ended (finish_reason): enough when no [DONE] follows
        self.broken = ""  # why reading stopped before the end: an event that is not the protocol's
        # A reasoning model's thinking, streamed beside the answer (`delta.reasoning_content`):
        # kept apart from it, for the log; its events are tokens the server generated, timed as the answer's.
        self.thinking: list[str] = []
        self.thought = False  # the event `take` just read carried thinking

    def event(self, data: str, at: float) -> None:
        if self.done:
            return  # (a server that goes on after its last event: nothing of it is the answer)
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            obj = fastjson.loads(data)
        except ValueError:
            raise StreamUnparseable(f"an event is not JSON: {data[:200]!r}") from None
        text = self.take(obj)
        if text:
            self.parts.append(text)
        elif not self.thought:
            return
        self.thought = False
        self.pieces += 1
        if self.first is None:
            self.first = at
        self.last = at

    def take(self, obj: Any) -> str:
        """The text an event carries ("" for none), noting its usage and whether it ends the stream."""
        raise NotImplementedError

    def answer(self) -> str:
        if self.broken:
            raise StreamUnparseable(self.broken)
        if not (self.done or self.finished):
            raise StreamUnparseable(f"the stream ended before its last event ({self.pieces} pieces of text came)")
        return "".join(self.parts)

    def reasoning(self) -> str:
        """The thinking streamed beside the answer ("" for none)."""
        return "".join(self.thinking)

    def tokens(self) -> int:
        """The completion tokens: the server's count, else the events that carried text."""
        return self.usage[1] if self.usage is not None and self.usage[1] else self.pieces

    def timings(self, sent: float) -> tuple[float | None, float | None]:
        """(time to first token, inter-token latency) in seconds; None where there is no such time."""
        if self.first is None:
            return None, None
        n = self.tokens()
        return self.first - sent, (self.last - self.first) / (n - 1) if n > 1 else None


async def read_events(resp: aiohttp.ClientResponse, cap: int, stream: Stream) -> None:
    """Feed `resp`'s events to `stream` as they arrive, each with the time it came; at most `cap`
    bytes (StreamTooLarge past them). A body that is not valid UTF-8 reads each bad byte as U+FFFD.
    (httpx-sse, and the httpx it imports, are loaded here: only a streaming model pays for them.)"""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text = codecs.getincrementaldecoder("utf-8")("replace")
    lines, events = SSELineDecoder(), SSEDecoder()
    size = 0
    clock = stream.clock
    try:
        async for piece in resp.content.iter_any():
            size += len(piece)
            if size > cap:
                resp.close()
                raise StreamTooLarge(f"the stream is larger than max_reply_bytes ({cap:,}): more than {cap:,} bytes came, the rest was not read")
            at = clock()
            for line in lines.decode(text.decode(piece)):
                sse = events.decode(line)
                if sse is not None and sse.data:
                    stream.event(sse.data, at)
        rest = text.decode(b"", final=True)
        for line in [*(lines.decode(rest) if rest else []), *lines.flush(), ""]:  # the last event needs no blank line after it
            sse = events.decode(line)
            if sse is not None and sse.data:
                stream.event(sse.data, clock())
    except StreamUnparseable as e:  # the answer cannot be trusted: the rest is not read
        stream.broken = str(e)
        resp.close()


def is_event_stream(resp: aiohttp.ClientResponse) -> bool:
    return resp.headers.get("content-type", "").startswith(EVENT_STREAM)
