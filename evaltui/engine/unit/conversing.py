"""A conversation's requests through the backend, one after the other, each checkpointed.

Each request (a turn, a critique, a revision: conversation/script.py) is built from the record
and the answers before it, sent, and — all but the last — written as a turn line before the next
is sent (disk/checkpoint.py's turn lines, through the worker's `TurnLog.write`): a kill loses at most the request
in flight, and the unit sent again goes on from it. A request that fails fails the try; the
tries loop (tries.py) tries it again, the answers before it kept, each request with
retry_on_error tries of its own.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from evaltui.backends import Backend, Trace
from evaltui.conversation import Script, Turn
from evaltui.plan import DatasetConfig

#: (the request's number from 0, its turn line's fields) → once that line is on disk.
WriteTurn = Callable[[int, dict[str, Any]], Awaitable[None]]
_TURN = ("kind", "prompt", "answer")  # what the entry keeps of a request
_FACTS = ("usage", "took", "reasoning_content")  # what the per-sample log adds


class TurnLog:
    """A conversation unit's answered requests — those an earlier run checkpointed (`earlier`,
    turn lines read back), then this run's — as the entry keeps them (`turns`: kind, prompt,
    answer) and what the log says of each (`facts`: usage, took, the server's reasoning_content, and whether an earlier run
    answered it); `write` puts each one this run answers on disk (None: nowhere, as on Ray)."""

    def __init__(self, earlier: Sequence[dict[str, Any]] = (), write: WriteTurn | None = None):
        self.turns: list[dict[str, Any]] = [{k: line[k] for k in _TURN if k in line} for line in earlier]
        self.facts: list[dict[str, Any]] = [{**{k: line[k] for k in _FACTS if k in line}, "earlier": True} for line in earlier]
        self._write = write

    async def answered(self, number: int, turn: dict[str, Any], facts: dict[str, Any], *, last: bool) -> None:
        self.turns.append(turn)
        self.facts.append(facts)
        if self._write is not None and not last:
            await self._write(number, {**turn, **facts})


async def converse(backend: Backend, cfg: DatasetConfig, script: Script, epoch: int, log: TurnLog, trace: Trace | None) -> str:
    """The requests not answered yet, in order; the prediction evaluators score (Script.prediction)."""
    answers = [t["answer"] for t in log.turns]
    settings = cfg.generation_overrides() or None
    last = len(script) - 1
    for k in range(len(answers), len(script)):
        request = script.request(k, answers)
        tokens = (trace.prompt_tokens, trace.completion_tokens) if trace is not None else None
        started = time.monotonic()
        answer = await backend.converse(request.conversation, epoch=epoch, trace=trace, settings=settings, join=cfg.system_join)
        facts: dict[str, Any] = {"took": round(time.monotonic() - started, 4)}
        if trace is not None and tokens is not None and (trace.prompt_tokens, trace.completion_tokens) != tokens:
            facts["usage"] = {"prompt_tokens": trace.prompt_tokens - tokens[0], "completion_tokens": trace.completion_tokens - tokens[1]}
        if trace is not None and trace.reasoning is not None:  # each answer's own thinking, in its message
            facts["reasoning_content"], trace.reasoning = trace.reasoning, None
        answers.append(answer)
        await log.answered(k, Turn(request.kind, request.prompt, answer).as_dict(), facts, last=k == last)
    return script.prediction(answers)
