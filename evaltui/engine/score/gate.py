"""Generations of each pair's scoring, so that a scoring a retry or a quit abandoned never puts
its result in place: a thread cannot be stopped, nor can a pair already sent to the scoring
process, so each may only rename its result into place under the generation it began with,
checked under a lock together with the rename."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from evaltui.engine.score.pairscore import Replace
from evaltui.engine.stream.events import Pair


class StaleResult(Exception):
    """The pair was retried, or the run stopped, while it was being scored."""


class ScoreGate:
    """Generations of each pair's scoring; a result is put in place only under a current one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: dict[Pair, int] = {}
        self._all = 0

    def token(self, pair: Pair) -> tuple[int, int]:
        return self._all, self._pairs.get(pair, 0)

    def current(self, pair: Pair, token: tuple[int, int]) -> bool:
        return self.token(pair) == token

    def check(self, pair: Pair, token: tuple[int, int]) -> None:
        """StaleResult unless `token` is current: a scoring about to begin that need not."""
        if not self.current(pair, token):
            raise StaleResult(f"{pair[0]}/{pair[1]}: retried or stopped before it was scored")

    def invalidate(self, pair: Pair) -> None:
        """A retry of `pair` begins: any scoring of it now running is stale."""
        with self._lock:
            self._pairs[pair] = self._pairs.get(pair, 0) + 1

    def invalidate_all(self) -> None:
        """The run stops: scorings still running in threads must not write afterwards."""
        with self._lock:
            self._all += 1

    def replacer(self, pair: Pair, token: tuple[int, int]) -> Replace:
        """An `os.replace` that refuses once the token is stale; the check and the rename hold
        the lock together, so an invalidation comes entirely before a rename or after it (and a
        retry deletes the result after it invalidates)."""

        def replace(tmp: str, path: Path) -> None:
            with self._lock:
                if not self.current(pair, token):
                    raise StaleResult(f"{pair[0]}/{pair[1]}: scored from predictions that are no longer current")
                os.replace(tmp, path)

        return replace
