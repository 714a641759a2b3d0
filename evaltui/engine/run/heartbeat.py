"""The heartbeat thread: proof of life for the watch-scorer, as in OpenCompass.

A thread rather than a task so the beat keeps its rhythm even while the event loop is busy
with thousands of replies; the scorer only needs to know the inference process still exists.
"""

from __future__ import annotations

import contextlib
import threading

from evaltui.engine.disk.workdir import WorkDir


class HeartbeatThread:
    def __init__(self, workdir: WorkDir, interval: float):
        self.workdir = workdir
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evaltui-heartbeat", daemon=True)

    def start(self) -> None:
        self.workdir.beat()  # the first beat exists before anyone looks for it
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(OSError):  # a full disk must not kill the beat; the next may succeed
                self.workdir.beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> HeartbeatThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
