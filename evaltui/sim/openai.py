"""OpenAI's `/v1/chat/completions` and `/v1/completions`: what `backends/openai.py` talks to.

Both answer whole or, with `stream`, as server-sent events: a chunk per token (the first one
after the model's latency, the others its token_latency apart), the finish, the usage when
`stream_options.include_usage` asks for it, then `[DONE]` — as vLLM and SGLang stream. A model
profile's `reasoning` goes beside each chat answer's content (`reasoning_content`, or its
`reasoning_field`), streamed a delta per token before the answer's. Completions echo the prompt's
log-probabilities with `echo` and `logprobs`, which ppl-mode datasets are ranked by.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from evaltui import fastjson
from evaltui.conversation.tools import NotToolCalls, parse_calls
from evaltui.sim import answers
from evaltui.sim.call import BadRequest, Call, json_reply, max_tokens
from evaltui.sim.config import SimConfig
from evaltui.sim.http import Reply, event_stream

_PROMPT_FIELDS = ("model", "messages", "prompt")
_dumps = fastjson.dumps


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


def _tool_calls(text: str, ids: Iterator[int]) -> list[dict[str, Any]] | None:
    """An answer that is a list of tool calls (conversation/tools.py) as OpenAI's `tool_calls`,
    each call's arguments a JSON text; None for an answer in words."""
    try:
        calls = parse_calls(text)
    except NotToolCalls:
        return None
    return [
        {"id": f"call_sim{next(ids)}", "type": "function", "function": {"name": c["name"], "arguments": _dumps(c["arguments"]).decode()}}
        for c in calls
    ]


class OpenAIDialect:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self._ids = itertools.count(1)  # of chat and completion replies alike, as a server counts them

    def _params(self, call: Call, body: dict[str, Any]) -> int | None:
        call.params = {k: v for k, v in body.items() if k not in _PROMPT_FIELDS}
        value = body.get("max_tokens")
        if value is None:
            return max_tokens(body.get("max_completion_tokens"), "max_completion_tokens")
        return max_tokens(value, "max_tokens")

    def chat(self, call: Call, body: dict[str, Any]) -> tuple[int, Callable[[float], Reply]]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest('"messages" must be a non-empty list')
        texts, users = [], []
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise BadRequest('each message must be an object with a "role"')
            text = _content_text(m.get("content"))
            texts.append(text)
            if m["role"] == "user":
                users.append(text)
        if not users:
            raise BadRequest('"messages" must contain a message with role "user"')
        tools = body.get("tools")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
            raise BadRequest('"tools" must be a list of objects')
        call.prompt = users[-1]
        user = answers.asked(self.config.answer_key, users)
        limit = self._params(call, body)
        stream = bool(body.get("stream"))
        include_usage = isinstance(body.get("stream_options"), dict) and \
            bool(body["stream_options"].get("include_usage"))
        model_field = body.get("model") if isinstance(body.get("model"), str) else call.model
        all_text = "\n".join(texts)

        profile = self.config.profile(call.model)
        thought, field_name = profile.reasoning, profile.reasoning_field

        def make(accuracy: float) -> Reply:
            text, n_out, finish = answers.truncate(
                answers.generate(self.config.answer_key, call.model, user, accuracy, answers.sampling_seed(body)), limit)
            message: dict[str, Any] = {"role": "assistant", "content": text, **({field_name: thought} if thought else {})}
            if tools and not stream and (calls := _tool_calls(text, self._ids)) is not None:
                message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
            n_in = len(answers.tokenize(all_text))
            usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
            call.tokens = n_in + n_out
            ident, created = f"chatcmpl-sim{next(self._ids)}", int(time.time())
            if stream:
                head = {"id": ident, "object": "chat.completion.chunk", "created": created,
                        "model": model_field}
                deltas = [{field_name: piece} for piece in answers.tokenize(thought)]  # the thinking streams first, as vLLM's
                deltas += [{"content": piece} for piece in answers.tokenize(text) or [""]]
                chunks: list[dict[str, Any]] = [
                    dict(head, choices=[{"index": 0, "delta": {"role": "assistant", **delta} if not k else delta,
                                         "logprobs": None, "finish_reason": None}])
                    for k, delta in enumerate(deltas)
                ]
                chunks.append(dict(head, choices=[{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]))
                if include_usage:
                    chunks.append(dict(head, choices=[], usage=usage))
                return self._sse(chunks)
            return json_reply(self.config, {
                "id": ident, "object": "chat.completion", "created": created, "model": model_field,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            })

        return len(all_text), make

    def completions(self, call: Call, body: dict[str, Any]) -> tuple[int, Callable[[float], Reply]]:
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            raise BadRequest('"prompt" must be a string or a non-empty list of strings')
        call.prompt = prompts[0]
        limit = self._params(call, body)
        echo = bool(body.get("echo"))
        logprobs = body.get("logprobs")
        want_logprobs = logprobs is not None and logprobs is not False
        stream = bool(body.get("stream"))
        include_usage = isinstance(body.get("stream_options"), dict) and bool(body["stream_options"].get("include_usage"))
        model_field = body.get("model") if isinstance(body.get("model"), str) else call.model
        cfg = self.config

        def make(accuracy: float) -> Reply:
            key = cfg.answer_key
            choices = []
            n_in_total = n_out_total = 0
            for index, p in enumerate(prompts):
                gen, n_out, finish = answers.truncate(
                    answers.generate(key, call.model, p, accuracy, answers.sampling_seed(body)), limit)
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
                        for i, (piece, lp) in enumerate(zip(pieces, lps, strict=False)):
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
                                         for t, lp in zip(tokens, token_lps, strict=False)],
                        "text_offset": offsets,
                    }
                choices.append({"index": index, "text": (p + gen) if echo else gen,
                                "logprobs": lp_obj, "finish_reason": finish})
            ident, created = f"cmpl-sim{next(self._ids)}", int(time.time())
            head = {"id": ident, "object": "text_completion", "created": created, "model": model_field}
            usage = {"prompt_tokens": n_in_total, "completion_tokens": n_out_total,
                     "total_tokens": n_in_total + n_out_total}
            call.tokens = n_in_total + n_out_total
            if stream:
                chunks = [dict(head, choices=[dict(c, text=piece, logprobs=None, finish_reason=None)])
                          for c in choices for piece in answers.tokenize(str(c["text"])) or [""]]
                chunks += [dict(head, choices=[{"index": c["index"], "text": "", "logprobs": None,
                                                "finish_reason": c["finish_reason"]}]) for c in choices]
                if include_usage:
                    chunks.append(dict(head, choices=[], usage=usage))
                return self._sse(chunks)
            return json_reply(cfg, dict(head, choices=choices, usage=usage))

        return sum(len(p) for p in prompts), make

    def _sse(self, chunks: list[dict[str, Any]]) -> Reply:
        return event_stream([*map(_dumps, chunks), b"[DONE]"])
