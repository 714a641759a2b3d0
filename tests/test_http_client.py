"""What a user's real server can do to the HTTP client, through the backends, on 127.0.0.1.

Odd but valid replies (bare-LF line ends, gzip) must be read; broken framing (bad or conflicting
Content-Length) must fail at once as a connection error, not time out; a reply that never ends is
cut at the attempt timeout; the pool never opens more than max_workers connections; proxies from
the environment and https with a private CA work.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from evaltui.backends import BackendError, make_backend, make_client
from evaltui.plan import ModelConfig

REPLY = {"generated_text": "the answer is 42"}


def model_cfg(url: str, **kw: Any) -> ModelConfig:
    data: dict[str, Any] = {"abbr": "m", "type": "lightllm", "url": url, "retry": 1, "backoff": 0.0, "timeout": 10.0}
    data.update(kw)
    return ModelConfig.model_validate(data)


async def generate(cfg: ModelConfig, prompt: str = "What is 6*7?") -> str:
    async with make_client(cfg) as client:
        return await make_backend(cfg, client).generate(prompt)


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro(), 30))  # no test may hang the suite


# ----------------------------------------------------------------- a server that writes exact bytes


class RawServer:
    """Answers every request on a keep-alive connection with `reply(n)` bytes (n = request number)."""

    def __init__(self, reply: Callable[[int], bytes], delay: float = 0.0) -> None:
        self.reply = reply
        self.delay = delay
        self.requests = 0
        self.connections = 0
        self.open = 0
        self.max_open = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self._writers.append(w)
        self.connections += 1
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                length = next((int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:")), 0)
                await r.readexactly(length)
                self.requests += 1
                if self.delay:
                    await asyncio.sleep(self.delay)
                w.write(self.reply(self.requests))
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            w.close()

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/generate"
        finally:
            server.close()
            for w in self._writers:  # connections still kept alive by the client's pool
                w.close()
            await asyncio.sleep(0.01)  # their handlers see the close and end


def ok(body: bytes = json.dumps(REPLY).encode(), eol: bytes = b"\r\n", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK" + eol + b"Content-Type: application/json" + eol + extra + b"Content-Length: %d" % len(body) + eol + eol + body


def test_bare_lf_reply_is_read() -> None:
    srv = RawServer(lambda n: ok(eol=b"\n"))

    async def main() -> str:
        async with srv.serve() as url:
            return await generate(model_cfg(url))

    assert run(main) == REPLY["generated_text"]


def test_gzip_encoded_reply_is_decoded() -> None:
    body = gzip.compress(json.dumps(REPLY).encode())
    srv = RawServer(lambda n: ok(body, extra=b"Content-Encoding: gzip\r\n"))

    async def main() -> str:
        async with srv.serve() as url:
            return await generate(model_cfg(url))

    assert run(main) == REPLY["generated_text"]


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\nContent-Length: 10\r\n\r\n",
        b"NOT-HTTP\r\n\r\n",
    ],
    ids=["negative-length", "underscore-length", "conflicting-lengths", "no-status-line"],
)
def test_broken_framing_is_a_connection_error_at_once_and_retried(head: bytes) -> None:
    srv = RawServer(lambda n: head + json.dumps(REPLY).encode())

    async def main() -> None:
        async with srv.serve() as url:
            await generate(model_cfg(url, retry=1, timeout=10.0))

    with pytest.raises(BackendError) as err:
        run(main)
    assert err.value.kind == "connection" and "malformed HTTP reply" in err.value.message
    assert err.value.attempts == 2 and srv.requests == 2  # failed fast, retried, bounded


def test_broken_framing_then_a_good_reply_succeeds() -> None:
    srv = RawServer(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n" if n == 1 else ok())

    async def main() -> str:
        async with srv.serve() as url:
            return await generate(model_cfg(url, retry=1))

    assert run(main) == REPLY["generated_text"]
    assert srv.connections == 2  # the broken connection was not reused


def test_reply_that_never_ends_is_cut_at_the_attempt_timeout() -> None:
    async def trickle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        try:
            with contextlib.suppress(ConnectionError):  # the client hangs up: the point of the test
                for _ in range(200):  # a byte every 20 ms: never silent for long, never done
                    w.write(b" ")
                    await w.drain()
                    await asyncio.sleep(0.02)
        finally:
            w.close()

    async def main() -> None:
        server = await asyncio.start_server(trickle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await generate(model_cfg(f"http://127.0.0.1:{port}/generate", retry=0, timeout=0.3))
        finally:
            server.close()

    with pytest.raises(BackendError) as err:
        run(main)
    assert err.value.kind == "timeout" and "0.3 s" in err.value.message


def test_connections_are_kept_alive_and_never_more_than_max_workers() -> None:
    srv = RawServer(lambda n: ok(), delay=0.02)

    async def main() -> list[str]:
        async with srv.serve() as url:
            cfg = model_cfg(url, max_workers=3)
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client)
                return await asyncio.gather(*(backend.generate(f"q{i}") for i in range(12)))

    answers = run(main)
    assert answers == [REPLY["generated_text"]] * 12
    assert srv.requests == 12
    assert srv.max_open <= 3 and srv.connections <= 3


# ----------------------------------------------------------------------------------------- proxy


@contextlib.asynccontextmanager
async def aiohttp_server(handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = web.Server(handler)
    runner = web.ServerRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def model_server(request: web.BaseRequest) -> web.Response:
    body = await request.json()
    return web.json_response({"generated_text": f"you asked: {body['inputs']}"})


def test_http_proxy_from_the_environment_carries_the_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def forward(request: web.BaseRequest) -> web.Response:
        """A forward proxy: the request line carries the absolute URL; every name leads to 127.0.0.1."""
        seen.append(str(request.url))
        target = request.url.with_host("127.0.0.1")
        async with aiohttp.ClientSession() as s:
            async with s.post(target, data=await request.read(), headers={"content-type": "application/json"}) as r:
                return web.Response(body=await r.read(), status=r.status, content_type="application/json")

    async def main() -> str:
        async with aiohttp_server(model_server) as model_port, aiohttp_server(forward) as proxy_port:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
            monkeypatch.delenv("NO_PROXY")
            # a name only the proxy resolves: the client itself never looks it up
            return await generate(model_cfg(f"http://model.evaltui-test.invalid:{model_port}/generate"), "hello")

    assert run(main) == "you asked: hello"
    assert len(seen) == 1 and seen[0].startswith("http://model.evaltui-test.invalid:") and seen[0].endswith("/generate")


def test_no_proxy_and_loopback_bypass_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltui.backends.client import env_proxy

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example.test:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3129")
    monkeypatch.delenv("NO_PROXY")
    assert str(env_proxy("http://models.example.test/v1")[0]) == "http://proxy.example.test:3128"
    assert str(env_proxy("https://api.example.test/v1")[0]) == "http://proxy.example.test:3129"
    for local in ("http://127.0.0.1:8000/v1", "http://127.0.0.2:1/generate", "http://localhost:1/x", "http://[::1]:1/v1"):
        assert env_proxy(local) == (None, None), local
    monkeypatch.setenv("NO_PROXY", "models.example.test")
    assert env_proxy("http://models.example.test/v1") == (None, None)


def test_a_proxy_named_without_a_scheme_is_spoken_to_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """`HTTP_PROXY=proxy.corp:3128`, as curl and requests accept it, carries the requests."""
    seen: list[str] = []

    async def forward(request: web.BaseRequest) -> web.Response:
        seen.append(str(request.url))
        async with aiohttp.ClientSession() as s:
            async with s.post(request.url.with_host("127.0.0.1"), data=await request.read(), headers={"content-type": "application/json"}) as r:
                return web.Response(body=await r.read(), status=r.status, content_type="application/json")

    async def main() -> str:
        async with aiohttp_server(model_server) as model_port, aiohttp_server(forward) as proxy_port:
            monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy_port}")
            monkeypatch.delenv("NO_PROXY", raising=False)
            return await generate(model_cfg(f"http://model.evaltui-test.invalid:{model_port}/generate", retry=0), "via bare proxy")

    assert run(main) == "you asked: via bare proxy"
    assert len(seen) == 1 and seen[0].startswith("http://model.evaltui-test.invalid:")


def test_the_unspecified_address_is_this_machine_and_bypasses_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltui.backends.client import env_proxy

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    for local in ("http://0.0.0.0:8000/v1", "http://[::]:8000/v1"):
        assert env_proxy(local) == (None, None), local


def test_a_local_server_is_reached_directly_whatever_the_proxy_settings(sim_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corporate HTTP_PROXY with a NO_PROXY that forgets localhost must not break local models (or the demo)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # a proxy that is not there
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("NO_PROXY")
    sim = sim_factory()
    assert run(lambda: generate(model_cfg(f"{sim.url}/generate"))) != ""
    assert sim.stats.requests_total == 1


def test_a_redirect_is_not_followed_and_says_where_to(monkeypatch: pytest.MonkeyPatch) -> None:
    srv = RawServer(lambda n: b"HTTP/1.1 308 Permanent Redirect\r\nLocation: https://models.example.test/v2/generate\r\nContent-Length: 0\r\n\r\n")

    async def main() -> str:
        async with srv.serve() as url:
            return await generate(model_cfg(url, retry=3))

    with pytest.raises(BackendError) as err:
        run(main)
    assert err.value.status == 308 and err.value.attempts == 1 and srv.requests == 1
    assert "redirects to https://models.example.test/v2/generate" in err.value.message


def test_a_netrc_entry_for_the_host_does_not_displace_the_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp's trust_env would add ~/.netrc's Basic credentials and then refuse our Authorization header."""
    (tmp_path / "netrc").write_text("machine 127.0.0.1 login someone password other\n", encoding="utf-8")
    (tmp_path / "netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("EVALTUI_TEST_HTTP_KEY", "sk-test")
    auth: list[str] = []

    async def handler(request: web.BaseRequest) -> web.Response:
        auth.append(request.headers.get("Authorization", ""))
        return await model_server(request)

    async def main() -> str:
        async with aiohttp_server(handler) as port:
            return await generate(model_cfg(f"http://127.0.0.1:{port}/generate", api_key_env="EVALTUI_TEST_HTTP_KEY"), "hi")

    assert run(main) == "you asked: hi"
    assert auth == ["Bearer sk-test"]


# ------------------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A private CA, a server certificate for 127.0.0.1 signed by it, and the CA's PEM file."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    pem = tmp_path_factory.mktemp("ca") / "private-ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return server_ctx, pem


def https_generate(server_ctx: ssl.SSLContext, **cfg: Any) -> str:
    async def main() -> str:
        async with aiohttp_server(model_server, server_ctx) as port:
            return await generate(model_cfg(f"https://127.0.0.1:{port}/generate", **cfg), "over tls")

    return run(main)


def test_https_with_the_private_ca_in_ca_file(tls: tuple[ssl.SSLContext, Path]) -> None:
    server_ctx, pem = tls
    assert https_generate(server_ctx, ca_file=str(pem)) == "you asked: over tls"


def test_https_with_the_private_ca_in_ssl_cert_file(tls: tuple[ssl.SSLContext, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    server_ctx, pem = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    assert https_generate(server_ctx) == "you asked: over tls"


def test_ca_file_is_trusted_in_addition_to_ssl_cert_file(tls: tuple[ssl.SSLContext, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ca_file names one private CA; a server signed by another CA, trusted through SSL_CERT_FILE
    (the system's store stands for it), stays trusted."""
    _, first_pem = tls
    other = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    other.issue_cert("127.0.0.1").configure_cert(server_ctx)
    other_pem = tmp_path / "other-ca.pem"
    other.cert_pem.write_to_path(str(other_pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(other_pem))
    assert https_generate(server_ctx, ca_file=str(first_pem)) == "you asked: over tls"


def test_https_to_a_server_with_a_self_signed_certificate_named_in_ca_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model server's own certificate, made with `openssl req -x509` (no CA behind it), is what
    `ca_file` names; a copy of the plan without it fails as untrusted."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)  # as openssl req -x509 makes it
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "server.pem", tmp_path / "server.key")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)

    assert https_generate(server_ctx, ca_file=str(tmp_path / "server.pem")) == "you asked: over tls"
    with pytest.raises(BackendError) as err:
        https_generate(server_ctx)
    assert "not trusted" in err.value.message and err.value.attempts == 1


def test_https_with_an_untrusted_certificate_fails_at_once_and_says_how_to_trust_it(
    tls: tuple[ssl.SSLContext, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server_ctx, _ = tls
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(BackendError) as err:
        https_generate(server_ctx, retry=3)
    assert err.value.kind == "connect" and not err.value.retryable and err.value.attempts == 1
    assert "not trusted" in err.value.message and "ca_file" in err.value.message


def test_https_with_verify_false_accepts_any_certificate(tls: tuple[ssl.SSLContext, Path]) -> None:
    server_ctx, _ = tls
    assert https_generate(server_ctx, verify=False) == "you asked: over tls"


def test_the_engine_never_imports_httpx() -> None:
    """httpx's CLI module pulls in rich when click is installed: the headless path must not touch it."""
    import subprocess
    import sys

    code = (
        "import sys, evaltui.cli, evaltui.headless, evaltui.engine.run.runner, evaltui.backends, evaltui.sim;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_wrong_endpoint_says_which_url_was_asked_and_what_it_should_be(sim_factory) -> None:
    sim = sim_factory()
    cfg = model_cfg(f"{sim.url}/v1", retry=2)  # type lightllm wants .../generate
    with pytest.raises(BackendError) as err:
        run(lambda: generate(cfg))
    assert err.value.status == 404 and err.value.attempts == 1
    assert "is the model's url right" in err.value.message and "/generate URL" in err.value.message
    assert f"{sim.url}/v1" in err.value.message


def test_the_url_query_is_kept_after_the_openai_endpoint() -> None:
    """Azure-style URLs carry ?api-version=...: the endpoint's path goes before it, not after."""
    seen: list[str] = []

    async def handler(request: web.BaseRequest) -> web.Response:
        seen.append(request.path_qs)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    async def main() -> str:
        async with aiohttp_server(handler) as port:
            url = f"http://127.0.0.1:{port}/openai/deployments/gpt?api-version=2024-06-01"
            return await generate(model_cfg(url, type="openai-chat", model="gpt"))

    assert run(main) == "ok"
    assert seen == ["/openai/deployments/gpt/chat/completions?api-version=2024-06-01"]


def test_https_through_an_https_proxy_tunnel_with_a_private_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The corporate case: HTTPS_PROXY, a CONNECT tunnel, TLS to the model server inside it."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("model.evaltui-test.invalid").configure_cert(server_ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    tunnels: list[bytes] = []

    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        w.close()

    async def connect_proxy(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")  # CONNECT model.evaltui-test.invalid:PORT HTTP/1.1
        target = head.split(b" ")[1]
        tunnels.append(target)
        ur, uw = await asyncio.open_connection("127.0.0.1", int(target.rsplit(b":", 1)[1]))
        w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(r, uw), pipe(ur, w))

    async def main() -> str:
        proxy = await asyncio.start_server(connect_proxy, "127.0.0.1", 0)
        try:
            async with aiohttp_server(model_server, server_ctx) as port:
                monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}")
                monkeypatch.delenv("NO_PROXY")
                cfg = model_cfg(f"https://model.evaltui-test.invalid:{port}/generate", ca_file=str(tmp_path / "ca.pem"))
                return await generate(cfg, "tunnelled")
        finally:
            proxy.close()

    assert run(main) == "you asked: tunnelled"
    assert len(tunnels) == 1 and tunnels[0].startswith(b"model.evaltui-test.invalid:")
