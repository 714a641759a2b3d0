"""A judged pair's answers on their way to its judge while the pair is being inferred.

The pool puts each answered unit's checkpoint line here once it is on disk (`put` never waits),
and a task of the session drains it into the judge (engine/judge/judging.py), so judging
overlaps inference instead of waiting for the whole dataset. The queue is bounded: when the
judge is slower than the model it grades, the lines it has no room for are left for the
judging at the end of the pair's inference, which reads them back from the predictions — a slow
judge never holds back a tested model, and what it holds is at most FEED_SIZE lines a pair.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

FEED_SIZE = 256  # checkpoint lines a pair's queue holds; more wait for the judging at the end


class Asked:
    """What the judge was asked of a pair while it was inferred: how many units, and those it
    gave no grade for (by sample, epoch, turn and the answer's hash) — not asked again in this
    run, as a unit of the judging at the end is not; a re-run asks them again."""

    def __init__(self) -> None:
        self.count = 0
        self.failed: set[tuple[int, int, int, str]] = set()


class PairFeed:
    """One pair's queue of answered units and the state of the task that drains it.

    `after`: an earlier feed of the same pair, closed but maybe still draining (a retry joined
    the session after its inference had ended): this one's drain waits for it, shares what it
    asked, and so one wait for this one's `done` covers both.
    """

    def __init__(self, after: PairFeed | None = None) -> None:
        self._send, self.receive = anyio.create_memory_object_stream[dict[str, Any]](FEED_SIZE)
        self.after = after
        self.asked: Asked = after.asked if after is not None else Asked()
        self.closed = False
        self.done = anyio.Event()  # its drain ended: every verdict it asked for is on disk

    def put(self, line: dict[str, Any]) -> None:
        """Queue an answered unit's line, or leave it to the judging at the end (a full queue, or
        a drain that stopped): never waits."""
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._send.send_nowait(line)

    def close(self) -> None:
        """No more lines come: the drain ends once it has judged those queued."""
        self.closed = True
        self._send.close()
