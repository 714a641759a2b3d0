"""A small HTTP/1.1 server protocol on raw asyncio transports.

The simulator must never be the bottleneck of the project's benchmarks, so
this avoids per-request coroutines and tasks altogether: requests are parsed
in `data_received`, answered synchronously when there is no latency, and
otherwise finished from a `loop.call_later` timer. Pipelined requests on one
connection are answered strictly in order; replies produced in one read are
written with one syscall.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Callable, Protocol

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
#: Stop reading from a client that keeps sending while its request waits.
READ_PAUSE = 1024 * 1024

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\nServer: evaltui-sim\r\n".encode("latin-1")


_STATUS_LINES: dict[int, bytes] = {s.value: _status_line(s.value) for s in HTTPStatus}


class HTTPError(Exception):
    """A request we cannot parse; answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    __slots__ = ("method", "target", "path", "query", "version", "headers", "body", "keep_alive")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str],
                 body: bytes, keep_alive: bool) -> None:
        self.method = method
        self.target = target
        path, _, query = target.partition("?")
        self.path = path
        self.query = query
        self.version = version
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive

    def __repr__(self) -> str:
        return f"Request({self.method} {self.target}, {len(self.body)} bytes)"


class Reply:
    """One response; `drop` means abort the connection instead of answering."""

    __slots__ = ("status", "body", "content_type", "headers", "close", "drop")

    def __init__(self, status: int = 200, body: bytes = b"", content_type: str | None = None,
                 headers: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
                 close: bool = False, drop: bool = False) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers
        self.close = close
        self.drop = drop

    def serialize(self, close: bool) -> bytes:
        head = _STATUS_LINES.get(self.status) or _status_line(self.status)
        parts = [head, b"Content-Length: %d\r\n" % len(self.body)]
        if self.content_type:
            parts.append(b"Content-Type: " + self.content_type.encode("latin-1") + b"\r\n")
        for name, value in self.headers:
            parts.append(f"{name}: {value}\r\n".encode("latin-1"))
        if close:
            parts.append(b"Connection: close\r\n")
        parts.append(b"\r\n")
        parts.append(self.body)
        return b"".join(parts)


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
    def handle(self, request: Request, conn: "HTTPConnection") -> Reply | None:
        """Return a Reply now, or None and call `conn.respond` later."""

    def error(self, status: int, message: str) -> Reply:
        """The reply for a request that could not be parsed."""


