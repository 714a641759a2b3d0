"""The one typed event stream the engine reports through.

Frozen, past-tense facts. The headless renderer prints them, the run log records them and the
Textual app folds them into its state; none of them is a command. They are NamedTuples rather
than dataclasses because there is one per request and one start-up per run: a NamedTuple is
built in a fraction of the time, and defining these thirteen costs 3 ms of import instead of 18.
Consumers dispatch on `type(event)`, never on equality.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple, Union

if TYPE_CHECKING:
    from evaltui.scoring.leaderboard import Leaderboard


class PairStatus(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAIL = "fail"
    SCORING = "scoring"
    SCORED = "scored"
    ERROR = "error"
    SKIPPED = "skipped"


class SampleError(NamedTuple):
    type: str
    status: int | None
    message: str
    attempts: int


class RunStarted(NamedTuple):
    work_dir: str
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    title: str = ""


class SimulatorStarted(NamedTuple):
    url: str


class DatasetPlanned(NamedTuple):
    """A model×dataset is part of this run; `completed`/`failed` count work kept from earlier runs."""

    model: str
    dataset: str
    total: int
    shards: int
    completed: int = 0
    failed: int = 0
    status: str = "pending"  # pending | done (already inferred earlier) | scored (already scored earlier)


class DatasetStarted(NamedTuple):
    model: str
    dataset: str
    total: int
    remaining: int


class SampleFinished(NamedTuple):
    model: str
    dataset: str
    shard: int
    sample_index: int


class SampleFailed(NamedTuple):
    model: str
    dataset: str
    shard: int
    sample_index: int
    error: SampleError


class ShardStatusChanged(NamedTuple):
    model: str
    dataset: str
    shard: int
    shards: int
    status: str  # pending | running | done | fail
    total: int
    completed: int
    failed: int
    error: str = ""


class DatasetInferred(NamedTuple):
    """Every shard ended; `status` is done (predictions file written) or fail."""

    model: str
    dataset: str
    status: str
    completed: int
    failed: int
    predictions_file: str = ""
    error: str = ""  # why it failed, when it did


class Heartbeat(NamedTuple):
    at: float  # wall-clock time of the last beat in infer_heartbeat


class DatasetScored(NamedTuple):
    model: str
    dataset: str
    metric: str
    score: float | None
    error: str = ""
    result_file: str = ""


class DatasetScoring(NamedTuple):
    model: str
    dataset: str


class ModelLoad(NamedTuple):
    model: str
    in_flight: int
    max_workers: int
    retries: int
    requests: int


class RetryStarted(NamedTuple):
    pairs: tuple[tuple[str, str], ...]


class WatchSkipped(NamedTuple):
    pairs: tuple[tuple[str, str], ...]
    reason: str


class Notice(NamedTuple):
    """Something a user should read that is none of the above (e.g. a dataset started over)."""

    message: str
    level: str = "info"  # info | warning | error


class RunFinished(NamedTuple):
    exit_code: int
    interrupted: bool
    summary_files: Mapping[str, str] = {}
    leaderboard: Leaderboard | None = None
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
    DatasetScoring,
    ModelLoad,
    RetryStarted,
    WatchSkipped,
    Notice,
    RunFinished,
]

Sink = Callable[[Event], None]
