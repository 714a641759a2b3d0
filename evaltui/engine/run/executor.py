"""Where a run's units are answered and its code_exec programs run: in this process, or on Ray.

`[run] executor = "local"` (the default) answers every model's units on the engine's own loop
and runs code_exec programs in a thread pool here. `"ray"` (ray/executor.py, imported only
then) sends them to a Ray cluster. Everything else — planning, the worker pools, the work
dir, the events — is the same engine either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Protocol

from evaltui.backends import make_backend, make_client
from evaltui.engine.stream import events as ev
from evaltui.engine.unit.answer import Answerer, ModelAnswerer
from evaltui.plan import ModelConfig, Plan

if TYPE_CHECKING:
    from evaltui.scoring.code.code_exec import CodeRunner


class Executor(Protocol):
    @property
    def run_code(self) -> CodeRunner | None:
        """What runs code_exec's programs (None: a thread pool here)."""

    async def start(self) -> str | None:
        """Before a session's first model: why it cannot run (one line), or None."""

    async def answerer(self, model: ModelConfig, urls: Sequence[str], stack: AsyncExitStack, emit: ev.Sink) -> Answerer:
        """What answers the model's units for the session (`stack` closes with it)."""


class LocalExecutor:
    run_code = None  # the scorer's own thread pool (scoring is imported once it is needed, not at start-up)

    async def start(self) -> str | None:
        return None

    async def answerer(self, model: ModelConfig, urls: Sequence[str], stack: AsyncExitStack, emit: ev.Sink) -> Answerer:
        client = await stack.enter_async_context(make_client(model, list(urls)))
        return ModelAnswerer(model, make_backend(model, client, urls=list(urls)), emit)


def make_executor(plan: Plan, ray_address: str | None = None) -> Executor:
    """The plan's executor; `ray_address`: the cluster to join (None: RAY_ADDRESS, else one started here)."""
    if plan.run.executor == "ray":
        from evaltui.engine.ray.executor import RayExecutor

        return RayExecutor(plan, ray_address)
    return LocalExecutor()
