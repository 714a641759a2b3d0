"""The one typed event stream the engine reports through.

Frozen, past-tense facts. The headless renderer prints them, the run log records them and the
Textual app folds them into its state; none of them is a command. Consumers narrow them with
`match` (`case ev.SampleFailed(model=m, sample_index=i, error=err): ...`), never by equality.

They are NamedTuples rather than frozen dataclasses because there is one per request: measured
here, building a four-field NamedTuple costs ~0.9 µs against ~1.4 µs for a frozen slotted
dataclass, and defining them costs a few ms of import instead of ~20. No field is named like a
tuple method (`index`, `count`), and no default is mutable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from evaltui.latency import LatencyProfile
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.stats import Interval

#: A model×dataset, by their abbrs: what the run's rows, scores, retries and files are keyed by.
Pair = tuple[str, str]


class PairStatus(str, Enum):
    """Where a model×dataset stands. A `str`, so `status == "fail"` and JSON output keep working;
    shard status files only ever hold the first four."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAIL = "fail"
    SCORING = "scoring"
    SCORED = "scored"
    ERROR = "error"
    SKIPPED = "skipped"
    STOPPED = "stopped"  # was running when the run was interrupted (Ctrl-C, or killed: watched); running it again resumes it

    def __str__(self) -> str:  # f-strings print the value, as for a plain str (3.11 changed this)
        return self.value


class SampleError(NamedTuple):
    """Why one sample failed for good, as a user reads it in the failures pane and failures.jsonl."""

    type: str  # its kind (failure.ErrorKind's value; read back as written: an older or newer evaltui's may be another)
    status: int | None  # the HTTP status, when there was a reply
    message: str
    attempts: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SampleError:
        """From a checkpoint entry's `error` object (written by this engine, read back leniently)."""
        status = d.get("status")
        return cls(str(d.get("type", "")), status if isinstance(status, int) else None, str(d.get("message", "")), int(d.get("attempts") or 0))


# The metrics of a scored pair besides its main one (`pass@10` next to `pass@1`), in order.
Metrics = tuple[tuple[str, "float | None"], ...]
#: A grouped benchmark's parts (MMLU's subjects), each with its metrics, in the parts' order.
Parts = tuple[tuple[str, Metrics], ...]
#: Each metric's standard error and 95 % interval (scoring/stats), by metric.
Intervals = tuple[tuple[str, "Interval"], ...]


class RunStarted(NamedTuple):
    work_dir: str
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    title: str = ""
    began_at: float | None = None  # wall-clock time the run began, when that was before now (a follower's)


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
    status: PairStatus = PairStatus.PENDING  # or DONE (inferred earlier), SCORED (scored earlier)
    metric: str = ""  # with SCORED: the score kept from the earlier run
    score: float | None = None
    extra: Metrics = ()  # with SCORED: its other metrics
    parts: Parts = ()  # with SCORED: a grouped benchmark's parts
    intervals: Intervals = ()  # with SCORED: its metrics' uncertainty


class DatasetStarted(NamedTuple):
    model: str
    dataset: str
    total: int
    remaining: int
    joined: bool = False  # a follower joined it under way: what is done was done before it looked, not resumed


class SampleFinished(NamedTuple):
    """One (sample, epoch) answered; counts are of those."""

    model: str
    dataset: str
    shard: int
    sample_index: int
    epoch: int = 0


class TurnAnswered(NamedTuple):
    """A conversation's request answered and checkpointed, before its next one is sent (its last
    is the unit's SampleFinished): the requests a conversation dataset sends, counted live."""

    model: str
    dataset: str
    shard: int
    sample_index: int
    turn: int  # the request's number, from 0
    epoch: int = 0


class SampleFailed(NamedTuple):
    model: str
    dataset: str
    shard: int
    sample_index: int
    error: SampleError
    epoch: int = 0


class SampleRetried(NamedTuple):
    """A (sample, epoch) whose request retries were spent is tried again as a whole (retry_on_error)."""

    model: str
    dataset: str
    shard: int
    sample_index: int
    attempt: int  # the try now starting: 2, 3, ...
    error: SampleError  # why the try before it failed
    epoch: int = 0


class ShardStatusChanged(NamedTuple):
    model: str
    dataset: str
    shard: int
    shards: int
    status: PairStatus  # PENDING | RUNNING | DONE | FAIL, as in the shard's status file
    total: int
    completed: int
    failed: int
    error: str = ""


class DatasetInferred(NamedTuple):
    """Every shard ended; `status` is DONE (predictions file written) or FAIL."""

    model: str
    dataset: str
    status: PairStatus
    completed: int
    failed: int
    predictions_file: str = ""
    error: str = ""  # why it failed, when it did
    total: int = 0  # its samples, when said (a follower's: the files may hold fewer than completed + failed)


