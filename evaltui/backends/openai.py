"""OpenAI-compatible `/v1/chat/completions` and `/v1/completions` (vLLM, SGLang, LightLLM's chat API, ...).

A reasoning model's thinking that its server sends beside the answer (`message.reasoning_content`,
streamed as `delta.reasoning_content`; `reasoning` on some servers) is never part of the answer:
it goes to the request's Trace, for the per-sample log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from yarl import URL

from evaltui.backends.base import Backend, BackendError, Streamed
from evaltui.backends.loglikelihood import NoLogprobs, completion_payload, completion_sum
from evaltui.backends.params import Settings, epoch_seed, max_new_tokens
from evaltui.backends.replies import Unparseable, count_tokens, ppl_from_logprobs
from evaltui.backends.sse import Stream, StreamUnparseable
from evaltui.backends.trace import NO_TRACE, Trace, Untraced
from evaltui.conversation import Conversation
from evaltui.conversation.tools import NotToolCalls, answer_of
from evaltui.failure import ErrorKind

MAX_CHAT_STOPS = 4  # stop sequences a chat request carries: the first four

# LightLLM-style keys that are not OpenAI sampling parameters.
_RENAMED = {"max_new_tokens", "do_sample"}


def base_url(url: str) -> str:
    """`http://host:8000/v1` (or its path, `/v1`) from that or from a full endpoint URL someone pasted."""
    url = url.rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def sampling_params(kwargs: dict[str, Any]) -> dict[str, Any]:
    """generation_kwargs in OpenAI terms: max_new_tokens→max_tokens (an OpenAI-style max_tokens
    is kept when there is no max_new_tokens), do_sample=false→temperature 0."""
    out = {k: v for k, v in kwargs.items() if k not in _RENAMED and not (k == "ignore_eos" and v is False)}
    out["max_tokens"] = int(kwargs.get("max_new_tokens", kwargs.get("max_tokens", 1024)))
    if "temperature" not in out:
        out["temperature"] = 1.0 if kwargs.get("do_sample") else 0.0
    return out


class _OpenAIBackend(Backend):
    endpoint = ""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._params = sampling_params(self.cfg.generation_kwargs)
        self._by_settings: dict[str, dict[str, Any]] = {}  # a dataset's settings → its parameters
        self._model = self.cfg.model or self.cfg.abbr

    def usage(self, data: Any) -> tuple[int, int] | None:
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict):
            return None
        return count_tokens(usage.get("prompt_tokens")), count_tokens(usage.get("completion_tokens"))

    def _sampling(self, epoch: int, settings: Settings | None = None) -> dict[str, Any]:
        """The sampling parameters of one epoch (with a dataset's settings over the model's):
        OpenAI's `seed` set from epoch 1 on."""
        params = self._params if not settings else self._with(settings)
        return params if not epoch else {**params, "seed": epoch_seed(params, epoch)}

    def _with(self, settings: Settings) -> dict[str, Any]:
        key = repr(sorted(settings.items()))
        params = self._by_settings.get(key)
        if params is None:
            params = self._by_settings[key] = sampling_params(self.merged(settings))
        return params

    def _cost(self, text: str, settings: Settings | None) -> int:
        return self.cost(text, max_new_tokens(self.merged(settings)) if settings else None)

    def _endpoint_url(self, url: str) -> URL:
        u = URL(url)  # the query (e.g. Azure's ?api-version=...) stays after the endpoint's path
        return u.with_path(base_url(u.path) + self.endpoint).with_query(u.query)

    def _health_url(self, url: str) -> URL:
        """`GET /v1/models` of an OpenAI-style server; an Azure deployment
        (`…/openai/deployments/NAME`) lists its models at `…/openai/models`."""
        u = URL(url)
        base = base_url(u.path)
        azure = base.rfind("/openai/deployments/")
        if azure >= 0:
            return u.with_path(base[:azure] + "/openai/models").with_query(u.query)
        return u.with_path(base + "/models").with_query(u.query)


