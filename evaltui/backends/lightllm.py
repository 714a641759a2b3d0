"""LightLLM's native `POST /generate` (also TGI-style servers that answer with a string)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yarl import URL

from evaltui.backends.base import Backend, BackendError
from evaltui.backends.loglikelihood import NoLogprobs, lightllm_ids, lightllm_sum, split_whitespace
from evaltui.backends.params import Settings, epoch_seed, max_new_tokens
from evaltui.backends.replies import Unparseable, count_tokens, ppl_from_logprobs
from evaltui.backends.sse import Stream, StreamUnparseable
from evaltui.backends.trace import Trace
from evaltui.failure import ErrorKind

PPL_FLAG_HINT = (
    "the reply has no prompt_token_ids/prompt_logprobs: start the LightLLM server with "
    "--return_all_prompt_logprobs to evaluate ppl-mode datasets"
)


def _generated_text(data: Any) -> str:
    text = data["generated_text"]
    if isinstance(text, list):
        if not text:
            raise Unparseable("generated_text is an empty list")
        text = text[0]
    if text is None:
        raise Unparseable("generated_text is null")
    if not isinstance(text, str):
        raise Unparseable(f"generated_text is {type(text).__name__}, not text")
    return text


def _prompt_logprobs(data: Any) -> float:
    if not isinstance(data, dict) or "prompt_token_ids" not in data or "prompt_logprobs" not in data:
        raise BackendError(ErrorKind.CONFIG, PPL_FLAG_HINT)
    ids = data["prompt_token_ids"][1:]
    items = [item[1] for item in data["prompt_logprobs"]]
    return ppl_from_logprobs([float(lp[str(tok)]) for tok, lp in zip(ids, items, strict=False)])


def lightllm_params(kwargs: dict[str, Any]) -> dict[str, Any]:
    """generation_kwargs in LightLLM's words: `stop` as its `stop_sequences`, a temperature of 0
    as greedy decoding (`do_sample = false`; LightLLM refuses a temperature of 0), another as
    sampling at it."""
    out = dict(kwargs)
    if "stop" in out:
        out["stop_sequences"] = out.pop("stop")
    if "temperature" in out:
        if out["temperature"] == 0:
            del out["temperature"]
            out["do_sample"] = False
        else:
            out["do_sample"] = True
    return out


class TokenStream(Stream):
    """`/generate_stream`'s events: `{"token": {"text", "special", …}, "finished", …}` a token
    each — LightLLM's token also counts `prompt_tokens` and `count_output_tokens`; TGI ends with
    an event whose `generated_text` is the whole answer. A special token (TGI's end of text) is
    no text."""

    def take(self, obj: Any) -> str:
        if not isinstance(obj, dict):
            raise StreamUnparseable("an event is not a JSON object")
        if obj.get("error"):
            raise StreamUnparseable(f"the server sent an error in the stream: {str(obj['error'])[:500]}")
        if obj.get("finished") is True or isinstance(obj.get("generated_text"), str):
            self.done = True  # (this event's own token is text all the same)
        token = obj.get("token")
        if not isinstance(token, dict):
            return ""
        if "count_output_tokens" in token or "prompt_tokens" in token:
            self.usage = count_tokens(token.get("prompt_tokens")), count_tokens(token.get("count_output_tokens"))
        text = token.get("text")
        return text if isinstance(text, str) and not token.get("special") else ""


class LightLLMBackend(Backend):
    computes_ppl = True
    url_form = "the full /generate URL"
    api_path = "/generate"
    needs_model = False  # /generate serves one model

    @classmethod
    def samples(cls, kwargs: Mapping[str, Any]) -> bool:
        """LightLLM decodes greedily unless `do_sample = true`, whatever the temperature."""
        return kwargs.get("do_sample") is True

    def _endpoint_url(self, url: str) -> URL:
        return URL(url)

    def _stream_url(self, endpoint: URL) -> URL:
        """LightLLM's (and TGI's) streaming endpoint beside the /generate the plan names."""
        path = endpoint.path
        return endpoint.with_path(path + "_stream") if path.endswith("/generate") else endpoint

    def _health_url(self, url: str) -> URL:
        """LightLLM's `GET /health`, beside the `/generate` the plan names."""
        u = URL(url)
        path = u.path[: -len("/generate")] if u.path.endswith("/generate") else u.path.rstrip("/")
        return u.with_path(path + "/health").with_query(None)

    def usage(self, data: Any) -> tuple[int, int] | None:
        """LightLLM's `prompt_tokens` and `count_output_tokens`, when the reply has them."""
        if not isinstance(data, dict) or ("prompt_tokens" not in data and "count_output_tokens" not in data):
            return None
        return count_tokens(data.get("prompt_tokens")), count_tokens(data.get("count_output_tokens"))

    def payload(self, prompt: str, system: str = "", *, epoch: int = 0, settings: Settings | None = None, join: str = "\n\n") -> dict[str, Any]:
        params = lightllm_params(self.merged(settings)) if settings else self.cfg.generation_kwargs
        if epoch and "seed" in params:
            # Only when the plan names a seed: LightLLM's own /generate takes none and refuses
            # parameters it does not know; TGI-style servers that sample by seed take one.
            params = {**params, "seed": epoch_seed(params, epoch)}
        return {"inputs": f"{system}{join}{prompt}" if system else prompt, "parameters": params}

    async def generate(
        self, prompt: str, system: str = "", *, epoch: int = 0, trace: Trace | None = None, settings: Settings | None = None, join: str = "\n\n"
    ) -> str:
        payload = self.payload(prompt, system, epoch=epoch, settings=settings, join=join)
        new_tokens = max_new_tokens(payload["parameters"]) if settings else None
        stream = TokenStream if self.cfg.stream else None
        return await self._post(payload, _generated_text, self.cost(payload["inputs"], new_tokens), trace, stream)

    async def ppl(self, text: str, *, trace: Trace | None = None) -> float:
        # Only the prompt's log-probs matter: ask for one new token instead of max_new_tokens.
        params = {**self.cfg.generation_kwargs, "max_new_tokens": 1}
        return await self._post({"inputs": text, "parameters": params}, _prompt_logprobs, self.cost(text, 1), trace)

    def ll_payloads(self, context: str, continuations: Sequence[str]) -> list[dict[str, Any]]:
        params = {**self.cfg.generation_kwargs, "max_new_tokens": 1}
        head, _ = split_whitespace(context, "")
        return [{"inputs": text, "parameters": params} for text in (head, *(context + c for c in continuations))]

    async def loglikelihoods(self, context: str, continuations: Sequence[str], *, trace: Trace | None = None) -> list[float]:
        """The context alone first (its token count: where the continuations' tokens begin),
        then each context + continuation."""
        first, *rest = self.ll_payloads(context, continuations)

        def ids(data: Any) -> tuple[list[int], list[Any]]:
            try:
                return lightllm_ids(data, PPL_FLAG_HINT)
            except NoLogprobs as e:
                raise BackendError(ErrorKind.CONFIG, str(e)) from None

        context_tokens = len((await self._post(first, ids, self.cost(first["inputs"], 1), trace))[0])

        def summed(data: Any) -> float:
            return lightllm_sum(*ids(data), context_tokens)

        return [await self._post(payload, summed, self.cost(payload["inputs"], 1), trace) for payload in rest]