class ReplicaLoad(NamedTuple):
    """One replica of a model, as its ModelLoad reports it."""

    url: str
    state: str  # up | ejected | probing
    in_flight: int  # attempts out at it now
    limit: int  # what it may have in flight (max_workers_per_url, or its adaptive limit)
    attempts: int  # attempts it answered or failed, so far
    errors: int  # of those, the ones without a 2xx reply


class ModelLoad(NamedTuple):
    """A model's inference at work, about once a second (counters polled, not one per request)."""

    model: str
    in_flight: int  # requests in flight now
    max_workers: int
    retries: int  # attempts beyond each request's first, so far in this run
    samples: int  # (sample, epoch) units answered (or failed for good) so far in this run
    limit: int = 0  # requests it may have in flight now (adaptive: the limit found; 0: max_workers)
    replicas: tuple[ReplicaLoad, ...] = ()  # with several urls, or adaptive concurrency
    tokens: int = 0  # tokens its answered requests used, so far (with tokens_per_minute)
    profile: LatencyProfile | None = None  # its answered requests' latency profile so far in this run (a copy: never changed)
    cost: float | None = None  # what its tokens cost so far in this run (a priced model's)
    usage: tuple[tuple[str, int, int, float], ...] = ()  # a priced model's (dataset, prompt tokens, completion tokens, cost) so far in this run


class ReplicaStateChanged(NamedTuple):
    """A replica of a model was ejected (failures in a row, or a failed health check), is being
    probed, or is back up."""

    model: str
    url: str
    state: str  # up | ejected | probing
    reason: str = ""  # ejected: the last error, or what the health check said
    back_off: float = 0.0  # ejected: seconds before it is probed
    failed_probes: int = 0  # ejected: health checks failed in a row since it was ejected


class ReplicasDown(NamedTuple):
    """Every replica of a model is out: its requests wait up to `wait` seconds for one to come back."""

    model: str
    wait: float
    reason: str  # each replica and why it is out


class Heartbeat(NamedTuple):
    at: float  # wall-clock time of the last beat in infer_heartbeat


class DatasetScoring(NamedTuple):
    """The watch-scorer began scoring this pair."""

    model: str
    dataset: str


class DatasetScored(NamedTuple):
    model: str
    dataset: str
    metric: str
    score: float | None
    error: str = ""
    result_file: str = ""
    extra: Metrics = ()  # its other metrics (pass_at_k of several k)
    parts: Parts = ()  # a grouped benchmark's parts, each with its metrics
    intervals: Intervals = ()  # each metric's standard error and 95 % interval (none under two samples)


class PairJudged(NamedTuple):
    """A judged pair's judging so far: sent when it begins, about once a second while its judge
    works (counters read, never one event per verdict: a judge answering hundreds a second must
    not cost a repaint each), and when it ends (`ended`). Counted in verdicts, one per request to
    the judge: one per answered (sample, epoch), two for mt_bench (its turns) and pairwise (its orders)."""

    model: str
    dataset: str
    judge: str  # the judge model's abbr
    judged: int  # verdicts that stand, those kept from earlier runs included
    answered: int  # verdicts the pair's answers need (its answered units' requests to the judge)
    failed: int = 0  # of those, the ones the judge gave no grade for in this run (errors of class judge)
    ended: bool = False  # the judging of the pair is over (the pair is scored next)


class ScoringSkipped(NamedTuple):
    pairs: tuple[Pair, ...]
    reason: str


class RetryStarted(NamedTuple):
    """A retry of these pairs' failed samples began (their earlier failures no longer stand)."""

    pairs: tuple[Pair, ...]


class Notice(NamedTuple):
    """Something a user should read that is none of the above (e.g. a dataset started over)."""

    message: str
    level: str = "info"  # info | warning | error
    short: str = ""  # what a one-line toast says, when the message is longer (the message is cut where this is empty)


NO_FILES: Mapping[str, str] = MappingProxyType({})


class RunFinished(NamedTuple):
    exit_code: int
    interrupted: bool
    summary_files: Mapping[str, str] = NO_FILES  # extension -> path
    leaderboard: Leaderboard | None = None
    elapsed: float = 0.0


Event = (
    RunStarted
    | SimulatorStarted
    | DatasetPlanned
    | DatasetStarted
    | SampleFinished
    | SampleFailed
    | SampleRetried
    | TurnAnswered
    | ShardStatusChanged
    | DatasetInferred
    | ModelLoad
    | ReplicaStateChanged
    | ReplicasDown
    | Heartbeat
    | DatasetScoring
    | DatasetScored
    | PairJudged
    | ScoringSkipped
    | RetryStarted
    | Notice
    | RunFinished
)

Sink = Callable[[Event], None]
