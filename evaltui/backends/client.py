"""The HTTP client of one model: an aiohttp session, and its failures sorted into the kinds a user sees.

Why aiohttp directly (not httpx on top of it): at 64 requests in flight httpx's own pool costs
~10 ms of CPU per request and httpx over the `httpx-aiohttp` transport ~0.5 ms, against ~0.2 ms
for aiohttp alone (bench/http_client.py, bench/RESULTS.md). The engine's whole client CPU budget
is 0.5 ms per request, so the backends speak aiohttp and nothing else.

What it honours: HTTP(S)_PROXY / NO_PROXY from the environment (and the proxy's credentials from
~/.netrc), looked up once per model, never for loopback addresses; for https, the system's CA
store, `SSL_CERT_FILE` / `SSL_CERT_DIR`, and the model's own `ca_file` / `verify = false`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env, strip_auth_from_url
from multidict import CIMultiDictProxy
from yarl import URL

from evaltui.backends.sse import Stream, StreamTooLarge, is_event_stream, read_events
from evaltui.failure import ErrorKind
from evaltui.text import one_line

if TYPE_CHECKING:
    from evaltui.plan import ModelConfig

KEEPALIVE = 4.0
TLS_HINT = "to trust a private CA, set the model's ca_file (or SSL_CERT_FILE) to its PEM bundle"


@dataclass(frozen=True)
class Reply:
    """A whole HTTP reply, read before the connection went back to the pool."""

    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes
    streamed: bool = False  # its events went to the attempt's Stream as they came (the body is not kept)


class ReplyTooLarge(Exception):
    """The reply's body is longer than the model's max_reply_bytes: not read further. `reply` has
    its status and headers (an empty body), which decide what the failure is: a 2xx answer too
    long comes back as long (not retried), a 5xx too long to read is still a 5xx."""

    def __init__(self, reply: Reply, message: str) -> None:
        super().__init__(message)
        self.reply = reply
        self.message = message


#: Characters of a transport error kept (aiohttp quotes whatever it could not parse: 128 kB once).
TRANSPORT_CHARS = 500


class RequestFailed(Exception):
    """No HTTP reply: `kind` is TIMEOUT, CONNECT, CONNECTION or TLS; only TLS is not worth retrying.
    The message is on one line and at most TRANSPORT_CHARS long, whatever the library said."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        message = one_line(message, TRANSPORT_CHARS)
        super().__init__(message)
        self.kind = kind
        self.message = message


def tls_context(cfg: ModelConfig) -> ssl.SSLContext | bool:
    """How https replies are verified: by default the system store (and SSL_CERT_FILE/SSL_CERT_DIR,
    read now rather than when aiohttp was imported), plus `ca_file`; `verify = false` checks nothing."""
    if not cfg.verify:
        return False
    ctx = ssl.create_default_context()
    if cfg.ca_file:  # in addition to the default store, as `cafile=` would not be
        ctx.load_verify_locations(cafile=cfg.ca_file)
    return ctx


