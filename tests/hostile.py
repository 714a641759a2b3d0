"""A hostile model server on 127.0.0.1 for tests: aiohttp in a thread of its own, one handler per path.

Each test names what its server does per path (trickle a byte at a time, answer HTML, stream
100,000 events, redirect elsewhere, send 50 MB…); the server counts the requests per path, so a
test can tell a retried request from one that was not, and a followed redirect from one that
was not. `tls=` serves the same paths over https with the given context.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class LoopbackServer:
    def __init__(self, routes: dict[str, Handler], *, tls: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.tls = tls
        self.requests: Counter[str] = Counter()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        handler = self.routes.get(request.path)
        self.requests[request.path] += 1
        if handler is None:
            return web.Response(status=404, text=f"no route {request.path}")
        await request.read()
        try:
            return await handler(request)
        except (ConnectionError, asyncio.CancelledError):  # the client hung up: what many of these tests want
            raise web.HTTPRequestTimeout() from None  # aiohttp drops it; the connection is gone anyway

    async def _start(self) -> None:
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):  # a handler still writing to a client that has gone
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def stream(request: web.Request, pieces: Iterator[bytes], *, length: int | None = None, pause: float = 0.0,
                 content_type: str = "application/json", encoding: str | None = None) -> web.StreamResponse:
    """Send `pieces` one write each (chunked unless `length`), `pause` seconds apart, until the
    client stops reading or hangs up."""
    resp = web.StreamResponse(headers={"Content-Type": content_type})
    if length is not None:
        resp.content_length = length
    if encoding is not None:
        resp.headers["Content-Encoding"] = encoding
    await resp.prepare(request)
    with contextlib.suppress(ConnectionError, RuntimeError):  # RuntimeError: aiohttp's "transport is closing"
        for piece in pieces:
            await resp.write(piece)
            if pause:
                await asyncio.sleep(pause)
        await resp.write_eof()
    return resp


class RawServer:
    """A server on 127.0.0.1 that answers every request with the bytes `reply(request)` returns,
    verbatim, keeping the connection open for the next: for replies no HTTP library would send
    (a Content-Length shorter than the body). Each connection's thread ends when the client
    hangs up or after `idle` seconds without a request."""

    def __init__(self, reply: Callable[[bytes], bytes], *, idle: float = 5.0) -> None:
        import socket

        self.reply = reply
        self.idle = idle
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: Any) -> None:
        conn.settimeout(self.idle)
        buffered = b""
        with conn, contextlib.suppress(OSError):
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buffered:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    buffered += piece
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                while len(buffered) < length:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    buffered += piece
                request, buffered = head + b"\r\n\r\n" + buffered[:length], buffered[length:]
                self.requests += 1
                conn.sendall(self.reply(request))

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
