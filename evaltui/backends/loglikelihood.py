"""A continuation's log-likelihood given its context, as lm-evaluation-harness 0.4.13 computes it.

lm-eval asks `loglikelihood(context, continuation)` — the sum of the log-probs of the
continuation's tokens, each given everything before it. It moves the context's trailing
whitespace to the front of the continuation (`_encode_pair`), sends context + continuation with
`echo`, `logprobs = 1`, `max_tokens = 1` and `temperature = 0` (`local-completions`), and sums the
echoed log-probs from the context's last token on, leaving out the one token generated.

The completions API says where each token starts (`text_offset`), so the continuation's tokens
are those that start at or after the (stripped) context's end. LightLLM's `/generate` gives token
ids only (`prompt_token_ids`, `prompt_logprobs` with `--return_all_prompt_logprobs`): the context
is sent alone first to learn how many tokens it is (the count lm-eval takes from its tokenizer),
then each context + continuation, whose log-probs are summed from that token on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evaltui.backends.replies import Unparseable


class NoLogprobs(Exception):
    """The reply carries no prompt log-probs: the server cannot do this (a setting, not a fault)."""


def split_whitespace(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's `_encode_pair`: the context's trailing whitespace belongs to the continuation."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


def completion_payload(model: str, context: str, continuation: str) -> dict[str, Any]:
    """What lm-eval's `local-completions` sends for one (context, continuation) pair."""
    return {"model": model, "prompt": context + continuation, "temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": True}


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Unparseable(f"a log-prob is not a finite number: {value!r}")
    return float(value)


def completion_sum(choice: Any, context: str, continuation: str) -> float:
    """The continuation's log-prob sum from one echoed completions choice."""
    lp = choice.get("logprobs") if isinstance(choice, dict) else None
    if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
        raise NoLogprobs("the reply has no echoed prompt logprobs: the server must support echo=true with logprobs (lm-eval's local-completions)")
    values: list[Any] = lp["token_logprobs"]
    offsets = lp.get("text_offset")
    if not (isinstance(offsets, list) and len(offsets) == len(values)):
        tokens = lp.get("tokens")
        if not (isinstance(tokens, list) and len(tokens) == len(values) and all(isinstance(t, str) for t in tokens)):
            raise Unparseable("the echoed logprobs have neither text_offset nor tokens to tell the continuation's tokens by")
        offsets, at = [], 0
        for t in tokens:
            offsets.append(at)
            at += len(t)
    head, tail = split_whitespace(context, continuation)
    start, end = (offsets[0] if offsets else 0), len(head) + len(tail)
    picked = [v for v, off in zip(values, offsets, strict=True) if len(head) <= off - start < end]
    if any(v is None for v in picked):
        raise Unparseable("a continuation token has no log-prob")
    return math.fsum(_number(v) for v in picked)


def lightllm_ids(data: Any, hint: str) -> tuple[list[int], list[Any]]:
    """(prompt token ids, prompt log-prob items) of a LightLLM reply."""
    if not isinstance(data, dict) or "prompt_token_ids" not in data or "prompt_logprobs" not in data:
        raise NoLogprobs(hint)
    ids, items = data["prompt_token_ids"], data["prompt_logprobs"]
    if not isinstance(ids, list) or not isinstance(items, list) or len(items) < len(ids) - 1:
        raise Unparseable("prompt_token_ids and prompt_logprobs do not match")
    return ids, items


def lightllm_sum(ids: Sequence[Any], items: Sequence[Any], context_tokens: int) -> float:
    """The log-prob sum of tokens `context_tokens`… of a LightLLM reply: item k is
    `[token_k, {token_k+1: logprob}]`, so token j's log-prob is in item j - 1."""
    total = []
    for j in range(max(context_tokens, 1), len(ids)):
        item = items[j - 1]
        try:
            total.append(_number(item[1][str(ids[j])]))
        except (IndexError, KeyError, TypeError):
            raise Unparseable(f"prompt_logprobs has no log-prob for token {j}") from None
    return math.fsum(total)