class RequestParser:
    """Incremental parser; keeps partial state between reads of one connection."""

    __slots__ = ("_head", "_length", "_chunks", "_chunk_total", "_trailers", "expect_continue")

    def __init__(self) -> None:
        self._head: tuple[str, str, str, dict[str, str], bool] | None = None
        self._length = 0
        self._chunks: list[bytes] | None = None
        self._chunk_total = 0
        self._trailers = False
        self.expect_continue = False

    def parse(self, buf: bytearray) -> Request | None:
        """Consume one complete request from `buf`, or return None if it is incomplete."""
        if self._head is None:
            if not self._parse_head(buf):
                return None
        method, target, version, headers, keep_alive = self._head  # type: ignore[misc]
        if self._chunks is None:
            n = self._length
            if len(buf) < n:
                return None
            body = bytes(buf[:n])
            del buf[:n]
        else:
            if not self._parse_chunks(buf):
                return None
            body = b"".join(self._chunks)
        self._head = None
        self._chunks = None
        self.expect_continue = False
        return Request(method, target, version, headers, body, keep_alive)

    def _parse_head(self, buf: bytearray) -> bool:
        while buf.startswith(b"\r\n"):  # stray CRLF after a previous body is allowed
            del buf[:2]
        end = buf.find(b"\r\n\r\n")
        if end < 0 or end > MAX_HEAD:
            if len(buf) > MAX_HEAD:
                raise HTTPError(431, "request header fields too large")
            return False
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        del buf[:end + 4]
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
            raise HTTPError(400, f"malformed request line: {lines[0][:100]!r}")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise HTTPError(505, f"unsupported HTTP version {version[:20]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HTTPError(400, f"malformed header line: {line[:100]!r}")
            name = name.lower()
            value = value.strip()
            if name in headers:
                if name == "content-length" and headers[name] != value:
                    raise HTTPError(400, "conflicting Content-Length headers")
                if name != "content-length":
                    value = headers[name] + ", " + value
            headers[name] = value
        tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
        keep_alive = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
        te = headers.get("transfer-encoding")
        if te is not None:
            if te.lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise HTTPError(501, f"unsupported Transfer-Encoding {te[:50]!r}")
            self._chunks = []
            self._chunk_total = 0
            self._trailers = False
        else:
            cl = headers.get("content-length", "0").strip() or "0"
            if not cl.isdigit():
                raise HTTPError(400, f"invalid Content-Length {cl[:30]!r}")
            self._length = int(cl)
            if self._length > MAX_BODY:
                raise HTTPError(413, f"request body too large: {self._length} bytes > {MAX_BODY}")
        self.expect_continue = headers.get("expect", "").lower() == "100-continue"
        self._head = (method.upper(), target, version, headers, keep_alive)
        return True

    def _parse_chunks(self, buf: bytearray) -> bool:
        chunks = self._chunks
        assert chunks is not None
        while True:
            i = buf.find(b"\r\n")
            if i < 0:
                if len(buf) > MAX_HEAD:
                    raise HTTPError(400, "chunk size line too long")
                return False
            if self._trailers:
                del buf[:i + 2]
                if i == 0:
                    return True
                continue
            size_text = bytes(buf[:i]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HTTPError(400, f"invalid chunk size {size_text[:20]!r}") from None
            if size_text.startswith((b"-", b"+", b"0x", b"0X")):
                raise HTTPError(400, f"invalid chunk size {size_text[:20]!r}")
            if size == 0:
                del buf[:i + 2]
                self._trailers = True
                continue
            need = i + 2 + size + 2
            if len(buf) < need:
                if self._chunk_total + size > MAX_BODY:
                    raise HTTPError(413, "request body too large")
                return False
            if buf[need - 2:need] != b"\r\n":
                raise HTTPError(400, "chunk data not followed by CRLF")
            chunks.append(bytes(buf[i + 2:i + 2 + size]))
            self._chunk_total += size
            if self._chunk_total > MAX_BODY:
                raise HTTPError(413, "request body too large")
            del buf[:need]


class HTTPConnection(asyncio.Protocol):
    """One client connection: keep-alive, pipelining in order, Connection: close."""

    def __init__(self, handler: Handler, registry: set["HTTPConnection"]) -> None:
        self._handler = handler
        self._registry = registry
        self._parser = RequestParser()
        self._buf = bytearray()
        self._out: list[bytes] = []
        self._busy = False
        self._closed = False
        self._read_paused = False
        self._write_paused = False
        self._current: Request | None = None
        self.transport: asyncio.Transport | None = None
        #: Set by a handler that answers later; called if the client goes away first.
        self.on_lost: Callable[[], None] | None = None

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._registry.add(self)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._busy or self._write_paused:
            if len(self._buf) > READ_PAUSE and not self._read_paused:
                self._read_paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]
            return
        self._process()

    def eof_received(self) -> bool | None:
        # HTTP clients do not half-close: EOF means the client is gone. A reply
        # still waiting on a timer is abandoned (connection_lost tells the
        # handler); requests already answered have their replies flushed.
        if not self._busy:
            self.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._registry.discard(self)
        cb, self.on_lost = self.on_lost, None
        if cb is not None and self._busy:
            cb()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._busy and not self._closed:
            self._process()

    # used by the handler

    def respond(self, reply: Reply) -> None:
        """Finish the request in progress from a timer; then serve pipelined ones."""
        self.on_lost = None
        if self._closed:
            return
        self._send(reply)
        if not self._closed:
            self._process()
        self._flush()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._flush()
            self.transport.close()  # type: ignore[union-attr]

    def abort(self) -> None:
        if self.transport is not None:
            self._closed = True
            self.transport.abort()

    # internals

    def _process(self) -> None:
        parser = self._parser
        while not self._busy and not self._closed and not self._write_paused:
            try:
                request = parser.parse(self._buf)
            except HTTPError as exc:
                self._current = None
                self._send(self._handler.error(exc.status, exc.message), force_close=True)
                break
            if request is None:
                if parser.expect_continue:
                    parser.expect_continue = False
                    self._out.append(_CONTINUE)
                if self._read_paused:
                    self._read_paused = False
                    self.transport.resume_reading()  # type: ignore[union-attr]
                break
            self._busy = True
            self._current = request
            reply = self._handler.handle(request, self)
            if reply is not None:
                self._send(reply)
        self._flush()

    def _send(self, reply: Reply, force_close: bool = False) -> None:
        request = self._current
        self._busy = False
        self._current = None
        if reply.drop:
            self._flush()
            self.abort()
            return
        close = force_close or reply.close or request is None or not request.keep_alive
        self._out.append(reply.serialize(close))
        if close:
            self.close()

    def _flush(self) -> None:
        if self._out and self.transport is not None and not self.transport.is_closing():
            out = self._out
            self._out = []
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        else:
            self._out.clear()
