"""LightLLM's native `POST /generate`: the reply shape of `backends/lightllm.py`'s server; and
`POST /generate_stream`, its server-sent events: one per token, as LightLLM's own (each token
with `count_output_tokens` and `prompt_tokens` so far; the last `finished`).

With `prompt_logprobs` (LightLLM's --return_all_prompt_logprobs) the reply carries the prompt's
token ids and log-probabilities, which ppl-mode datasets are ranked by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaltui import fastjson
from evaltui.sim import answers
from evaltui.sim.call import BadRequest, Call, json_reply, max_tokens
from evaltui.sim.config import SimConfig
from evaltui.sim.http import Reply, event_stream


class LightLLMDialect:
    def __init__(self, config: SimConfig) -> None:
        self.config = config

    def generate_stream(self, call: Call, body: dict[str, Any]) -> tuple[int, Callable[[float], Reply]]:
        return self.generate(call, body, stream=True)

    def generate(self, call: Call, body: dict[str, Any], *, stream: bool = False) -> tuple[int, Callable[[float], Reply]]:
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise BadRequest('"inputs" must be a string')
        params = body.get("parameters") or {}
        if not isinstance(params, dict):
            raise BadRequest('"parameters" must be an object')
        call.prompt = inputs
        call.params = params
        max_new = max_tokens(params.get("max_new_tokens"), "max_new_tokens")
        cfg = self.config

        def make(accuracy: float) -> Reply:
            key = cfg.answer_key
            text, n_out, finish = answers.truncate(
                answers.generate(key, call.model, inputs, accuracy, answers.sampling_seed(params)), max_new)
            pieces, lps = answers.text_logprobs(key, call.model, inputs, accuracy) \
                if cfg.prompt_logprobs else (answers.tokenize(inputs), None)
            out: dict[str, Any] = {
                "generated_text": text if cfg.generated_text_as_string else [text],
                "count_output_tokens": n_out,
                "finish_reason": finish,
                "prompt_tokens": len(pieces) + 1,
            }
            call.tokens = len(pieces) + 1 + n_out
            if stream:
                return _token_events(answers.tokenize(text) or [""], len(pieces) + 1, finish)
            if lps is not None:
                ids = [answers.BOS_ID] + [answers.token_id(p) for p in pieces]
                out["prompt_token_ids"] = ids
                out["prompt_logprobs"] = [[ids[i], {str(ids[i + 1]): lps[i]}] for i in range(len(lps))]
            return json_reply(cfg, out)

        return len(inputs), make


def _token_events(tokens: list[str], prompt_tokens: int, finish: str) -> Reply:
    events = []
    for k, text in enumerate(tokens):
        last = k == len(tokens) - 1
        token = {"id": answers.token_id(text), "text": text, "logprob": None, "special": False, "count_output_tokens": k + 1, "prompt_tokens": prompt_tokens}
        events.append(fastjson.dumps({"token": token, "generated_text": None, "finished": last, "finish_reason": finish if last else None, "details": None}))
    return event_stream(events)
