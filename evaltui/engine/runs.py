"""One model×dataset's work in this run and its shards: what resume planning makes, the worker
pool works through and the ending closes.

The unit of work is a (sample, epoch): a dataset of N samples run for K epochs has N × K of
them, and every count here (total, completed, failed, remaining) counts those. A unit's key in
the `done` set is `index * epochs + epoch` (the index itself for one epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from evaltui.engine.checkpoint import Checkpoint
from evaltui.engine.events import PairStatus
from evaltui.engine.sample import SampleTokens
from evaltui.plan import DatasetConfig


def shard_ranges(total: int, shards: int) -> list[range]:
    return [range(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


def shard_indices(indices: Sequence[int], shards: int) -> list[Sequence[int]]:
    """The samples run (all of them, or a selection) split into `shards` runs of consecutive ones."""
    return [indices[r.start : r.stop] for r in shard_ranges(len(indices), shards)]


Job = tuple["ShardRun", int, int, "dict[str, Any] | str"]  # (shard, index, epoch, record or why it is unreadable)


@dataclass(eq=False)
class ShardRun:
    shard: int
    indices: Sequence[int]  # the samples of this shard (a range, but for a selection of them)
    checkpoint: Checkpoint
    completed: int = 0
    failed: int = 0
    outstanding: int = 0  # units of this shard not yet finished in this run
    last_write: float = 0.0
    status: PairStatus | None = None  # DONE | FAIL once finished
    epochs: int = 1
    in_flight: int = 0  # units handed to a worker and not yet counted as finished
    log: Checkpoint | None = None  # its per-sample log (samplelog.py), unless sample_log = false

    def open(self, defer: Callable[[Callable[[], None]], object]) -> None:
        """Its files, for appending: the log first, whose line of a unit goes out before the
        checkpoint's (a kill between them leaves a record of a request, never a unit done without one)."""
        if self.log is not None:
            self.log.open(defer=defer)
        self.checkpoint.open(defer=defer)

    def close(self) -> None:
        self.checkpoint.close()
        if self.log is not None:
            self.log.close()

    @property
    def total(self) -> int:
        return len(self.indices) * self.epochs


@dataclass(eq=False)
class DatasetRun:
    cfg: DatasetConfig
    total: int  # units: samples (selected) × epochs
    version: str
    shards: list[ShardRun]
    done: set[int]  # keys of the units finished successfully in earlier runs
    failed_before: set[int] = field(default_factory=set)  # keys of units that failed in an earlier run, none since answered
    records: int = 0  # the dataset's samples (its data file's records, up to limit)
    epochs: int = 1
    selection: Sequence[int] | None = None  # the indices run (sample_ids, --samples); None: all of them
    samples: str = ""  # the selection as written in status and result files (`3,17,40-60`); "": all
    tokens: SampleTokens | None = None  # token_limit's count per sample, when the dataset has one
    todo: Iterator[Job] | None = None
    remaining: int = 0  # units not finished in this run (queued + in flight)
    unsent: int = 0  # units left unsent by an early stop (too many failures)
    stopped_early: bool = False
    started: bool = False
    loaded: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False  # DatasetInferred is out: its predictions (if any) are written
