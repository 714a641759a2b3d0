"""The one typed event stream the engine reports through.

Frozen, past-tense facts. The headless renderer prints them, the run log records them and the
Textual app folds them into its state; none of them is a command. Per-sample events are cheap
(plain slots, no copies of prompts or answers) because there is one per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Union


@dataclass(frozen=True, slots=True)
class RunStarted:
    work_dir: str
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    title: str = ""


@dataclass(frozen=True, slots=True)
class SimulatorStarted:
    url: str


@dataclass(frozen=True, slots=True)
class DatasetPlanned:
    """A model×dataset is part of this run; `completed`/`failed` count work kept from earlier runs."""

    model: str
    dataset: str
    total: int
    shards: int
    completed: int = 0
    failed: int = 0
    status: str = "pending"  # pending | done (already inferred earlier) | scored (already scored earlier)
    note: str = ""


@dataclass(frozen=True, slots=True)
class DatasetStarted:
    model: str
    dataset: str
    total: int
    remaining: int


@dataclass(frozen=True, slots=True)
class SampleFinished:
    model: str
    dataset: str
    shard: int
    index: int


@dataclass(frozen=True, slots=True)
class SampleFailed:
    model: str
    dataset: str
    shard: int
    index: int
    error: dict[str, Any]  # {"type", "status", "message", "attempts"}


@dataclass(frozen=True, slots=True)
class ShardStatusChanged:
    model: str
    dataset: str
    shard: int
    shards: int
    status: str  # pending | running | done | fail
    total: int
    completed: int
    failed: int
    error: str = ""


@dataclass(frozen=True, slots=True)
class DatasetInferred:
    """Every shard ended; `status` is done (predictions file written) or fail."""

    model: str
    dataset: str
    status: str
    completed: int
    failed: int
    predictions_file: str = ""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    at: float  # wall-clock time of the last beat in infer_heartbeat


@dataclass(frozen=True, slots=True)
class DatasetScored:
    model: str
    dataset: str
    metric: str
    score: float | None
    error: str = ""
    result_file: str = ""


@dataclass(frozen=True, slots=True)
class WatchSkipped:
    pairs: tuple[tuple[str, str], ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Notice:
    """Something a user should read that is none of the above (e.g. a dataset started over)."""

    message: str
    level: str = "info"  # info | warning | error


@dataclass(frozen=True, slots=True)
class RunFinished:
    exit_code: int
    interrupted: bool
    summary_files: dict[str, str] = field(default_factory=dict)
    leaderboard: Any = None  # evaltui.scoring summary table
    elapsed: float = 0.0


Event = Union[
    RunStarted,
    SimulatorStarted,
    DatasetPlanned,
    DatasetStarted,
    SampleFinished,
    SampleFailed,
    ShardStatusChanged,
    DatasetInferred,
    Heartbeat,
    DatasetScored,
    WatchSkipped,
    Notice,
    RunFinished,
]

Sink = Callable[[Event], None]
