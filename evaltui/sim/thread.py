"""A SimServer on its own event loop in a daemon thread.

For synchronous tests and for callers whose own loop is busy: the client
under test runs in the main thread while the server keeps answering, and the
stats are copied on the server's loop so the reader never sees a half-update.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from evaltui.sim.config import SimConfig
from evaltui.sim.server import SimServer
from evaltui.sim.stats import SimStats

T = TypeVar("T")


class SimThread:
    """`with SimThread(cfg) as sim: httpx.get(sim.url + "/health")`."""

    def __init__(self, config: SimConfig | None = None, *, timeout: float = 10.0) -> None:
        self.config = config if config is not None else SimConfig()
        self.server = SimServer(self.config)
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> SimThread:
        if self._thread is not None:
            raise RuntimeError("SimThread already started")
        self._thread = threading.Thread(target=self._run, name="evaltui-sim", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._timeout):
            raise TimeoutError("simulated server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported to the thread that called start()
            self._error = exc
            loop.close()
            self._ready.set()
            return
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
        finally:
            loop.close()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(self._timeout)
        self._loop = None

    def call(self, fn: Callable[[SimServer], T]) -> T:
        """Run `fn(server)` on the server's loop and return its result."""
        loop = self._loop
        if loop is None or not loop.is_running():
            return fn(self.server)
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn(self.server))
            except BaseException as exc:
                fut.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed meanwhile: nothing runs on it any more
            return fn(self.server)
        return fut.result(self._timeout)

    @property
    def stats(self) -> SimStats:
        """A snapshot: later requests do not change the object returned."""
        return self.call(lambda s: s.stats.snapshot())

    def reset_stats(self) -> None:
        self.call(lambda s: s.stats.reset())

    def __enter__(self) -> SimThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