def _first_choice(data: Any) -> Any:
    """choices[0], or why the reply has none (`"choices": []`, a content filter's way of refusing)."""
    if not isinstance(data, dict):
        raise Unparseable("the reply is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Unparseable("the reply has no choices")
    return choices[0]


def _chat_content(data: Any) -> str:
    """The reply's text; its tool calls, when it makes some, as the answer (a JSON list of
    {name, arguments}: conversation/tools.py) — no tool is run."""
    return _message_text(_first_choice(data)["message"])


#: Where servers put a reasoning model's thinking beside the answer's content (vLLM, SGLang and
#: DeepSeek: `reasoning_content`; vLLM's newer releases and others: `reasoning`).
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _traced_chat(trace: Trace) -> Callable[[Any], str]:
    """`_chat_content` that also keeps the message's reasoning in `trace` (for the per-sample log;
    never in the answer): only a traced request looks for it."""

    def parse(data: Any) -> str:
        message = _first_choice(data)["message"]
        text = _message_text(message)
        thought = message.get(REASONING_FIELDS[0]) or message.get(REASONING_FIELDS[1])
        if thought and isinstance(thought, str):
            trace.think(thought)
        return text

    return parse


def _message_text(message: Any) -> str:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if calls:
        if not isinstance(calls, list):
            raise Unparseable("message.tool_calls is not a list")
        try:
            return answer_of(calls)
        except NotToolCalls as e:
            raise Unparseable(f"message.tool_calls: {e}") from None
    content = message["content"]
    if content is None:
        return ""
    if not isinstance(content, str):
        raise Unparseable("message.content is not text")
    return content


def _completion_text(data: Any) -> str:
    text = _first_choice(data)["text"]
    if not isinstance(text, str):
        raise Unparseable("choices[0].text is not text")
    return text


class _ChunkStream(Stream):
    """OpenAI's streamed chunks: `choices[0]` carries the text, a last chunk the `usage`
    (asked for with stream_options.include_usage), `data: [DONE]` ends it."""

    def take(self, obj: Any) -> str:
        if not isinstance(obj, dict):
            raise StreamUnparseable("an event is not a JSON object")
        error = obj.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamUnparseable(f"the server sent an error in the stream: {str(message)[:500]}")
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = count_tokens(usage.get("prompt_tokens")), count_tokens(usage.get("completion_tokens"))
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        if choices[0].get("finish_reason"):
            self.finished = True
        text = self.text(choices[0])
        return text if isinstance(text, str) else ""

    def text(self, choice: dict[str, Any]) -> Any:
        raise NotImplementedError


class _ChatStream(_ChunkStream):
    """A chat's chunks; the thinking streamed beside the answer goes to `trace` once the answer is whole."""

    def __init__(self, clock: Callable[[], float], trace: Untraced = NO_TRACE) -> None:
        super().__init__(clock)
        self.trace = trace

    def answer(self) -> str:
        text = super().answer()
        if self.thinking:
            self.trace.think(self.reasoning())
        return text

    def text(self, choice: dict[str, Any]) -> Any:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return None
        thought = delta.get(REASONING_FIELDS[0]) or delta.get(REASONING_FIELDS[1])  # the thinking, kept apart
        if thought and isinstance(thought, str):
            self.thinking.append(thought)
            self.thought = True
        return delta.get("content")


class _CompletionStream(_ChunkStream):
    def text(self, choice: dict[str, Any]) -> Any:
        return choice.get("text")


STREAMING = {"stream": True, "stream_options": {"include_usage": True}}  # a model's `stream = true`: the usage comes last


class OpenAIChatBackend(_OpenAIBackend):
    endpoint = "/chat/completions"

    def payload(self, prompt: str, system: str = "", *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        return {"model": self._model, "messages": messages, **self._chat_sampling(epoch, settings)}

    def _chat_sampling(self, epoch: int, settings: Settings | None) -> dict[str, Any]:
        params = self._sampling(epoch, settings)
        stop = params.get("stop")
        if isinstance(stop, list) and len(stop) > MAX_CHAT_STOPS:  # OpenAI's limit; lm-eval's chat client sends as many
            params = {**params, "stop": stop[:MAX_CHAT_STOPS]}
        return {**params, **STREAMING} if self.cfg.stream else params

    async def generate(
        self, prompt: str, system: str = "", *, epoch: int = 0, trace: Trace | None = None, settings: Settings | None = None, join: str = "\n\n"
    ) -> str:
        payload = self.payload(prompt, system, epoch=epoch, settings=settings)
        parse, stream = self._chat_parsers(trace)
        return await self._post(payload, parse, self._cost(f"{system}\n{prompt}" if system else prompt, settings), trace, stream)

    def conversation_payload(self, conversation: Conversation, *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        """The conversation's messages as they are, and its tools when it offers some."""
        body = {"model": self._model, "messages": conversation.chat_messages(), **self._chat_sampling(epoch, settings)}
        if conversation.tools:
            body["tools"] = list(conversation.tools)
        return body

    async def converse(
        self, conversation: Conversation, *, epoch: int = 0, trace: Trace | None = None, settings: Settings | None = None, join: str = "\n\n"
    ) -> str:
        payload = self.conversation_payload(conversation, epoch=epoch, settings=settings)
        text = "\n".join(m.content for m in conversation.messages)
        parse, stream = self._chat_parsers(trace)
        return await self._post(payload, parse, self._cost(text, settings), trace, stream)

    def _chat_parsers(self, trace: Trace | None) -> tuple[Callable[[Any], str], Streamed | None]:
        """How a reply is read (whole, and streamed when the model streams): a traced request's
        also keep the server's reasoning in `trace`; an untraced one does not look for it."""
        if trace is None:
            return _chat_content, _ChatStream if self.cfg.stream else None
        return _traced_chat(trace), partial(_ChatStream, trace=trace) if self.cfg.stream else None


class LightLLMChatBackend(OpenAIChatBackend):
    """LightLLM's OpenAI-compatible chat API (type lightllm-chat): the chat protocol, LightLLM's
    `/health` beside its `/v1` as the health check."""

    def _health_url(self, url: str) -> URL:
        u = URL(url)
        base = base_url(u.path)
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        return u.with_path(root + "/health").with_query(None)


class OpenAICompletionsBackend(_OpenAIBackend):
    endpoint = "/completions"
    computes_ppl = True

    def payload(self, prompt: str, system: str = "", *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        text = f"{system}{join}{prompt}" if system else prompt
        return {"model": self._model, "prompt": text, **self._sampling(epoch, settings), **(STREAMING if self.cfg.stream else {})}

    async def generate(
        self, prompt: str, system: str = "", *, epoch: int = 0, trace: Trace | None = None, settings: Settings | None = None, join: str = "\n\n"
    ) -> str:
        payload = self.payload(prompt, system, epoch=epoch, settings=settings, join=join)
        stream = _CompletionStream if self.cfg.stream else None
        return await self._post(payload, _completion_text, self._cost(payload["prompt"], settings), trace, stream)

    async def ppl(self, text: str, *, trace: Trace | None = None) -> float:
        payload = {**self._params, "model": self._model, "prompt": text, "echo": True, "logprobs": 1, "max_tokens": 1}

        def parse(data: Any) -> float:
            choice = _first_choice(data)
            lp = choice.get("logprobs")
            if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
                raise BackendError(
                    ErrorKind.CONFIG, "the reply has no echoed prompt logprobs: the server must support echo=true with logprobs"
                )
            values = lp["token_logprobs"]
            offsets = lp.get("text_offset")
            if isinstance(offsets, list) and len(offsets) == len(values):
                # Offsets tell prompt tokens from the one generated token that follows them.
                start = offsets[0] if offsets else 0
                values = [v for v, off in zip(values, offsets, strict=False) if off - start < len(text)]
            elif len(choice.get("text", "")) > len(text):
                values = values[:-1]
            return ppl_from_logprobs([float(v) for v in values if v is not None])

        return await self._post(payload, parse, self.cost(text, 1), trace)

    def ll_payloads(self, context: str, continuations: Sequence[str]) -> list[dict[str, Any]]:
        return [completion_payload(self._model, context, c) for c in continuations]

    async def loglikelihoods(self, context: str, continuations: Sequence[str], *, trace: Trace | None = None) -> list[float]:
        out = []
        for continuation in continuations:
            def parse(data: Any, continuation: str = continuation) -> float:
                try:
                    return completion_sum(_first_choice(data), context, continuation)
                except NoLogprobs as e:
                    raise BackendError(ErrorKind.CONFIG, str(e)) from None

            out.append(await self._post(completion_payload(self._model, context, continuation), parse, self.cost(context + continuation, 1), trace))
        return out
