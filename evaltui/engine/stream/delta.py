"""What one event changed, as `RunState.apply` says it: the terms a renderer repaints in.

The fold (state.py) is the one place that knows what an event means; a renderer merges the
deltas of the events it drained (`Changes`) and repaints what they name, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair

if TYPE_CHECKING:
    from evaltui.engine.stream.pair import PairState


class Delta(NamedTuple):
    """What one event changed, in the terms a renderer repaints in; `RunState.apply` returns it.

    A renderer that folds events in batches merges the deltas of a batch (`Changes`) and
    repaints what they name. Events that only move a pair's counters (one per sample) share one
    Delta per pair, so the hot path allocates nothing; so do those that add a failure, which is
    why `failures` counts them rather than holding them. A NamedTuple, not a frozen dataclass:
    the events that change a status (a few per dataset) and each new pair (two) make one, and a
    frozen dataclass's eleven `object.__setattr__` took 1.3 µs of it, a tuple's 0.3–0.6.
    """

    pairs: frozenset[Pair] = frozenset()  # the pairs whose row changed
    every_pair: bool = False  # every row may have changed: pairs planned, skipped or retried, the run began or ended
    statuses: bool = False  # a pair's status changed: which actions apply may differ
    scores: bool = False  # the leaderboard changed
    failures: int = 0  # how many were appended to `RunState.failures` (the newest there)
    failures_reset: bool = False  # `RunState.failures` was rebuilt (a pair planned, started or retried): show it anew
    live: bool | None = None  # True: a run or retry began; False: the run ended (`RunState.live`)
    retried: frozenset[Pair] = frozenset()  # the pairs a retry took up
    settled: frozenset[Pair] = frozenset()  # the pairs whose part in this session is over: inference failed, or scoring ended
    notices: tuple[ev.Notice, ...] = ()
    fleet: bool = False  # a model's replicas changed state, or all of them went down: the strip and the model's breakdown


NOTHING = Delta()


class Changes:
    """The deltas of a batch of events merged: what one repaint after them must cover."""

    __slots__ = ("failures", "failures_reset", "fleet", "live", "notices", "pairs", "scores", "statuses")

    def __init__(self, everything: bool = False) -> None:
        """`everything`: repaint it all, whatever the batch holds (a new theme)."""
        self.pairs: set[Pair] | None = None if everything else set()  # None: every pair
        self.statuses = self.scores = self.failures_reset = self.fleet = everything
        self.failures = 0
        self.live: bool | None = None  # that of the last delta that said
        self.notices: list[ev.Notice] = []

    def add(self, d: Delta) -> None:
        if d.every_pair:
            self.pairs = None
        elif self.pairs is not None:
            self.pairs |= d.pairs
        if d.statuses:
            self.statuses = True
        if d.scores:
            self.scores = True
        self.failures += d.failures
        if d.failures_reset:
            self.failures_reset = True
        if d.live is not None:
            self.live = d.live
        if d.notices:
            self.notices.extend(d.notices)
        if d.fleet:
            self.fleet = True


def follow(pairs: Mapping[Pair, PairState], kept: set[Pair], changed: set[Pair] | None, statuses: frozenset[ev.PairStatus]) -> set[Pair]:
    """`kept`, the pairs whose status is one of `statuses`, brought up to date from the pairs
    that changed (`changed`, a Changes' pairs; None: every pair): a renderer's tick finds the few
    running, or retryable, of thousands of pairs without looking at each. The set (a new one for None)."""
    if changed is None:
        return {key for key, p in pairs.items() if p.status in statuses}
    for key in changed:
        p = pairs.get(key)
        if p is not None and p.status in statuses:
            kept.add(key)
        else:
            kept.discard(key)
    return kept
