"""A lean HTTP/1.1 keep-alive transport for httpx, for plain-http model servers.

Why not httpx's default transport: its connection pool (httpcore) rescans every connection for
every request, and at 64 connections that costs 4-10 ms of CPU per request — more than the
model server's own latency budget, and the difference between beating the N·L/C floor and
missing it by 5x. Local inference servers (LightLLM, vLLM, SGLang, TGI, llama.cpp) speak plain
HTTP/1.1 on a LAN, so this transport does exactly that with an idle-connection stack per origin,
one asyncio Protocol per connection and no per-request scans. https URLs keep httpx's own
transport (TLS, proxies), where the request rate is bounded by the remote API anyway.

It speaks Content-Length, chunked and read-until-close bodies, 1xx interim replies, HTTP/1.0
servers and `Connection: close`; a connection is reused only after a complete, keep-alive reply,
and any error or cancellation mid-request discards it, so a reused connection never carries a
stale half-reply.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import httpx

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024  # far above any model reply; bounds memory per connection


class _Conn(asyncio.Protocol):
    __slots__ = ("transport", "buf", "waiter", "closed", "exc", "deadline")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.exc: BaseException | None = None
        self.deadline: float | None = None  # loop time by which the whole reply must be in

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.exc = exc
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- reading
    async def _wait(self, read_timeout: float | None) -> None:
        """Wait for bytes or the peer closing; ReadTimeout after read_timeout s of silence or at the deadline."""
        loop = asyncio.get_running_loop()
        delay = read_timeout
        if self.deadline is not None:
            left = self.deadline - loop.time()
            if left <= 0:  # a server that never stops sending would otherwise win every race
                raise httpx.ReadTimeout("The whole reply did not arrive within the attempt timeout.")
            if delay is None or left < delay:
                delay = left
        self.waiter = w = loop.create_future()
        timer = loop.call_later(delay, _expire, w) if delay is not None else None
        try:
            await w
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    async def _more(self, read_timeout: float | None) -> None:
        if self.closed:
            if self.exc is not None:
                raise httpx.ReadError(f"Connection lost: {self.exc}.")
            raise httpx.RemoteProtocolError("Server disconnected without sending a complete response.")
        await self._wait(read_timeout)

    async def read_head(self, read_timeout: float | None) -> tuple[bytes, int]:
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                return head, end
            if len(self.buf) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("Response headers are too large.")
            await self._more(read_timeout)

    async def read_exact(self, n: int, read_timeout: float | None) -> bytes:
        while len(self.buf) < n:
            await self._more(read_timeout)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    async def read_line(self, read_timeout: float | None) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            if len(self.buf) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("Chunk header line is too long.")
            await self._more(read_timeout)

    async def read_to_close(self, read_timeout: float | None) -> bytes:
        while not self.closed:
            if len(self.buf) > _MAX_BODY:
                raise httpx.RemoteProtocolError("Response body is too large.")
            await self._wait(read_timeout)
        if self.exc is not None:  # a reset, not an orderly close: the body may be cut short
            raise httpx.ReadError(f"Connection lost while reading the response body: {self.exc}.")
        data = bytes(self.buf)
        self.buf.clear()
        return data

    async def read_chunked(self, read_timeout: float | None) -> bytes:
        body = bytearray()
        while True:
            line = await self.read_line(read_timeout)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"Malformed chunk size line {line[:40]!r}.") from None
            if size == 0:
                while await self.read_line(read_timeout):  # trailers, up to the empty line
                    pass
                return bytes(body)
            body += await self.read_exact(size, read_timeout)
            if len(body) > _MAX_BODY:
                raise httpx.RemoteProtocolError("Response body is too large.")
            if await self.read_exact(2, read_timeout) != b"\r\n":
                raise httpx.RemoteProtocolError("Malformed chunk terminator.")

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _expire(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_exception(httpx.ReadTimeout("Timed out waiting for the server's reply."))


ATTEMPT_TIMEOUT = "evaltui.attempt_timeout"
"""Request extension: seconds within which the whole attempt (connect, send, full reply) must end.

Only FastHTTPTransport reads it (see `honours_attempt_timeout`); it replaces a cancel scope around
each request, which costs more than the rest of this transport's bookkeeping together."""


