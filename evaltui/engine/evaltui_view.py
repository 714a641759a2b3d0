"""An evaltui work dir as `evaltui watch` reads it (SPEC §6): the plan snapshot, status files,
checkpoints, results, the heartbeat, the summary and whether the lock is held."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from evaltui import fastjson
from evaltui.engine.checkpoint import line_outcome
from evaltui.engine.details import PairDetails, read_pair_details
from evaltui.engine.events import PairStatus, SampleError
from evaltui.engine.lockstate import lock_holder
from evaltui.engine.tail import AppendedLines
from evaltui.engine.view import Outcome, PairSpec, Score, ShardStatus, StatKey, stat_key
from evaltui.engine.workdir import WorkDir
from evaltui.plan import ModelConfig, Plan, PlanError, read_snapshot

if TYPE_CHECKING:
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.summary import RunSummary

DEFAULT_HEARTBEAT_TIMEOUT = 60.0  # until the plan says (SPEC §3's defaults)
DEFAULT_LOG_INTERVAL = 30.0
_STATUSES = {s.value: s for s in (PairStatus.PENDING, PairStatus.RUNNING, PairStatus.DONE, PairStatus.FAIL)}


def newest_summary(folder: Path) -> dict[str, str]:
    """`summary_<stamp>.{txt,csv,md}` of the newest stamp in `folder`, by extension."""
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith("summary_") and e.is_file()]
    except OSError:
        return {}
    stems = sorted({n.rpartition(".")[0] for n in names})
    if not stems:
        return {}
    newest = stems[-1]
    return {n.rpartition(".")[2]: str(folder / n) for n in sorted(names) if n.rpartition(".")[0] == newest}


def last_beat(workdir: WorkDir) -> float | None:
    """When infer_heartbeat last beat (wall clock), as the watch-scorer reads it: ISO time, a
    naive one (OpenCompass's) as local time, a garbled one dated by the file's mtime."""
    now = time.time()
    try:
        age = workdir.heartbeat_age(now)
    except OSError:
        return None
    return None if age is None else now - age


class CheckpointTally:
    """A shard's checkpoint as it grows: one outcome per line, its error read only when it has one."""

    def __init__(self, path: Path):
        self._lines = AppendedLines(path)

    def read(self) -> list[Outcome] | None:
        lines = self._lines.read()
        if lines is None:
            return None
        out = []
        for line in lines:
            outcome = line_outcome(line)
            if outcome is not None:
                out.append(Outcome(outcome.sample, None if outcome.ok else _error_of(line), outcome.epoch))
        return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _error_of(line: bytes) -> SampleError:
    try:
        entry = fastjson.loads(line)
        return SampleError.from_dict(entry.get("error") or {})
    except (ValueError, AttributeError):
        return SampleError("internal", None, "unreadable checkpoint line", 0)


class EvaltuiView:
    kind = "evaltui"

    def __init__(self, root: Path):
        self.root = root
        self.workdir = WorkDir(root)
        self.plan: Plan | None = None
        self.problem = ""  # why plan.toml could not be read, if it could not
        self._plan_key: StatKey | None = None
        self._summary: RunSummary | None = None

    # -- what the plan says
    @property
    def title(self) -> str:
        return self.plan.title if self.plan is not None else ""

    @property
    def heartbeat_timeout(self) -> float:
        return self.plan.run.heartbeat_timeout if self.plan is not None else DEFAULT_HEARTBEAT_TIMEOUT

    @property
    def log_interval(self) -> float:
        return self.plan.run.log_interval if self.plan is not None else DEFAULT_LOG_INTERVAL

    @property
    def max_workers(self) -> dict[str, int]:
        return {m.abbr: m.max_workers for m in self.plan.models} if self.plan is not None else {}

    @property
    def models(self) -> dict[str, ModelConfig]:
        return {m.abbr: m for m in self.plan.models} if self.plan is not None else {}

    @property
    def epochs(self) -> dict[str, int]:
        plan = self.plan
        return {d.abbr: plan.epochs(d) for d in plan.datasets} if plan is not None else {}

    def refresh(self) -> bool:
        """Read plan.toml again when a run rewrote it: each run writes it as it begins, so True
        says a run began (with these pairs, or others)."""
        key = stat_key(self.workdir.plan_file)
        if key is None or key == self._plan_key:
            return False
        self._plan_key = key
        try:
            plan = read_snapshot(self.workdir.plan_file)
        except PlanError as e:
            self.problem = "; ".join(e.problems)
            return False
        self.problem = ""
        self.plan, self._summary = plan, None
        return True

    @staticmethod
    def pairs_of(plan: Plan) -> list[PairSpec]:
        return [PairSpec(m.abbr, d.abbr, d.shards) for m in plan.models for d in plan.datasets]

    def pairs(self) -> list[PairSpec]:
        return self.pairs_of(self.plan) if self.plan is not None else []

    # -- the files of a pair
    def status_key(self, model: str, dataset: str, shard: int, shards: int) -> StatKey | None:
        return stat_key(self.workdir.status_file(model, dataset, shard, shards))

    def read_status(self, model: str, dataset: str, shard: int, shards: int) -> ShardStatus | None:
        data = self.workdir.read_status(model, dataset, shard, shards)
        if data is None or data["status"] not in _STATUSES:
            return None
        return ShardStatus(_STATUSES[data["status"]], data.get("total", 0), data.get("completed", 0), data.get("failed", 0), str(data.get("error") or ""))

    def tally(self, model: str, dataset: str, shard: int, shards: int) -> CheckpointTally:
        return CheckpointTally(self.workdir.checkpoint_file(model, dataset, shard, shards))

    def predictions_file(self, model: str, dataset: str) -> Path:
        return self.workdir.predictions_file(model, dataset)

    def result_file(self, model: str, dataset: str) -> Path:
        return self.workdir.result_file(model, dataset)

    def score(self, model: str, dataset: str) -> Score | None:
        """The result's metrics as the run's reducer names them (`accuracy_at_least_3`; pass@1
        with pass@3 and pass@5 as its others), as the runner's DatasetScored says them."""
        from evaltui.scoring import Reduction

        if self.plan is None:
            return None
        try:
            result = self.workdir.read_result(model, dataset)
        except OSError:
            return None
        if result is None:
            return None
        ds = self.plan.dataset(dataset)
        metric, *others = Reduction.of(ds.evaluator, self.plan.epochs(ds)).metrics
        if "error" in result:
            return Score(metric, None, str(result["error"]))
        value = _number(result.get(metric))
        if value is None:
            return Score(metric, None, f"no {metric} in {self.result_file(model, dataset).name}")
        return Score(metric, value, "", tuple((name, _number(result.get(name))) for name in others))

    # -- the run as a whole
    def holder(self) -> int | None:
        return lock_holder(self.root / ".evaltui.lock")

    def heartbeat_key(self) -> StatKey | None:
        return stat_key(self.workdir.heartbeat_file)

    def heartbeat_at(self) -> float | None:
        return last_beat(self.workdir)

    def activity_at(self) -> float | None:
        return self.heartbeat_at()

    def began_at(self) -> float | None:
        """Each run writes its plan snapshot as it begins."""
        try:
            return os.stat(self.workdir.plan_file).st_mtime
        except OSError:
            return None

    def summary_files(self) -> dict[str, str]:
        return newest_summary(self.root / "summary")

    def leaderboard(
        self, scores: Mapping[tuple[str, str], float | None], extra: Mapping[tuple[str, str, str], float | None] | None = None
    ) -> Leaderboard:
        from evaltui.scoring.leaderboard import build_leaderboard
        from evaltui.scoring.summary import RunSummary

        if self.plan is None:
            return build_leaderboard([], [], {})
        if self._summary is None:
            self._summary = RunSummary(self.plan)
        return self._summary.leaderboard(scores, extra)

    def details(self, model: str, dataset: str, status: PairStatus) -> PairDetails:
        if self.plan is None:  # (no pairs without a plan: nothing asks)
            return PairDetails(model, dataset, status, [], [], {})
        return read_pair_details(self.workdir, self.plan, model, dataset, status)
