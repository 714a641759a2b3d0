"""The heartbeat (`infer_heartbeat`): the thread a run beats with, when it last beat, and the one
rule of when a beat is stale.

A run writes the file every `heartbeat_interval` from a thread of its own (a thread rather than
a task, so the beat keeps its rhythm while the event loop is busy with thousands of replies), as
OpenCompass does: proof of life for whoever reads the work dir. The scorer gives up on inference,
`evaltui watch` says a run has ended and the strip says STALE once the last beat is older than
`heartbeat_timeout`; a free lock means "nobody runs here" only beside a beat that missed two
(lockstate.py). `stale` is that rule, for all of them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING

from evaltui.fsutil import Unreadable

if TYPE_CHECKING:
    from evaltui.engine.disk.workdir import WorkDir

BEAT_SLACK = 2.0  # s beyond two missed beats: a loaded machine writes late


def stale(age: float, timeout: float) -> bool:
    """Whether a beat `age` seconds old says the run is gone: it is older than `timeout`."""
    return age > timeout


def missed_beats(interval: float) -> float:
    """The age at which a run beating every `interval` s has missed two beats (and BEAT_SLACK more)."""
    return 2 * interval + BEAT_SLACK


def last_beat(workdir: WorkDir) -> float | None:
    """When infer_heartbeat last beat (wall clock), as the scorer reads it: ISO time, a naive one
    (OpenCompass's) as local time, a garbled one dated by the file's mtime; None without one."""
    now = time.time()
    try:
        age = workdir.heartbeat_age(now)
    except Unreadable:
        raise  # a heartbeat that is no file: said, not taken for a run that stopped
    except OSError:
        return None
    return None if age is None else now - age


class HeartbeatThread:
    """Beats every `interval` s while it runs (a `with` block: the run's session)."""

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