def honours_attempt_timeout(transport: object) -> bool:
    return isinstance(transport, FastHTTPTransport)


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    lines = head.split(b"\r\n")
    try:
        version, status_s, *rest = lines[0].split(b" ", 2)
        status = int(status_s)
    except ValueError:
        raise httpx.RemoteProtocolError(f"Malformed status line {lines[0][:80]!r}.") from None
    if not version.startswith(b"HTTP/1."):
        raise httpx.RemoteProtocolError(f"Unsupported protocol {version[:20]!r}.")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"Malformed header line {line[:80]!r}.")
        headers.append((name.strip(), value.strip()))
    return version, status, rest[0] if rest else b"", headers


class FastHTTPTransport(httpx.AsyncBaseTransport):
    """httpx transport for http:// with at most `max_connections` open connections."""

    def __init__(self, max_connections: int = 100, keepalive_expiry: float = 30.0) -> None:
        self._max = max_connections
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], list[tuple[_Conn, float]]] = defaultdict(list)
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    def _checkout(self, origin: tuple[str, int]) -> _Conn | None:
        stack = self._idle.get(origin)
        now = time.monotonic()
        while stack:
            conn, since = stack.pop()
            if not conn.closed and not conn.buf and now - since < self._expiry:
                return conn
            conn.abort()
        return None

    async def _connect(self, origin: tuple[str, int], timeout: float | None) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Conn, origin[0], origin[1]), timeout)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"Timed out connecting to {origin[0]}:{origin[1]}.") from None
        except OSError as e:
            raise httpx.ConnectError(f"Cannot connect to {origin[0]}:{origin[1]}: {e.strerror or e}.") from None
        return conn

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("transport is closed")
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"FastHTTPTransport serves http:// only, not {url.scheme}://")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max)
        timeouts = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        origin = (url.host, url.port or 80)
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            # httpx framed nothing: a streamed body of unknown length goes out as one chunk.
            body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
        head = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), url.raw_path)]
        head += [k + b": " + v for k, v in request.headers.raw]
        wire = b"\r\n".join(head) + b"\r\n\r\n" + body

        attempt_timeout = request.extensions.get(ATTEMPT_TIMEOUT)
        connect_timeout = timeouts.get("connect")
        deadline = None
        if attempt_timeout is not None:
            deadline = asyncio.get_running_loop().time() + attempt_timeout
            connect_timeout = attempt_timeout if connect_timeout is None else min(attempt_timeout, connect_timeout)

        async with self._slots:
            conn = self._checkout(origin) or await self._connect(origin, connect_timeout)
            conn.deadline = deadline
            try:
                assert conn.transport is not None
                conn.transport.write(wire)
                while True:
                    head_bytes, _ = await conn.read_head(read_timeout)
                    version, status, reason, headers = _parse_head(head_bytes)
                    if status >= 200 or status == 101:
                        break  # 1xx interim replies (100 Continue) precede the real one
                keep_alive = version == b"HTTP/1.1"
                length: int | None = None
                chunked = False
                for name, value in headers:
                    lname = name.lower()
                    if lname == b"content-length":
                        try:
                            length = int(value)
                        except ValueError:
                            raise httpx.RemoteProtocolError(f"Malformed Content-Length {value!r}.") from None
                    elif lname == b"transfer-encoding":
                        chunked = b"chunked" in value.lower()
                    elif lname == b"connection":
                        v = value.lower()
                        keep_alive = b"keep-alive" in v if version != b"HTTP/1.1" else b"close" not in v
                if request.method == "HEAD" or status in (204, 304):
                    data = b""
                elif chunked:
                    data = await conn.read_chunked(read_timeout)
                elif length is not None:
                    if length > _MAX_BODY:
                        raise httpx.RemoteProtocolError("Response body is too large.")
                    data = await conn.read_exact(length, read_timeout)
                else:
                    data = await conn.read_to_close(read_timeout)
                    keep_alive = False
            except BaseException:
                conn.abort()
                raise
            if keep_alive and not conn.closed and not conn.buf and not self._closed:
                self._idle[origin].append((conn, time.monotonic()))
            else:
                conn.abort()
        response = httpx.Response(
            status, headers=headers, stream=httpx.ByteStream(data), extensions={"http_version": version, "reason_phrase": reason}
        )
        if not any(name.lower() == b"content-encoding" for name, _ in headers):
            # The body is already whole and needs no decoding, so it is handed over as read;
            # httpx's decode pipeline would cost more per reply than this entire transport.
            # (Encoded bodies, e.g. gzip, are left to httpx to decode when read.)
            response._content = data
        return response

    async def aclose(self) -> None:
        self._closed = True
        for stack in self._idle.values():
            for conn, _ in stack:
                conn.abort()
        self._idle.clear()
