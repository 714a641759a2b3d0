"""A work dir as `evaltui watch` reads it: what each kind of work dir says, in one vocabulary.

The follower (follower.py) turns what a view reads into the engine's events; a view knows where a
kind of work dir keeps things and how to read them: evaltui's own (evaltui_view.py) and
OpenCompass's (opencompass.py). Views only ever read: stat, list, open for reading.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from evaltui.engine.stream.events import Intervals, Metrics, Pair, PairStatus, SampleError

if TYPE_CHECKING:
    from evaltui.engine.disk.details import PairDetails
    from evaltui.plan import ModelConfig
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.stats import Interval

StatKey = tuple[int, int, int]  # inode, size, mtime (ns): what tells that a file changed


def stat_key(path: Path) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class ShardStatus(NamedTuple):
    """One shard's status file; counts the writer did not give are None."""

    status: PairStatus  # pending | running | done | fail
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    error: str = ""


class Score(NamedTuple):
    metric: str  # the main one
    value: float | None
    error: str = ""
    extra: Metrics = ()  # the other metrics (a reducer's pass@k of several k)
    intervals: Intervals = ()  # every metric's uncertainty


class Outcome(NamedTuple):
    """One sample ended: answered (error None) or failed for good — or, with `turn`, one request
    of a conversation answered before its last (the unit goes on)."""

    sample: int  # its index
    error: SampleError | None = None
    epoch: int = 0  # of a dataset run for several epochs
    turn: int = -1  # a conversation's request answered (its number from 0); -1: the unit ended


class Tally(Protocol):
    """The samples of one shard as they end."""

    def read(self, *, settle: bool = False) -> list[Outcome] | None:
        """The samples that ended since the last call (all of them the first time); None when the
        files were replaced or cut, and the count must start over. `settle`: the shard has ended,
        so its files no longer grow: read them now, put no reading off."""
        ...


class JudgeSpec(NamedTuple):
    """A judged pair's judging, as the plan says it: who judges, how many verdicts each answered
    unit needs (mt_bench's two turns, pairwise's two orders), and where the verdicts are written."""

    judge: str  # the judge model's abbr
    per_answer: int
    verdicts: Path


class PairSpec(NamedTuple):
    model: str
    dataset: str
    shards: int


class View(Protocol):
    root: Path
    kind: str  # "evaltui" | "OpenCompass": said to the user

    @property
    def title(self) -> str: ...

    @property
    def heartbeat_timeout(self) -> float: ...

    @property
    def log_interval(self) -> float:
        """Seconds between the progress lines of `evaltui watch --no-ui`."""
        ...

    @property
    def models(self) -> dict[str, ModelConfig]:
        """Each model's settings, when the work dir says (an evaltui plan snapshot)."""
        ...

    @property
    def expects(self) -> str:
        """What would give it pairs to follow, said when it has none."""
        ...

    @property
    def epochs(self) -> dict[str, int]:
        """Each dataset's epochs, when the work dir says (an evaltui plan snapshot)."""
        ...

    @property
    def problem(self) -> str:
        """Why the files that define the pairs cannot be read, if they cannot."""
        ...

    def refresh(self) -> bool:
        """Look again at what defines the pairs (a plan, folder listings); True when they changed."""
        ...

    def pairs(self) -> list[PairSpec]: ...

    def status_key(self, model: str, dataset: str, shard: int, shards: int) -> object:
        """Changes whenever what `read_status` would say may have changed (cheap: stats only)."""
        ...

    def read_status(self, model: str, dataset: str, shard: int, shards: int) -> ShardStatus | None:
        """None when there is no status, or it is torn or not a status at all."""
        ...

    def tally(self, model: str, dataset: str, shard: int, shards: int) -> Tally: ...

    def predictions_file(self, model: str, dataset: str) -> Path: ...

    def judging(self, model: str, dataset: str) -> JudgeSpec | None:
        """The pair's judging, when a judge grades its answers (None: not judged, or not said)."""
        ...

    def result_file(self, model: str, dataset: str) -> Path: ...

    def score(self, model: str, dataset: str) -> Score | None: ...

    def holder(self) -> int | None:
        """The pid of the process running in the work dir, 0 for none, None when it cannot be told."""
        ...

    def heartbeat_key(self) -> object: ...

    def heartbeat_at(self) -> float | None: ...

    def activity_at(self) -> float | None:
        """The last time the files show the run doing something (its heartbeat, or the newest file
        written): how a run is told alive where no lock says (`holder` None)."""
        ...

    def began_at(self) -> float | None:
        """When the run last began (wall clock), if the files say."""
        ...

    def ended_at(self) -> float | None:
        """When the run last wrote there (wall clock), if the files say: where its time ends."""
        ...

    def ended(self) -> bool:
        """The files say the run ended (its last words, or the last file it writes, came last)."""
        ...

    def summary_files(self) -> dict[str, str]:
        """The newest leaderboard files, by extension."""
        ...

    def leaderboard(
        self,
        scores: Mapping[Pair, float | None],
        extra: Mapping[tuple[str, str, str], float | None] | None = None,
        intervals: Mapping[tuple[str, str, str], Interval] | None = None,
    ) -> Leaderboard:
        """The leaderboard of these scores (main metrics by pair; `extra`: the others, and
        `intervals` every metric's uncertainty, by (model, dataset, metric))."""
        ...

    def details(self, model: str, dataset: str, status: PairStatus) -> PairDetails: ...
