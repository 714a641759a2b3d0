"""FastHTTPTransport against a scripted raw TCP server on 127.0.0.1, through a real httpx.AsyncClient.

Each test starts its own tiny asyncio server whose handler writes exact bytes, so every framing
case (Content-Length, chunked, read-to-close, HTTP/1.0, 1xx) and every failure (close mid-body,
silence, refused port, cancellation) is produced on purpose rather than hoped for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import anyio
import httpx
import pytest

from evaltui.backends.transport import FastHTTPTransport

TEST_BUDGET = 10.0  # s; no test may hang the suite


@dataclass
class Req:
    conn: int  # which server-side connection it arrived on (0, 1, ...)
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


Handler = Callable[[Req, asyncio.StreamWriter, "Server"], Awaitable[Any]]


async def _read_request(reader: asyncio.StreamReader, conn: int) -> Req | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ")
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
    lower = {k.lower(): v for k, v in headers}
    body = b""
    if "chunked" in lower.get("transfer-encoding", "").lower():
        for _ in range(100_000):
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    continue  # trailers
                break
            body += await reader.readexactly(size)
            assert await reader.readexactly(2) == b"\r\n", "bad chunk terminator from the client"
    elif "content-length" in lower:
        body = await reader.readexactly(int(lower["content-length"]))
    return Req(conn, method, target, headers, body)


@dataclass
class Server:
    """Reads requests one after another on each connection and lets `handler` write the reply.

    The handler returns False to close the connection after its reply (without saying so).
    """

    handler: Handler
    requests: list[Req] = field(default_factory=list)
    connections: int = 0  # accepted so far
    open_now: int = 0
    max_open: int = 0
    closed: int = 0  # connections fully closed by the server side
    in_flight: int = 0
    max_in_flight: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> "Server":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        self._server.close()
        for w in self._writers:
            w.close()
        with anyio.move_on_after(2):  # let every connection handler finish rather than be cancelled
            for _ in range(400):
                if self.open_now == 0:
                    break
                await asyncio.sleep(0.005)
            await self._server.wait_closed()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.connections
        self.connections += 1
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        self._writers.append(writer)
        try:
            for _ in range(1000):
                req = await _read_request(reader, conn)
                if req is None:
                    break
                self.requests.append(req)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    keep = await self.handler(req, writer, self)
                    await writer.drain()
                finally:
                    self.in_flight -= 1
                if keep is False:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            return  # the client went away: this connection is done
        finally:
            self.open_now -= 1
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            self.closed += 1

    async def wait_for(self, predicate: Callable[[], bool], limit: float = 3.0) -> None:
        """Poll until predicate() holds; bounded in count and time."""
        with anyio.fail_after(limit):
            for _ in range(int(limit / 0.005) + 1):
                if predicate():
                    return
                await asyncio.sleep(0.005)
        raise AssertionError("condition never held")


def reply(status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None, *, version: str = "HTTP/1.1") -> bytes:
    hdrs = {"Content-Length": str(len(body)), **(headers or {})}
    head = f"{version} {status} {'OK' if status == 200 else 'X'}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    return head.encode("latin-1") + b"\r\n" + body


async def echo_path(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
    w.write(reply(200, req.target.encode()))


def client(max_connections: int = 10, timeout: float | httpx.Timeout = 5.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        mounts={"http://": FastHTTPTransport(max_connections=max_connections)},
        timeout=timeout,
        trust_env=False,
    )


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(TEST_BUDGET):
            return await fn()

    return anyio.run(bounded)


# ------------------------------------------------------------------------------------- framing


def test_content_length_body_and_request_arrive_intact() -> None:
    payload = os.urandom(300_000) + b"\r\n\r\n0\r\n\r\n"  # binary, bigger than socket buffers, with CRLFs

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        w.write(reply(200, req.body[::-1], {"X-Reply": "yes"}))

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.post(
                srv.url("/v1/generate?x=1&y=a%20b&z=%E2%9C%93"),
                content=payload,
                headers={"X-Custom-Thing": "Value With Spaces; and=symbols", "Content-Type": "application/octet-stream"},
            )
            assert r.status_code == 200
            assert r.headers["x-reply"] == "yes"
            assert r.content == payload[::-1]
            assert r.http_version == "HTTP/1.1"
            (req,) = srv.requests
            assert req.method == "POST"
            assert req.target == "/v1/generate?x=1&y=a%20b&z=%E2%9C%93"
            assert req.body == payload
            assert req.header("x-custom-thing") == "Value With Spaces; and=symbols"
            assert req.header("content-type") == "application/octet-stream"
            assert req.header("content-length") == str(len(payload))
            assert req.header("host") == f"127.0.0.1:{srv.port}"

    run(main)


def test_json_post_like_a_backend() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        w.write(reply(200, b'{"generated_text": ["ok"]}', {"Content-Type": "application/json"}))

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.post(srv.url("/generate"), json={"inputs": "héllo ✓", "parameters": {"max_new_tokens": 8}})
            assert r.json() == {"generated_text": ["ok"]}
            assert json.loads(srv.requests[0].body) == {"inputs": "héllo ✓", "parameters": {"max_new_tokens": 8}}

    run(main)


def test_chunked_body_with_extensions_and_trailers_then_connection_reused() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        if req.target == "/chunked":
            parts = [
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n",
                b"5;name=value\r\nhel",  # split inside a chunk
                b"lo\r\n1",  # and inside a size line
                b"\r\n \r\n6 ; ext\r\nworld!\r\n",
                b"0\r\nX-Trailer: t1\r\n",
                b"X-Other: t2\r\n\r\n",
            ]
            for p in parts:
                w.write(p)
                await w.drain()
                await asyncio.sleep(0.01)
        else:
            await echo_path(req, w, srv)

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.get(srv.url("/chunked"))
            assert r.status_code == 200
            assert r.text == "hello world!"
            # Trailers were consumed: the next reply on the same connection parses cleanly.
            r2 = await c.get(srv.url("/after"))
            assert r2.text == "/after"
            assert [q.conn for q in srv.requests] == [0, 0]

    run(main)


def test_no_length_with_connection_close_reads_to_eof() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n")
        for piece in (b"part one, ", b"part two, ", req.target.encode()):
            w.write(piece)
            await w.drain()
            await asyncio.sleep(0.01)
        return False

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.get(srv.url("/a"))
            assert r.text == "part one, part two, /a"
            r = await c.get(srv.url("/b"))
            assert r.text == "part one, part two, /b"
            assert srv.connections == 2

    run(main)


def test_http10_reply_read_to_close() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nfrom an old server")
        return False

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.get(srv.url("/x"))
            assert r.status_code == 200
            assert r.http_version == "HTTP/1.0"
            assert r.text == "from an old server"
            r = await c.get(srv.url("/y"))
            assert r.text == "from an old server"

    run(main)


def test_http10_with_length_is_not_reused_unless_keep_alive() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        extra = {"Connection": "keep-alive"} if req.target == "/ka" else {}
        w.write(reply(200, req.target.encode(), extra, version="HTTP/1.0"))  # the server keeps the socket open

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            assert (await c.get(srv.url("/plain"))).text == "/plain"
            assert (await c.get(srv.url("/ka"))).text == "/ka"
            assert (await c.get(srv.url("/ka2"))).text == "/ka2"
            # /plain's connection was not reused (HTTP/1.0 default is close); /ka's was.
            assert [q.conn for q in srv.requests] == [0, 1, 1]

    run(main)


def test_interim_1xx_replies_are_skipped() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await w.drain()
        await asyncio.sleep(0.01)
        w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x.css>\r\n\r\n")
        w.write(reply(201, b"created", {"X-Final": "1"}))

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.post(srv.url("/p"), content=b"data")
            assert r.status_code == 201
            assert r.text == "created"
            assert r.headers["x-final"] == "1"
            assert "link" not in r.headers
            assert (await c.get(srv.url("/again"))).status_code == 201
            assert srv.connections == 1

    run(main)


def test_gzip_content_encoding_is_decoded() -> None:
    doc = b'{"choices": [{"message": {"content": "' + b"forty-two " * 200 + b'"}}]}'

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        w.write(reply(200, gzip.compress(doc), {"Content-Encoding": "gzip", "Content-Type": "application/json"}))

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.get(srv.url("/"))
            assert r.content == doc
            assert r.json()["choices"][0]["message"]["content"].startswith("forty-two ")

    run(main)


def test_head_and_204_have_no_body_and_keep_the_connection() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        if req.method == "HEAD":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
        elif req.target == "/empty":
            w.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        else:
            await echo_path(req, w, srv)

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.head(srv.url("/h"))
            assert r.status_code == 200 and r.content == b""
            r = await c.get(srv.url("/empty"))
            assert r.status_code == 204 and r.content == b""
            assert (await c.get(srv.url("/last"))).text == "/last"
            assert srv.connections == 1

    run(main)


def test_streamed_request_body_is_sent_chunked() -> None:
    async def body():
        for part in (b"first,", b"", b"second,", b"third"):
            yield part

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        w.write(reply(200, req.body))

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            r = await c.post(srv.url("/s"), content=body(), timeout=2.0)
            assert r.status_code == 200
            assert srv.requests[0].body == b"first,second,third"
            assert r.content == b"first,second,third"
            assert (await c.get(srv.url("/next"))).status_code == 200  # the wire stayed in sync

    run(main)


# ------------------------------------------------------------------------------------ keep-alive


def test_sequential_requests_share_one_connection() -> None:
    async def main() -> None:
        async with Server(echo_path) as srv, client() as c:
            for i in range(5):
                assert (await c.get(srv.url(f"/r{i}"))).text == f"/r{i}"
            assert srv.connections == 1
            assert [q.conn for q in srv.requests] == [0] * 5

    run(main)


def test_server_connection_close_header_means_new_connection_next_time() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(reply(200, req.target.encode(), {"Connection": "close"}))
        return req.target != "/keep-socket-open"  # even if the socket stays open, it must not be reused

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            assert (await c.get(srv.url("/one"))).text == "/one"
            assert (await c.get(srv.url("/keep-socket-open"))).text == "/keep-socket-open"
            assert (await c.get(srv.url("/three"))).text == "/three"
            assert [q.conn for q in srv.requests] == [0, 1, 2]

    run(main)


def test_server_closing_an_idle_connection_is_survived() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(reply(200, req.target.encode()))  # says nothing about closing...
        return False  # ...but closes right after, like a keep-alive timeout

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            assert (await c.get(srv.url("/first"))).text == "/first"
            await srv.wait_for(lambda: srv.closed == 1)
            await asyncio.sleep(0.05)  # let the client's loop see the FIN
            r = await c.get(srv.url("/second"))
            assert r.text == "/second"
            assert [q.conn for q in srv.requests] == [0, 1]

    run(main)


# -------------------------------------------------------------------------------------- failures


def test_server_closing_mid_body_is_a_transport_error_and_pool_recovers() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        if req.target == "/length":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
            return False
        if req.target == "/chunked":
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly a few")
            return False
        if req.target == "/head":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Le")
            return False
        await echo_path(req, w, srv)
        return True

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            for path in ("/length", "/chunked", "/head"):
                with pytest.raises(httpx.RemoteProtocolError):
                    await c.get(srv.url(path))
            assert (await c.get(srv.url("/fine"))).text == "/fine"

    run(main)


def test_reset_during_read_to_close_body_is_an_error_not_a_short_body() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe first half of")
        await w.drain()
        await asyncio.sleep(0.05)
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        w.transport.abort()
        return False

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            with pytest.raises(httpx.TransportError):
                r = await c.get(srv.url("/reset"))
                pytest.fail(f"a reset connection was taken as a complete reply: {r.content!r}")

    run(main)


def test_silent_server_gives_read_timeout_and_pool_recovers() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        if req.target == "/silent":
            with anyio.move_on_after(5):
                await srv.release.wait()
            return False
        await echo_path(req, w, srv)
        return True

    async def main() -> None:
        async with Server(handler) as srv, client(timeout=httpx.Timeout(0.3)) as c:
            with pytest.raises(httpx.ReadTimeout):
                await c.get(srv.url("/silent"))
            assert (await c.get(srv.url("/ok"))).text == "/ok"
            assert srv.requests[-1].conn == 1  # the timed-out connection was not reused

    run(main)


def test_attempt_timeout_extension_bounds_a_trickling_reply() -> None:
    """A server that sends one byte every 50 ms never trips the read timeout; the attempt timeout ends it."""
    from evaltui.backends.transport import ATTEMPT_TIMEOUT

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):  # 5 s of trickle at most
            w.write(b"x")
            await w.drain()
            await asyncio.sleep(0.05)
        return False

    async def main() -> None:
        async with Server(handler) as srv, client(timeout=httpx.Timeout(1.0)) as c:
            request = c.build_request("GET", srv.url("/trickle"), extensions={"timeout": httpx.Timeout(1.0).as_dict(), ATTEMPT_TIMEOUT: 0.3})
            # Without the attempt timeout the trickle would end in the server closing: RemoteProtocolError.
            with pytest.raises(httpx.ReadTimeout):
                await c.send(request)

    run(main)


def test_attempt_timeout_ends_a_reply_that_never_stops_coming() -> None:
    """Data arriving every millisecond must not keep winning the race against the deadline."""
    from evaltui.backends.transport import ATTEMPT_TIMEOUT

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(50_000):  # 50 MB at most, below the transport's cap on a reply
            try:
                w.write(b"400\r\n" + b"x" * 1024 + b"\r\n")
                await w.drain()
            except ConnectionError:
                return False
            await asyncio.sleep(0)
        return False

    async def main() -> None:
        async with Server(handler) as srv, client(timeout=httpx.Timeout(5.0)) as c:
            request = c.build_request("GET", srv.url("/endless"), extensions={"timeout": httpx.Timeout(5.0).as_dict(), ATTEMPT_TIMEOUT: 0.3})
            with pytest.raises(httpx.ReadTimeout, match="within the attempt timeout"):
                await c.send(request)

    run(main)


def test_connection_refused_is_connect_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now

    async def main() -> None:
        async with client() as c:
            with pytest.raises(httpx.ConnectError):
                await c.get(f"http://127.0.0.1:{port}/")

    run(main)


def test_https_is_refused_by_this_transport() -> None:
    async def main() -> None:
        t = FastHTTPTransport()
        with pytest.raises(httpx.UnsupportedProtocol):
            await t.handle_async_request(httpx.Request("GET", "https://127.0.0.1:1/"))

    run(main)


# ---------------------------------------------------------------------------- limits and cancel


def test_max_connections_bounds_concurrent_connections() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        # Hold each request until two are in flight at once (or a bounded wait passes).
        with anyio.move_on_after(2):
            await srv.wait_for(lambda: srv.in_flight >= 2, limit=2)
        await asyncio.sleep(0.02)
        w.write(reply(200, req.target.encode()))

    async def main() -> None:
        async with Server(handler) as srv, client(max_connections=2) as c:
            rs = await asyncio.gather(*(c.get(srv.url(f"/c{i}")) for i in range(6)))
            assert sorted(r.text for r in rs) == [f"/c{i}" for i in range(6)]
            assert srv.max_open == 2  # used both, never more
            assert srv.connections == 2
            assert srv.max_in_flight == 2

    run(main)


@pytest.mark.parametrize("stall", ["before-head", "mid-body"])
def test_cancelled_request_leaves_no_stale_connection(stall: str) -> None:
    stalled = asyncio.Event()

    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        if req.target == "/slow":
            if stall == "mid-body":
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nslow")
                await w.drain()
            stalled.set()
            with anyio.move_on_after(5):
                await srv.release.wait()
            w.write(b"-reply" if stall == "mid-body" else reply(200, b"slow-reply"))
        else:
            await echo_path(req, w, srv)

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            task = asyncio.ensure_future(c.get(srv.url("/slow")))
            with anyio.fail_after(3):
                await stalled.wait()
            await asyncio.sleep(0.02)  # let the client take in what was sent so far
            task.cancel()  # the caller gives up mid-flight
            with pytest.raises(asyncio.CancelledError):
                await task
            srv.release.set()  # the server now finishes the abandoned reply
            await srv.wait_for(lambda: srv.closed == 1)  # the abandoned connection was closed, not leaked
            r = await c.get(srv.url("/next"))
            assert r.text == "/next"  # not the abandoned reply
            assert srv.requests[-1].conn == 1

    run(main)


def test_cancel_scope_timeout_around_a_request() -> None:
    async def handler(req: Req, w: asyncio.StreamWriter, srv: Server) -> None:
        if req.target == "/slow":
            with anyio.move_on_after(5):
                await srv.release.wait()
        await echo_path(req, w, srv)

    async def main() -> None:
        async with Server(handler) as srv, client() as c:
            with anyio.move_on_after(0.2) as scope:
                await c.get(srv.url("/slow"))
            assert scope.cancelled_caught
            srv.release.set()
            assert (await c.get(srv.url("/next"))).text == "/next"

    run(main)


def test_closed_transport_drops_idle_connections() -> None:
    async def main() -> None:
        async with Server(echo_path) as srv:
            async with client() as c:
                assert (await c.get(srv.url("/a"))).text == "/a"
            await srv.wait_for(lambda: srv.closed == 1)  # aclose() closed the kept-alive socket

    run(main)
