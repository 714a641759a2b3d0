"""One model×dataset's work in this run and its shards: what resume planning makes, the worker
pool works through and the ending closes.

The unit of work is a (sample, epoch): a dataset of N samples run for K epochs has N × K of
them, and every count here (total, completed, failed, remaining) counts those. A unit's key is
`disk/units.py`'s (`index * epochs + epoch`); which units earlier runs answered or
failed is a byte per key (UnitFlags), not a set of Python ints (~90 bytes each: 90 MB of a
resume's peak at 200,000 samples × 5 epochs).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from evaltui.engine.disk.checkpoint import Checkpoint
from evaltui.engine.disk.units import sample_keys, samples_keys
from evaltui.engine.stream.events import PairStatus
from evaltui.engine.unit.tries import Again, SampleTokens
from evaltui.plan import DatasetConfig


class UnitFlags:
    """A set of unit keys (0 ≤ key < size) as a byte each (1: in it), made from the bytes
    (`flags`, which hot loops index directly): `in`, `len`, and iteration in key order."""

    __slots__ = ("flags", "count")

    def __init__(self, size: int, flags: bytearray | None = None):
        self.flags = bytearray(size) if flags is None else flags
        self.count = 0 if flags is None else flags.count(1)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, int) and 0 <= key < len(self.flags) and self.flags[key] == 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        flags, at = self.flags, -1
        for _ in range(self.count):
            at = flags.find(1, at + 1)
            yield at

    def count_in(self, indices: Iterable[int], epochs: int) -> int:
        """How many units of these samples are in the set."""
        flags = self.flags
        if isinstance(indices, range) and indices.step == 1:
            keys = samples_keys(indices, epochs)
            return flags.count(1, keys.start, keys.stop)
        return sum(flags.count(1, (keys := sample_keys(i, epochs)).start, keys.stop) for i in indices)

    def whole_samples(self, epochs: int, others: UnitFlags | None = None) -> UnitFlags:
        """The samples (keyed by index) each of whose epochs is in this set or in `others`."""
        flags = self.flags
        if others is not None and others.count:  # the two ORed at once: a byte is 0 or 1
            joined = int.from_bytes(flags, "little") | int.from_bytes(others.flags, "little")
            flags = bytearray(joined.to_bytes(len(flags), "little"))
        if epochs > 1:
            whole = b"\x01" * epochs
            flags = bytearray(flags[k : k + epochs] == whole for k in range(0, len(flags), epochs))
        return UnitFlags(len(flags), flags if flags is not self.flags else bytearray(flags))


def shard_ranges(total: int, shards: int) -> list[range]:
    return [range(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


def shard_indices(indices: Sequence[int], shards: int) -> list[Sequence[int]]:
    """The samples run (all of them, or a selection) split into `shards` runs of consecutive ones."""
    return [indices[r.start : r.stop] for r in shard_ranges(len(indices), shards)]


#: A dataset of at most this many units (and a data file of at most SMALL_DATA_BYTES) has its
#: own file work — loading, opening its files, the merge and its last status — done on the
#: engine's loop; a larger one in a worker thread. See `where_it_fits`.
SMALL_UNITS = 64
SMALL_DATA_BYTES = 1 << 20

T = TypeVar("T")


def is_small(run: DatasetRun, data: Path) -> bool:
    """Whether the dataset's file work is done on the loop (where_it_fits): few units, a data file
    small enough to open (or parse, a .json array) in well under a millisecond, and checkpoints
    as small (other OSErrors: the open or the merge says what is wrong, from a thread)."""
    if run.total > SMALL_UNITS or run.cfg.benchmark:
        return False
    try:
        if os.stat(data).st_size > SMALL_DATA_BYTES:
            return False
    except OSError:  # opened in a thread, which says what is wrong with it
        return False
    # the merge reads every line its checkpoints hold: an earlier full run's (`limit` is not in
    # the fingerprint) can be megabytes behind a dataset of a few samples now
    held = 0
    for path in () if run.fresh else run.checkpoints:  # (a fresh pair's: none made yet, none looked for)
        try:
            held += os.stat(path).st_size
        except FileNotFoundError:  # a shard not begun
            continue
        except OSError:
            return False
    return held <= SMALL_DATA_BYTES


async def where_it_fits(small: bool, work: Callable[[], T]) -> T:
    """`work` (a dataset's file work) right here when the dataset is small, else in a thread.

    A thread hop is not free under the GIL: the result comes back through the loop's
    call_soon_threadsafe, and while the worker holds the GIL each syscall of the loop (a socket
    send, its epoll) waits for it to let go — the convoy effect. At thousands of datasets of a
    few samples the hops cost more than the work they carried: 2,000 × 3 on a RAM disk took 19 s
    with a hop for each load, open, merge and status, 10 s with those done on the loop (bench/
    datasets.py; 1.7 M futex calls against a few hundred). A small dataset's files are a few
    hundred bytes; a large one's merge reads every line, and goes to a thread as before.
    """
    if small:
        return work()
    return await anyio.to_thread.run_sync(work)


def start_shards(run: DatasetRun, defer: Callable[[Callable[[], None]], object], say: Callable[[ShardRun, str], None]) -> None:
    """Before any of the dataset's units is handed out (where_it_fits): each shard with units
    left opens its files (`defer`, the loop's call_soon: a turn's lines go out in one write) and,
    unless the dataset is small, says `running` (`say`: its status file). A small one says it a
    quarter second after its first unit went out (ending.running_soon): with the next datasets
    loaded early, a few hundred milliseconds before their turn, one that ends sooner writes `pending` and
    `done` only: a file fewer a dataset, and nothing a watcher polling every second or more
    would have seen."""
    for s in run.shards:
        if s.outstanding:
            s.open(defer=defer, keep=run.small)
            if not run.small:
                say(s, "running")


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

    def open(self, defer: Callable[[Callable[[], None]], object], *, keep: bool = False) -> None:
        """Its files, for appending: the log first, whose line of a unit goes out before the
        checkpoint's (a kill between them leaves a record of a request, never a unit done without
        one). `keep`: a small dataset's checkpoint is kept in memory too, for its merge."""
        if self.log is not None:
            self.log.open(defer=defer)
        self.checkpoint.open(defer=defer, keep=keep)

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
    done: UnitFlags  # keys of the units finished successfully in earlier runs
    failed_before: UnitFlags  # keys of units that failed in an earlier run, none since answered
    retried: int = 0  # of those, the units this run has finished (answered or failed again)
    records: int = 0  # the dataset's samples (its data file's records, up to limit)
    epochs: int = 1
    selection: Sequence[int] | None = None  # the indices run (sample_ids, --samples); None: all of them
    samples: str = ""  # the selection as written in status and result files (`3,17,40-60`); "": all
    checkpoints: list[Path] = field(default_factory=list)  # its shards' and any earlier layout's, as planned (the merge reads them)
    fresh: bool = False  # no file of it was there when it was planned (none of its checkpoints exist before it starts)
    urls: tuple[str, ...] = ()  # the model's urls its answers came from, earlier runs' included (status files)
    tokens: SampleTokens | None = None  # token_limit's count per sample, when the dataset has one
    # a conversation dataset's: the units earlier runs left unfinished, by key, with the requests
    # they had answered (disk/checkpoint.py's turn lines); taken as each unit is sent; None: not a conversation
    turns: dict[int, list[dict[str, Any]]] | None = None
    todo: Iterator[Job] | None = None
    remaining: int = 0  # units not finished in this run (queued + in flight)
    unsent: int = 0  # units left unsent by an early stop (too many failures)
    stopped_early: bool = False
    exhausted: bool = False  # every unit of its queue handed out (those sent back go after them)
    # units sent back for another try (retry_on_error), each with when it may go: (job + its Again, not before)
    again: deque[tuple[tuple[ShardRun, int, int, dict[str, Any] | str, Again], float]] = field(default_factory=deque)
    started: bool = False
    small: bool = False  # its file work is done on the loop (where_it_fits); decided as it loads
    sending: bool = False  # its first unit has been handed out
    loaded: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False  # DatasetInferred is out: its predictions (if any) are written
