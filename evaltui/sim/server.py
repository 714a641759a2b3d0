"""Routing, latency and fault replies, and the server object; one module per wire dialect answers.

A dialect (sim/lightllm.py for /generate, sim/openai.py for /v1/chat/completions and
/v1/completions, as in backends/) turns a parsed body into a reply; the HTTP layer
(sim/http.py, aiohttp's server) waits a reply's latency and settles the
request in the stats when it is sent or when its client leaves first.

Delays: a normal or malformed reply waits the model's latency (+ jitter), a
"slow" fault waits `slow_seconds`; rejections (429, simulated statuses,
prompt too long, bad requests) and dropped connections happen at once, as a
rate limiter or validator in front of a real server would.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from aiohttp import web

from evaltui import fastjson
from evaltui.sim.call import BadRequest, Builder, Call, json_reply
from evaltui.sim.config import SimConfig
from evaltui.sim.faults import PROMPT_TOO_LONG, FaultInjector, format_seconds, simulated_message
from evaltui.sim.http import Reply, Request, error_body, make_app
from evaltui.sim.lightllm import LightLLMDialect
from evaltui.sim.openai import OpenAIDialect
from evaltui.sim.stats import SimStats

GENERATE = "generate"
GENERATE_STREAM = "generate_stream"
CHAT = "chat"
COMPLETIONS = "completions"
MODEL_ENDPOINTS = (GENERATE, GENERATE_STREAM, CHAT, COMPLETIONS)

# Order matters: "/v1/chat/completions" must be tried before "/v1/completions".
_SUFFIXES = (
    ("/v1/chat/completions", CHAT),
    ("/v1/completions", COMPLETIONS),
    ("/v1/models", "models"),
    ("/generate_stream", GENERATE_STREAM),
    ("/generate", GENERATE),
    ("/health", "health"),
)
_EXACT = {"/sim/stats": "stats", "/sim/reset": "reset"}
_METHODS = {GENERATE: "POST", GENERATE_STREAM: "POST", CHAT: "POST", COMPLETIONS: "POST", "models": "GET",
            "health": "GET", "stats": "GET", "reset": "POST"}
_ROUTE_CACHE_SIZE = 4096


class SimApp:
    """The request handler behind every connection of one SimServer."""

    def __init__(self, config: SimConfig, stats: SimStats) -> None:
        self.config = config
        self.stats = stats
        self.faults = FaultInjector(config)
        self._routes: dict[str, tuple[str, str | None] | None] = {}
        self._jitter_rng = random.Random(config.faults.seed)
        lightllm, openai = LightLLMDialect(config), OpenAIDialect(config)
        self._builders: dict[str, Builder] = {GENERATE: lightllm.generate, GENERATE_STREAM: lightllm.generate_stream, CHAT: openai.chat,
                                              COMPLETIONS: openai.completions}
        self.on_die: Callable[[], None] | None = None  # called once `die_after` requests have come

    # --- plumbing ---------------------------------------------------------

    def _json(self, obj: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
        return json_reply(self.config, obj, status, headers)

    def _error(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = (), type_: str | None = None) -> Reply:
        ctype = None if self.config.omit_content_type else "application/json"
        return Reply(status, error_body(status, message, type_), ctype, headers)

    def _route(self, path: str) -> tuple[str, str | None] | None:
        """(endpoint, model-name prefix or None) for a path, or None if unknown."""
        try:
            return self._routes[path]
        except KeyError:
            pass
        found: tuple[str, str | None] | None = None
        if path in _EXACT:
            found = (_EXACT[path], None)
        else:
            for suffix, endpoint in _SUFFIXES:
                if path == suffix:
                    found = (endpoint, None)
                    break
                if path.endswith(suffix) and path.startswith("/"):
                    prefix = unquote(path[1:-len(suffix)]).strip("/")
                    if prefix:
                        found = (endpoint, prefix)
                        break
        if len(self._routes) >= _ROUTE_CACHE_SIZE:
            self._routes.clear()
        self._routes[path] = found
        return found

    def handle(self, req: Request) -> Reply:
        route = self._route(req.path)
        if route is None:
            return self._error(404, f"no such endpoint: {req.method} {req.path[:200]}", type_="not_found_error")
        endpoint, prefix = route
        allowed = _METHODS[endpoint]
        if req.method != allowed:
            return self._error(405, f"method {req.method} not allowed on {req.path[:200]}; use {allowed}",
                               headers=(("Allow", allowed),))
        if endpoint in MODEL_ENDPOINTS:
            return self._model_request(req, endpoint, prefix)
        if endpoint == "health":
            return self._json({"status": "ok"})
        if endpoint == "models":
            names = [prefix] if prefix else (list(self.config.models) or ["default"])
            return self._json({"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "evaltui-sim"}
                for name in names
            ]})
        if endpoint == "stats":
            # ?log=N keeps only the N most recent log records (the full log can be large).
            tail = parse_qs(req.query).get("log", [None])[-1]
            if tail is not None and not tail.isdigit():
                return self._error(400, f"log must be a non-negative integer, got {tail!r}")
            return self._json(self.stats.to_json(None if tail is None else int(tail)))
        self.stats.reset()  # "reset"
        return self._json({"status": "ok"})

    # --- model requests ---------------------------------------------------

    def _model_request(self, req: Request, endpoint: str, prefix: str | None) -> Reply:
        stats = self.stats
        call = Call(stats.begin(endpoint), endpoint, prefix or "default")
        if self.config.die_after and stats.requests_total > self.config.die_after:
            return self._die(call)
        try:
            body = self._body(req, call, prefix)
            prompt_chars, make_body = self._builders[endpoint](call, body)
        except BadRequest as exc:
            call.status = 400
            self._end(call)
            return self._error(400, str(exc))
        if self.config.max_in_flight and stats.in_flight > self.config.max_in_flight:
            return self._busy(call)

        stats.attempts[(call.model, call.prompt)] += 1
        kind = self.faults.decide(prompt_chars, stats.attempts[(call.model, call.prompt)])
        profile = self.config.profile(call.model)
        delay = profile.latency
        if profile.jitter:
            delay += self._jitter_rng.random() * profile.jitter
        if kind is None:
            reply = make_body(profile.accuracy)
        else:
            stats.faults[kind] += 1
            faults = self.config.faults
            if kind == PROMPT_TOO_LONG:
                call.status = 400
                self._end(call)
                return self._error(
                    400, f"prompt is too long: {prompt_chars} characters > {faults.max_prompt_chars}",
                    type_="invalid_request_error")
            if kind == "drop":
                call.status = 0
                self._end(call)
                return Reply(drop=True)
            if kind == "slow":
                reply = make_body(profile.accuracy)
                delay = faults.slow_seconds
            elif kind == "malformed":
                reply = _cut(make_body(profile.accuracy))
            else:
                status = call.status = int(kind)
                headers = (("Retry-After", format_seconds(faults.retry_after)),) if status == 429 else ()
                self._end(call)
                return self._error(status, simulated_message(status), headers=headers)
        reply.gap = profile.token_latency  # (of a streamed reply's events)
        if delay <= 0:
            self._end(call)
            return reply
        reply.delay = delay
        reply.settle = lambda sent: self._end(call, sent)
        return reply

    def _body(self, req: Request, call: Call, prefix: str | None) -> dict[str, Any]:
        """The request's JSON object (BadRequest otherwise); the model it names when its path names none."""
        try:
            body = fastjson.loads(req.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        if prefix is None and isinstance(body.get("model"), str) and body["model"]:
            call.model = body["model"]
        if self.config.record_bodies:
            call.body = body
        return body

    def _busy(self, call: Call) -> Reply:
        """More requests than `max_in_flight` at once: refused at once, as a gateway's limit does."""
        self.stats.faults["busy"] += 1
        call.status = 429
        self._end(call)
        headers = (("Retry-After", format_seconds(self.config.faults.retry_after)),)
        return self._error(429, f"simulated 429: more than {self.config.max_in_flight} requests in flight", headers=headers)

    def _die(self, call: Call) -> Reply:
        """`die_after` requests have come: this one's connection is cut and the server goes away."""
        call.status = 0
        self._end(call)
        if self.on_die is not None:
            self.on_die()
        return Reply(drop=True)

    def _end(self, call: Call, sent: bool = True) -> None:
        status = call.status if sent else 0  # a reply never sent is logged as a dropped connection
        self.stats.end(call.t0, call.model, call.endpoint, call.prompt, call.params, status, call.tokens if sent else 0, call.body)


def _cut(reply: Reply) -> Reply:
    """A reply cut half-way: half its body, or half its events (no last one)."""
    reply.body = reply.body[: max(1, len(reply.body) // 2)]
    if reply.events:
        reply.events = reply.events[: max(1, len(reply.events) // 2)]
    return reply


#: aiohttp logs a traceback for every malformed request; the client already got a 400 that says
#: what was wrong, so on a simulator (run under a TUI, or by tests) those lines are only noise.
QUIET = logging.getLogger("evaltui.sim.http")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class SimServer:
    """The simulated model server on the current event loop.

    >>> async with SimServer(SimConfig()) as sim:   # doctest: +SKIP
    ...     httpx.get(sim.url + "/health")
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config if config is not None else SimConfig()
        self.stats = SimStats()
        self._app = SimApp(self.config, self.stats)
        self._runner: web.AppRunner | None = None
        self.port = self.config.port
        self.died = asyncio.Event()  # set once `die_after` requests came and the server went away
        self._dying: asyncio.Task[None] | None = None
        self._app.on_die = self._die

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def open_connections(self) -> int:
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    @property
    def url(self) -> str:
        host = self.config.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def start(self) -> SimServer:
        # A short shutdown_timeout (0 would mean none): stopping cuts requests still waiting out
        # their latency at once.
        runner = web.AppRunner(make_app(self._app, self.config.serve_at_once), access_log=None, logger=QUIET, handler_cancellation=True, shutdown_timeout=0.05)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.config.host or None, self.config.port, backlog=4096, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    def _die(self) -> None:
        """Stop listening and cut every connection, as a killed process would (once)."""
        if self._dying is None:
            self._dying = asyncio.get_running_loop().create_task(self.stop())
            self._dying.add_done_callback(lambda _: self.died.set())

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            await asyncio.wait_for(runner.cleanup(), 5.0)
        except asyncio.TimeoutError:
            pass
        await asyncio.sleep(0)  # let cancelled requests settle the stats

    async def __aenter__(self) -> SimServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def reset_stats(self) -> None:
        self.stats.reset()
