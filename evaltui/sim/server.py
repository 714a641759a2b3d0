"""Routing, the LightLLM/OpenAI handlers, latency and fault replies.

Handlers are plain functions from a parsed body to a reply: the HTTP layer
(sim/http.py, aiohttp's server) waits a reply's latency and settles the
request in the stats when it is sent or when its client leaves first.

Delays: a normal or malformed reply waits the model's latency (+ jitter), a
"slow" fault waits `slow_seconds`; rejections (429, simulated statuses,
prompt too long, bad requests) and dropped connections happen at once, as a
rate limiter or validator in front of a real server would.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from typing import Any
from urllib.parse import parse_qs, unquote

from aiohttp import web

from evaltui import fastjson
from evaltui.sim import answers
from evaltui.sim.config import SimConfig
from evaltui.sim.faults import PROMPT_TOO_LONG, FaultInjector, format_seconds, simulated_message
from evaltui.sim.http import Reply, Request, error_body, make_app
from evaltui.sim.stats import SimStats

GENERATE = "generate"
CHAT = "chat"
COMPLETIONS = "completions"
MODEL_ENDPOINTS = (GENERATE, CHAT, COMPLETIONS)

# Order matters: "/v1/chat/completions" must be tried before "/v1/completions".
_SUFFIXES = (
    ("/v1/chat/completions", CHAT),
    ("/v1/completions", COMPLETIONS),
    ("/v1/models", "models"),
    ("/generate", GENERATE),
    ("/health", "health"),
)
_EXACT = {"/sim/stats": "stats", "/sim/reset": "reset"}
_METHODS = {GENERATE: "POST", CHAT: "POST", COMPLETIONS: "POST", "models": "GET",
            "health": "GET", "stats": "GET", "reset": "POST"}
_ROUTE_CACHE_SIZE = 4096
_OPENAI_PROMPT_FIELDS = ("model", "messages", "prompt")


class BadRequest(Exception):
    pass


_dumps = fastjson.dumps


def _max_tokens(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _content_text(content: Any) -> str:
    """Chat content is a string or a list of parts; only text parts matter here."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "".join(texts)
    if content is None:
        return ""
    raise BadRequest("message content must be a string or a list of parts")


class Call:
    """One model request travelling from parsing to its (possibly delayed) reply."""

    __slots__ = ("t0", "endpoint", "model", "prompt", "params")

    def __init__(self, t0: float, endpoint: str, model: str) -> None:
        self.t0 = t0
        self.endpoint = endpoint
        self.model = model
        self.prompt = ""
        self.params: dict[str, Any] = {}


