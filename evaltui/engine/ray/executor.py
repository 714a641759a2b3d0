"""`executor = "ray"`: a session's units answered by Ray actors, its code_exec programs run as Ray tasks.

The driver (this process) joins the cluster when a session starts — `--ray-address`, else
RAY_ADDRESS, else a Ray instance of its own on this machine — and keeps everything else to
itself: the work dir is written here only, so the nodes need no shared filesystem. What a
model's units need on a node is in model.py and actor.py; Ray itself is imported only
once the executor is used, so a missing Ray is one line (`start`), not a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from evaltui.engine.ray.connect import RayUnavailable, address_from, connect
from evaltui.engine.stream import events as ev
from evaltui.engine.unit.answer import Answerer
from evaltui.plan import ModelConfig, Plan

if TYPE_CHECKING:
    from evaltui.scoring.code.code_exec import CodeRunner


class RayExecutor:
    def __init__(self, plan: Plan, address: str | None = None):
        self.plan = plan
        self.address = address_from(address)

    @property
    def run_code(self) -> CodeRunner:
        return _run_code_on_ray

    async def start(self) -> str | None:
        """Join the cluster (unless this process has); why it cannot, in one line.

        A Ray instance of the run's own (no address) is started from the loop's thread, which
        it then dies with (see ray_connect.py): the command line joins before the loop starts."""
        try:
            if self.address is None:
                connect(None, hide=self.plan.key_variables())
            else:
                await anyio.to_thread.run_sync(connect, self.address)
        except RayUnavailable as e:
            return f"executor ray: {e}"
        return None

    async def answerer(self, model: ModelConfig, urls: Sequence[str], stack: AsyncExitStack, emit: ev.Sink) -> Answerer:
        from evaltui.engine.ray.model import RayModel, actors_for

        return RayModel(self.plan, model, urls, emit, actors_for(self.plan, model))


def _run_code_on_ray(
    jobs: Sequence[tuple[str, Any]], *, timeout: float, memory_mb: int, workers: int, tmp_root: str | None = None
) -> list[tuple[str | None, str]]:
    """ray_code.run_code_on_ray, imported when code is first scored (Ray is imported with it)."""
    from evaltui.engine.ray.code import run_code_on_ray

    return run_code_on_ray(jobs, timeout=timeout, memory_mb=memory_mb, workers=workers, tmp_root=tmp_root)