def env_proxy(url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for `url`, with aiohttp's own rules (NO_PROXY, ~/.netrc).

    Looked up once per model rather than through the session's `trust_env`, which looks it up
    (and ~/.netrc) on a worker thread for every request — twice the client's CPU per request —
    and would refuse to send a request whose host has a ~/.netrc entry next to our API key.
    """
    target = URL(url)
    if is_loopback(target.host):
        return None, None
    try:
        proxy, auth = get_env_proxy_for_url(target)
    except LookupError:  # no proxy for this URL
        return None, None
    if proxy.host is None:  # `HTTPS_PROXY=proxy.corp:3128`: no scheme, so http://, as curl and requests read it
        proxy, auth = strip_auth_from_url(URL(f"http://{proxy}"))
        if auth is None and proxy.host is not None:
            with contextlib.suppress(LookupError):  # aiohttp's rule: the proxy's credentials in ~/.netrc
                auth = basicauth_from_netrc(netrc_from_env(), proxy.host)
    return proxy, auth


def is_loopback(host: str | None) -> bool:
    """A server on this machine (a local model server, the simulator) is never reached through a proxy.

    A proxy elsewhere cannot reach our loopback, so proxying it only ever fails — as when a
    corporate HTTP_PROXY is set and NO_PROXY forgets localhost. Go's net/http does the same.
    """
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified  # 0.0.0.0 and :: reach this machine too


class ModelClient:
    """One pooled session per model, as many connections as `max_workers` so the pool is never the queue.

    A model with several replicas shares it too: aiohttp keeps keep-alive connections per host,
    the total stays `max_workers`, and each replica has its own proxy (NO_PROXY may differ).
    One session per replica was measured against it (bench/fleet.py, bench/RESULTS.md): the same
    CPU per request, so the simpler one stays.

    Used as `async with make_client(cfg, urls) as client`: the session belongs to the running loop.
    """

    def __init__(self, cfg: ModelConfig, urls: str | Sequence[str] | None = None) -> None:
        self.cfg = cfg
        self.urls = [urls] if isinstance(urls, str) else list(urls or cfg.urls)
        self.url = self.urls[0]
        self._session: aiohttp.ClientSession | None = None
        self._proxies: list[tuple[URL | None, aiohttp.BasicAuth | None]] = []

    async def __aenter__(self) -> ModelClient:
        # before the connector: a URL the proxy lookup refuses must not leave an open connector behind
        self._proxies = [env_proxy(u) for u in self.urls]
        connector = aiohttp.TCPConnector(
            limit=self.cfg.max_workers,
            limit_per_host=0,
            # below the 5 s idle timeout of uvicorn (vLLM, SGLang): a connection the server is
            # about to close is not reused, which would cost the request an attempt
            keepalive_timeout=KEEPALIVE,
            ssl=tls_context(self.cfg) if any(u.startswith("https://") for u in self.urls) else True,
        )
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(
        self, url: URL, body: bytes, headers: dict[str, str], timeout: aiohttp.ClientTimeout, replica: int = 0, stream: Stream | None = None
    ) -> Reply:
        """POST to the model's `replica` (an index into its urls) and read the whole reply within
        `timeout`; RequestFailed when no HTTP reply came. With a `stream`, a 2xx event stream's
        events go to it as they arrive (sse.py), within the same timeout and max_reply_bytes."""
        session = self._session
        if session is None:
            raise RuntimeError("ModelClient used outside `async with`")
        proxy, proxy_auth = self._proxies[replica]
        try:
            async with session.post(
                url, data=body, headers=headers, timeout=timeout, allow_redirects=False, proxy=proxy, proxy_auth=proxy_auth
            ) as resp:
                if stream is not None and 200 <= resp.status < 300 and is_event_stream(resp):
                    return await _read_stream(resp, self.cfg.max_reply_bytes, stream)
                data = await _read_capped(resp, self.cfg.max_reply_bytes)
                return Reply(resp.status, resp.reason or "", resp.headers, data)
        except asyncio.TimeoutError as e:  # aiohttp's own timeouts are TimeoutErrors too
            detail = f" ({e})" if str(e) else ""
            raise RequestFailed(ErrorKind.TIMEOUT, f"no complete reply within {timeout.total:g} s{detail}") from None
        except aiohttp.ClientConnectorCertificateError as e:
            raise RequestFailed(ErrorKind.TLS, _certificate_problem(e.certificate_error)) from None
        except aiohttp.ClientHttpProxyError as e:
            raise RequestFailed(ErrorKind.CONNECT, f"the proxy refused the connection: {e.status} {e.message}") from None
        except aiohttp.ClientConnectorError as e:
            raise RequestFailed(ErrorKind.CONNECT, _cannot_connect(e, url)) from None
        except aiohttp.ClientResponseError as e:  # raised only when the reply does not parse as HTTP
            raise RequestFailed(ErrorKind.CONNECTION, f"malformed HTTP reply: {_without_carets(e.message)}") from None
        except aiohttp.ClientError as e:
            raise RequestFailed(ErrorKind.CONNECTION, str(e) or type(e).__name__) from None


    async def get(self, url: URL, headers: dict[str, str], timeout: aiohttp.ClientTimeout, replica: int = 0) -> int:
        """The status of a GET (a replica's health check); RequestFailed when no reply came."""
        if self._session is None:
            raise RuntimeError("ModelClient used outside `async with`")
        proxy, proxy_auth = self._proxies[replica]
        try:
            async with self._session.get(url, headers=headers, timeout=timeout, allow_redirects=False, proxy=proxy, proxy_auth=proxy_auth) as resp:
                await resp.read()
                return resp.status
        except asyncio.TimeoutError:
            raise RequestFailed(ErrorKind.TIMEOUT, f"no reply within {timeout.total:g} s") from None
        except aiohttp.ClientConnectorError as e:
            raise RequestFailed(ErrorKind.CONNECT, _cannot_connect(e, url)) from None
        except aiohttp.ClientError as e:
            raise RequestFailed(ErrorKind.CONNECT, str(e) or type(e).__name__) from None


async def _read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body, never holding more than `cap` bytes of it (ReplyTooLarge past that).

    A body whose Content-Length is within the cap and that is not compressed is read in one call
    (the parser stops at that length): the common reply costs what it did. Any other — chunked,
    compressed (a gzip bomb inflates past its Content-Length), or unframed — is read a piece at a
    time and counted as it decompresses. A declared length over the cap is refused unread.
    """
    declared = resp.content_length
    if declared is not None and declared > cap:
        resp.close()
        raise ReplyTooLarge(_unread(resp), f"the reply is larger than max_reply_bytes ({cap:,}): its Content-Length is {declared:,} bytes, not read")
    if declared is not None and "content-encoding" not in resp.headers:
        return await resp.read()
    body = bytearray()
    while len(body) <= cap:
        piece = await resp.content.read(cap + 1 - len(body))  # what has arrived, never past cap + 1
        if not piece:
            return bytes(body)
        body += piece
    resp.close()  # drops the connection and what it had buffered
    raise ReplyTooLarge(_unread(resp), f"the reply is larger than max_reply_bytes ({cap:,}): more than {cap:,} bytes came, the rest was not read")


async def _read_stream(resp: aiohttp.ClientResponse, cap: int, stream: Stream) -> Reply:
    try:
        await read_events(resp, cap, stream)
    except StreamTooLarge as e:
        raise ReplyTooLarge(_unread(resp), str(e)) from None
    return Reply(resp.status, resp.reason or "", resp.headers, b"", streamed=True)


def _unread(resp: aiohttp.ClientResponse) -> Reply:
    return Reply(resp.status, resp.reason or "", resp.headers, b"")


def _cannot_connect(e: aiohttp.ClientConnectorError, url: URL) -> str:
    """aiohttp's words, without the `ssl:default` it puts in them for an http URL too (no TLS
    was involved there, and the word sent readers looking for a certificate problem)."""
    if url.scheme != "http":
        return str(e) or "cannot connect"
    return f"Cannot connect to host {e.host}:{e.port} [{e.strerror or type(e.os_error).__name__}]"


def _certificate_problem(error: BaseException) -> str:
    """Why the certificate was refused, and what to do: trust its CA, or renew an expired one."""
    if "expired" in str(error):
        return f"the server's TLS certificate has expired ({error}); renew it on the server (or check this machine's clock)"
    return f"the server's TLS certificate is not trusted ({error}); {TLS_HINT}"


def _without_carets(message: str) -> str:
    """aiohttp's parser errors span lines (the bad bytes, a caret under them): the carets go."""
    return " ".join(part for part in message[: 4 * TRANSPORT_CHARS + 4096].split() if part != "^")


def make_client(cfg: ModelConfig, urls: str | Sequence[str] | None = None) -> ModelClient:
    """The client for `cfg` (at `urls`, when the engine resolved them, e.g. a simulator's)."""
    return ModelClient(cfg, urls)
