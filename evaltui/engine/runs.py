"""One model×dataset's work in this run and its shards: what resume planning makes, the worker
pool works through and the ending closes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from evaltui.engine.checkpoint import Checkpoint
from evaltui.engine.events import PairStatus
from evaltui.plan import DatasetConfig


def shard_ranges(total: int, shards: int) -> list[range]:
    return [range(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


@dataclass(eq=False)
class ShardRun:
    shard: int
    indices: range
    checkpoint: Checkpoint
    completed: int = 0
    failed: int = 0
    outstanding: int = 0  # samples of this shard not yet finished in this run
    last_write: float = 0.0
    status: PairStatus | None = None  # DONE | FAIL once finished

    @property
    def total(self) -> int:
        return len(self.indices)


@dataclass(eq=False)
class DatasetRun:
    cfg: DatasetConfig
    total: int
    version: str
    shards: list[ShardRun]
    done: set[int]  # indices finished successfully in earlier runs
    todo: Iterator[tuple[ShardRun, int, dict[str, Any] | str]] | None = None
    remaining: int = 0  # samples not finished in this run (queued + in flight)
    started: bool = False
    loaded: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False  # DatasetInferred is out: its predictions (if any) are written