class SimApp:
    """The request handler behind every connection of one SimServer."""

    def __init__(self, config: SimConfig, stats: SimStats) -> None:
        self.config = config
        self.stats = stats
        self.faults = FaultInjector(config)
        self._routes: dict[str, tuple[str, str | None] | None] = {}
        self._ids = itertools.count(1)
        self._jitter_rng = random.Random(config.faults.seed)

    # --- plumbing ---------------------------------------------------------

    def _json(self, obj: Any, status: int = 200, headers: tuple = ()) -> Reply:
        ctype = None if self.config.omit_content_type else "application/json"
        return Reply(status, _dumps(obj), ctype, headers)

    def _error(self, status: int, message: str, headers: tuple = (), type_: str | None = None) -> Reply:
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
        try:
            try:
                body = fastjson.loads(req.body)
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadRequest(f"invalid JSON body: {exc}") from None
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            if prefix is None and isinstance(body.get("model"), str) and body["model"]:
                call.model = body["model"]
            build = getattr(self, "_" + endpoint)
            prompt_chars, make_body = build(call, body)
        except BadRequest as exc:
            self._end(call)
            return self._error(400, str(exc))

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
                self._end(call)
                return self._error(
                    400, f"prompt is too long: {prompt_chars} characters > {faults.max_prompt_chars}",
                    type_="invalid_request_error")
            if kind == "drop":
                self._end(call)
                return Reply(drop=True)
            if kind == "slow":
                reply = make_body(profile.accuracy)
                delay = faults.slow_seconds
            elif kind == "malformed":
                good = make_body(profile.accuracy)
                good.body = good.body[: max(1, len(good.body) // 2)]
                reply = good
            else:
                status = int(kind)
                headers = (("Retry-After", format_seconds(faults.retry_after)),) if status == 429 else ()
                self._end(call)
                return self._error(status, simulated_message(status), headers=headers)
        if delay <= 0:
            self._end(call)
            return reply
        reply.delay = delay
        reply.settle = lambda: self._end(call)
        return reply

    def _end(self, call: Call) -> None:
        self.stats.end(call.t0, call.model, call.endpoint, call.prompt, call.params)

    # Each builder validates the body, fills call.prompt/params and returns
    # (prompt length in characters, function accuracy -> success Reply).

    def _generate(self, call: Call, body: dict) -> tuple[int, Any]:
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise BadRequest('"inputs" must be a string')
        params = body.get("parameters") or {}
        if not isinstance(params, dict):
            raise BadRequest('"parameters" must be an object')
        call.prompt = inputs
        call.params = params
        max_new = _max_tokens(params.get("max_new_tokens"), "max_new_tokens")
        cfg = self.config

        def make(accuracy: float) -> Reply:
            key = cfg.answer_key
            text, n_out, finish = answers.truncate(
                answers.generate(key, call.model, inputs, accuracy), max_new)
            pieces, lps = answers.text_logprobs(key, call.model, inputs, accuracy) \
                if cfg.prompt_logprobs else (answers.tokenize(inputs), None)
            out: dict[str, Any] = {
                "generated_text": text if cfg.generated_text_as_string else [text],
                "count_output_tokens": n_out,
                "finish_reason": finish,
                "prompt_tokens": len(pieces) + 1,
            }
            if lps is not None:
                ids = [answers.BOS_ID] + [answers.token_id(p) for p in pieces]
                out["prompt_token_ids"] = ids
                out["prompt_logprobs"] = [[ids[i], {str(ids[i + 1]): lps[i]}] for i in range(len(lps))]
            return self._json(out)

        return len(inputs), make

    def _openai_params(self, call: Call, body: dict) -> int | None:
        call.params = {k: v for k, v in body.items() if k not in _OPENAI_PROMPT_FIELDS}
        value = body.get("max_tokens")
        if value is None:
            return _max_tokens(body.get("max_completion_tokens"), "max_completion_tokens")
        return _max_tokens(value, "max_tokens")

    def _chat(self, call: Call, body: dict) -> tuple[int, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest('"messages" must be a non-empty list')
        texts = []
        user = None
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise BadRequest('each message must be an object with a "role"')
            text = _content_text(m.get("content"))
            texts.append(text)
            if m["role"] == "user":
                user = text
        if user is None:
            raise BadRequest('"messages" must contain a message with role "user"')
        call.prompt = user
        max_tokens = self._openai_params(call, body)
        stream = bool(body.get("stream"))
        include_usage = isinstance(body.get("stream_options"), dict) and \
            bool(body["stream_options"].get("include_usage"))
        model_field = body.get("model") if isinstance(body.get("model"), str) else call.model
        all_text = "\n".join(texts)

        def make(accuracy: float) -> Reply:
            text, n_out, finish = answers.truncate(
                answers.generate(self.config.answer_key, call.model, user, accuracy), max_tokens)
            n_in = len(answers.tokenize(all_text))
            usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
            ident, created = f"chatcmpl-sim{next(self._ids)}", int(time.time())
            if stream:
                head = {"id": ident, "object": "chat.completion.chunk", "created": created,
                        "model": model_field}
                chunks: list[dict[str, Any]] = [
                    dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": text},
                                         "logprobs": None, "finish_reason": None}]),
                    dict(head, choices=[{"index": 0, "delta": {}, "logprobs": None,
                                         "finish_reason": finish}]),
                ]
                if include_usage:
                    chunks.append(dict(head, choices=[], usage=usage))
                return self._sse(chunks)
            return self._json({
                "id": ident, "object": "chat.completion", "created": created, "model": model_field,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            })

        return len(all_text), make

    def _completions(self, call: Call, body: dict) -> tuple[int, Any]:
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            raise BadRequest('"prompt" must be a string or a non-empty list of strings')
        call.prompt = prompts[0]
        max_tokens = self._openai_params(call, body)
        echo = bool(body.get("echo"))
        logprobs = body.get("logprobs")
        want_logprobs = logprobs is not None and logprobs is not False
        stream = bool(body.get("stream"))
        model_field = body.get("model") if isinstance(body.get("model"), str) else call.model
        cfg = self.config

        def make(accuracy: float) -> Reply:
            key = cfg.answer_key
            choices = []
            n_in_total = n_out_total = 0
            for index, p in enumerate(prompts):
                gen, n_out, finish = answers.truncate(
                    answers.generate(key, call.model, p, accuracy), max_tokens)
                if want_logprobs and echo:
                    pieces, lps = answers.text_logprobs(key, call.model, p, accuracy)
                else:
                    pieces, lps = answers.tokenize(p), []
                n_in_total += len(pieces)
                n_out_total += n_out
                lp_obj = None
                if want_logprobs:
                    tokens: list[str] = []
                    token_lps: list[float | None] = []
                    offsets: list[int] = []
                    offset = 0
                    if echo:
                        for i, (piece, lp) in enumerate(zip(pieces, lps)):
                            tokens.append(piece)
                            token_lps.append(None if i == 0 else lp)
                            offsets.append(offset)
                            offset += len(piece)
                    for piece in answers.tokenize(gen):
                        tokens.append(piece)
                        token_lps.append(answers.LP_GENERATED)
                        offsets.append(offset)
                        offset += len(piece)
                    lp_obj = {
                        "tokens": tokens,
                        "token_logprobs": token_lps,
                        "top_logprobs": [None if lp is None else {t: lp}
                                         for t, lp in zip(tokens, token_lps)],
                        "text_offset": offsets,
                    }
                choices.append({"index": index, "text": (p + gen) if echo else gen,
                                "logprobs": lp_obj, "finish_reason": finish})
            ident, created = f"cmpl-sim{next(self._ids)}", int(time.time())
            head = {"id": ident, "object": "text_completion", "created": created, "model": model_field}
            usage = {"prompt_tokens": n_in_total, "completion_tokens": n_out_total,
                     "total_tokens": n_in_total + n_out_total}
            if stream:
                chunks = [dict(head, choices=[dict(c, finish_reason=None)]) for c in choices]
                chunks += [dict(head, choices=[{"index": c["index"], "text": "", "logprobs": None,
                                                "finish_reason": c["finish_reason"]}]) for c in choices]
                return self._sse(chunks)
            return self._json(dict(head, choices=choices, usage=usage))

        return sum(len(p) for p in prompts), make

    def _sse(self, chunks: list[dict]) -> Reply:
        body = b"".join(b"data: " + _dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        return Reply(200, body, "text/event-stream")


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

    async def start(self) -> "SimServer":
        # A short shutdown_timeout (0 would mean none): stopping cuts requests still waiting out
        # their latency at once.
        runner = web.AppRunner(make_app(self._app), access_log=None, logger=QUIET, handler_cancellation=True, shutdown_timeout=0.05)
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

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            await asyncio.wait_for(runner.cleanup(), 5.0)
        except asyncio.TimeoutError:
            pass
        await asyncio.sleep(0)  # let cancelled requests settle the stats

    async def __aenter__(self) -> "SimServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def reset_stats(self) -> None:
        self.stats.reset()
