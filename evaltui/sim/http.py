"""The simulator's HTTP face: aiohttp's server in front of the request handler (SimApp).

aiohttp parses requests (keep-alive, pipelining, chunked bodies, `Expect: 100-continue`,
malformed requests), so the simulator only decides what to answer and when. Measured with
`bench/sim_rps.py` it still serves well over the 5,000 req/s per core the benchmarks need
(bench/RESULTS.md, "Simulator").

A reply may wait (`delay`, the model's latency): the request's own task sleeps, and if the client
leaves first aiohttp cancels that task (`handler_cancellation`), so the request is settled in the
stats at once rather than when its latency would have run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

#: The largest request body accepted (aiohttp's default is 1 MB; long prompts exceed it).
MAX_BODY = 64 * 1024 * 1024
SERVER = "evaltui-sim"


class Request:
    """What the handler needs of a request: method, path, query string and the whole body."""

    __slots__ = ("method", "path", "query", "body")

    def __init__(self, method: str, path: str, query: str, body: bytes) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.body = body

    def __repr__(self) -> str:
        return f"Request({self.method} {self.path}, {len(self.body)} bytes)"


class Reply:
    """One response. `drop` aborts the connection instead; `delay` s pass before it is sent, and
    `settle` is called once when it is sent (`settle(True)`) or its client has gone, or the
    server stopped, first (`settle(False)`). `events`: a streamed reply's server-sent events
    (each `data: …` and its blank line), sent `gap` s apart, the first after `delay`."""

    __slots__ = ("status", "body", "content_type", "headers", "drop", "delay", "settle", "events", "gap")

    def __init__(self, status: int = 200, body: bytes = b"", content_type: str | None = None,
                 headers: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
                 drop: bool = False) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers
        self.drop = drop
        self.delay = 0.0
        self.settle: Callable[[bool], None] | None = None
        self.events: list[bytes] | None = None
        self.gap = 0.0


def event_stream(events: list[bytes]) -> Reply:
    """A streamed reply of these events' data (each framed `data: …` and a blank line)."""
    reply = Reply(200, b"", "text/event-stream")
    reply.events = [b"data: " + data + b"\n\n" for data in events]
    return reply


async def _send_events(request: web.Request, reply: Reply, headers: list[tuple[str, str]]) -> web.StreamResponse:
    resp = web.StreamResponse(status=reply.status, headers=[*headers, ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
    await resp.prepare(request)
    for k, event in enumerate(reply.events or ()):
        if k and reply.gap:
            await asyncio.sleep(reply.gap)
        await resp.write(event)
    await resp.write_eof()
    return resp


def error_body(status: int, message: str, type_: str | None = None) -> bytes:
    """OpenAI-style error object, the one shape every error reply uses."""
    if type_ is None:
        type_ = {
            400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 408: "timeout_error", 413: "invalid_request_error",
            422: "invalid_request_error", 429: "rate_limit_error",
        }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": type_, "code": status}}).encode()


class Handler(Protocol):
    def handle(self, request: Request) -> Reply:
        """The reply to one parsed request (its `delay` is waited here, not by the handler)."""


class _Untyped(web.Response):
    """A reply sent without Content-Type, as some servers do: aiohttp adds one, `_strip` removes it."""


async def _strip_content_type(request: web.Request, response: web.StreamResponse) -> None:
    if isinstance(response, _Untyped):
        response.headers.popall("Content-Type", None)


def make_app(handler: Handler, at_once: int = 0) -> web.Application:
    """One catch-all route: the handler routes by itself (model-name prefixes, suffix matching).
    `at_once` > 0: replies that wait (model requests) wait out their latency `at_once` at a
    time, the rest in line (asyncio's semaphore hands its slots on in arrival order)."""
    slots = asyncio.Semaphore(at_once) if at_once else contextlib.nullcontext()

    async def serve(request: web.Request) -> web.StreamResponse:
        reply = handler.handle(Request(request.method, request.path, request.query_string, await request.read()))
        if reply.settle is not None:
            try:
                async with slots:
                    await asyncio.sleep(reply.delay)
            except asyncio.CancelledError:  # the client left, or the server stopped: nothing is sent
                reply.settle(False)
                raise
            reply.settle(True)
        if reply.drop:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError  # nothing more to write: end this request's task
        headers = [("Server", SERVER), *reply.headers]
        if reply.events is not None:
            return await _send_events(request, reply, headers)
        if reply.content_type is None:
            return _Untyped(status=reply.status, body=reply.body, headers=headers)
        return web.Response(status=reply.status, body=reply.body, headers=headers, content_type=reply.content_type)

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{path:.*}", serve)
    app.on_response_prepare.append(_strip_content_type)
    return app
