"""The engine on a thread and event loop of its own, driven from the app through a blocking portal.

The engine is the run's source (engine/stream/source.py): a Runner, or the Follower of `evaltui watch`.

Textual owns the main thread's loop; the engine keeps its own so a busy repaint never delays a
request and a busy engine never freezes a key press. Commands cross over as portal calls that
return concurrent futures; events come back only through the runner's sink (a deque append).
The thread also lives as long as the session, which the bundled simulator needs: it is tied to
the thread that started it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager

from anyio.from_thread import BlockingPortal, start_blocking_portal

from evaltui.engine.stream.source import RunSource


class EngineThread:
    def __init__(self, runner: RunSource):
        self.runner = runner
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self.jobs: list[Future[int]] = []

    def _started(self) -> BlockingPortal:
        if self._portal is None:
            self._portal_cm = start_blocking_portal(name="evaltui-engine")
            self._portal = self._portal_cm.__enter__()
        return self._portal

    def run(self) -> Future[int]:
        job = self._started().start_task_soon(self.runner.run)
        self.jobs.append(job)
        return job

    def retry(self, pairs: Sequence[tuple[str, str]]) -> Future[int]:
        job = self._started().start_task_soon(self.runner.retry, list(pairs))
        self.jobs.append(job)
        return job

    @property
    def busy(self) -> bool:
        return any(not job.done() for job in self.jobs)

    def cancel(self) -> None:
        if self._portal is not None:
            self._portal.call(self.runner.cancel)

    def close(self, timeout: float = 60.0) -> None:
        """Cancel what still runs, wait for it to put its work away, stop the simulator a retry
        would have reused (from the thread that started it), stop the thread."""
        if self._portal is None or self._portal_cm is None:
            return
        if self.busy:
            self.cancel()
            for job in self.jobs:
                # how a job ended was already reported as events; here we only wait for it
                with contextlib.suppress(Exception):
                    job.result(timeout=timeout)
        self._portal.call(self.runner.close)
        self._portal_cm.__exit__(None, None, None)
        self._portal = self._portal_cm = None
