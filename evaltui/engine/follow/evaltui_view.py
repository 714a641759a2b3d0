"""An evaltui work dir as `evaltui watch` reads it (SPEC §6): the plan snapshot, status files,
checkpoints, results, the heartbeat, the summary and whether the lock is held."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from evaltui import fastjson
from evaltui.engine.disk.checkpoint import ANY_SIZE, line_outcome, turn_of
from evaltui.engine.disk.details import PairDetails, read_pair_details
from evaltui.engine.disk.heartbeat import last_beat
from evaltui.engine.disk.lockstate import local_filesystem, run_holder
from evaltui.engine.disk.runlog import ends_a_run
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.follow.tail import AppendedLines
from evaltui.engine.follow.view import JudgeSpec, Outcome, PairSpec, Score, ShardStatus, StatKey, stat_key
from evaltui.engine.stream.events import Pair, PairStatus, SampleError
from evaltui.failure import ErrorKind
from evaltui.fsutil import Unreadable, open_regular
from evaltui.plan import ModelConfig, Plan, PlanError, RunConfig, read_snapshot, select

if TYPE_CHECKING:
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.stats import Interval
    from evaltui.scoring.summary import RunSummary

_RUN_DEFAULTS = RunConfig()  # until the work dir's plan says: the schema's defaults (SPEC §3)
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


def _last_line(path: Path, tail: int = 4096) -> str:
    """The last complete line of a text file ("" when it cannot be read, or is longer than `tail`)."""
    try:
        with open_regular(path, ANY_SIZE) as f:
            start = max(0, f.seek(0, os.SEEK_END) - tail)
            f.seek(start)
            lines = f.read().split(b"\n")
    except OSError:
        return ""
    complete = lines[:-1]  # what follows the last newline is still being written
    if not complete or (start and len(complete) == 1):
        return ""
    return complete[-1].decode("utf-8", errors="replace")


class CheckpointTally:
    """A shard's checkpoint as it grows: one outcome per line, its error read only when it has one."""

    def __init__(self, path: Path):
        self._lines = AppendedLines(path)

    def read(self, *, settle: bool = False) -> list[Outcome] | None:
        pieces = self._lines.pieces()
        if pieces is None:
            return None
        out = []
        for lines in pieces:
            for line in lines:
                outcome = line_outcome(line)
                if outcome is not None:
                    out.append(Outcome(outcome.sample, None if outcome.ok else _error_of(line), outcome.epoch))
                elif (turn := turn_of(line)) is not None:  # a conversation's request answered: its unit goes on
                    out.append(Outcome(turn[0], None, turn[1], turn[2]))
        return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _error_of(line: bytes) -> SampleError:
    try:
        entry = fastjson.loads(line)
        return SampleError.from_dict(entry.get("error") or {})
    except (ValueError, AttributeError):
        return SampleError(ErrorKind.INTERNAL.value, None, "unreadable checkpoint line", 0)


class EvaltuiView:
    kind = "evaltui"

    def __init__(self, root: Path):
        self.root = root
        self.workdir = WorkDir(root)
        self.plan: Plan | None = None
        self.problem = ""  # why plan.toml could not be read, if it could not
        self._plan_key: StatKey | None = None
        self._taken: dict[Pair, PairSpec] = {}  # the plan's pairs a run took up
        self._summary: RunSummary | None = None
        self._log_key: StatKey | None = None
        self._log_ended = False
        self._beat: tuple[StatKey | None, float | None] = (None, None)  # the heartbeat's stat, and when it beat
        self._local = local_filesystem(root)  # whether a free lock says that no run is using it

    # -- what the plan says
    @property
    def title(self) -> str:
        return self.plan.title if self.plan is not None else ""

    @property
    def expects(self) -> str:
        return "no plan.toml (a run writes it as it begins)" if self.plan is None else "no status file of its plan's datasets (a run writes them as it begins)"

    @property
    def heartbeat_timeout(self) -> float:
        return self.plan.run.heartbeat_timeout if self.plan is not None else _RUN_DEFAULTS.heartbeat_timeout

    @property
    def log_interval(self) -> float:
        return self.plan.run.log_interval if self.plan is not None else _RUN_DEFAULTS.log_interval

    @property
    def models(self) -> dict[str, ModelConfig]:
        return {m.abbr: m for m in self.plan.models} if self.plan is not None else {}

    @property
    def epochs(self) -> dict[str, int]:
        plan = self.plan
        return {d.abbr: plan.epochs(d).count for d in plan.datasets} if plan is not None else {}

    def refresh(self) -> bool:
        """Read plan.toml again when a run rewrote it: each run writes it as it begins, so True
        says a run began (with these pairs, or others). Then the pairs a run took up so far."""
        began = self._read_plan()
        if self.plan is not None and len(self._taken) < len(self.plan.tested) * len(self.plan.datasets):
            self._look_for_taken(self.plan)
        return began

    def _read_plan(self) -> bool:
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
        self.plan, self._summary, self._taken = plan, None, {}
        return True

    def _look_for_taken(self, plan: Plan) -> None:
        """The snapshot is the whole plan even when a run took only some of it (--models,
        --datasets): a pair counts once a run wrote a status file of it, or its result."""
        wd = self.workdir
        found = False
        for m in plan.tested:
            for d in plan.datasets:
                key = (m.abbr, d.abbr)
                if key not in self._taken and (
                    any(stat_key(wd.status_file(m.abbr, d.abbr, k, d.shards)) for k in range(d.shards)) or stat_key(wd.result_file(*key))
                ):
                    self._taken[key] = PairSpec(m.abbr, d.abbr, d.shards)
                    found = True
        if found:
            self._summary = None
            order = {(m.abbr, d.abbr): i for i, (m, d) in enumerate((m, d) for m in plan.tested for d in plan.datasets)}
            self._taken = dict(sorted(self._taken.items(), key=lambda kv: order[kv[0]]))

    def pairs(self) -> list[PairSpec]:
        return list(self._taken.values())

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

    def judging(self, model: str, dataset: str) -> JudgeSpec | None:
        """As the run's judges take it (engine/judge/judging.py): a judged evaluator's pairs but
        the pairwise baseline's own (its ties need no judge)."""
        from evaltui.plan.judges import JUDGED

        if self.plan is None:
            return None
        try:
            ev = self.plan.dataset(dataset).evaluator
        except KeyError:  # a pair of a plan since rewritten: it is followed anew
            return None
        if ev.type not in JUDGED or not ev.judge or ev.baseline == model:
            return None
        return JudgeSpec(ev.judge, 2 if ev.type in ("mt_bench", "pairwise") else 1, self.workdir.verdicts_file(model, dataset))

    def score(self, model: str, dataset: str) -> Score | None:
        """The result's metrics as the run's reducer names them (`accuracy_at_least_3`; pass@1
        with pass@3 and pass@5 as its others), as the runner's DatasetScored says them."""
        from evaltui.scoring import Reduction

        if self.plan is None:
            return None
        try:
            result = self.workdir.read_result(model, dataset)
        except Unreadable:
            raise  # said in one line by evaltui watch
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
        from evaltui.scoring.summary import result_intervals

        return Score(metric, value, "", tuple((name, _number(result.get(name))) for name in others), result_intervals(result))

    # -- the run as a whole
    def holder(self) -> int | None:
        beats_every = self.plan.run.heartbeat_interval if self.plan is not None else _RUN_DEFAULTS.heartbeat_interval
        return run_holder(self.root, self._local, beats_every)

    def heartbeat_key(self) -> StatKey | None:
        return stat_key(self.workdir.heartbeat_file)

    def heartbeat_at(self) -> float | None:
        """Read again only when the file changed: each look asks (is the run live?)."""
        key = self.heartbeat_key()
        if key is None or key != self._beat[0]:
            self._beat = (key, last_beat(self.workdir) if key is not None else None)
        return self._beat[1]

    def activity_at(self) -> float | None:
        return self.heartbeat_at()

    def began_at(self) -> float | None:
        """Each run writes its plan snapshot as it begins."""
        try:
            return os.stat(self.workdir.plan_file).st_mtime
        except OSError:
            return None

    def ended(self) -> bool:
        """Each run, and each retry's session, ends logs/run.log with RunFinished's line: a log
        that ends with another is a run still at it (or one killed: its heartbeat goes stale)."""
        path = self.workdir.logs_dir / "run.log"
        key = stat_key(path)
        if key != self._log_key:
            self._log_key, self._log_ended = key, key is not None and ends_a_run(_last_line(path))
        return self._log_ended

    def ended_at(self) -> float | None:
        """The run's last write: its heartbeat, its log, or a status file or checkpoint of its pairs
        (a killed run's heartbeat may be one beat, at its start)."""
        wd = self.workdir
        paths = [wd.logs_dir / "run.log"]
        for m, d, n in self._taken.values():
            paths += [f(m, d, k, n) for k in range(n) for f in (wd.status_file, wd.checkpoint_file)]
        written = [key[2] / 1e9 for key in map(stat_key, paths) if key is not None]
        return max([*written, self.heartbeat_at() or 0.0]) or None

    def summary_files(self) -> dict[str, str]:
        """The newest summary files, if the run followed wrote them (not one before it: a --fresh
        run leaves the summary of the run it set aside in summary/ until it writes its own)."""
        found = newest_summary(self.root / "summary")
        began = self.began_at()
        if began is None or any((key := stat_key(Path(path))) is None or key[2] / 1e9 < began for path in found.values()):
            return {}
        return found

    def leaderboard(
        self,
        scores: Mapping[Pair, float | None],
        extra: Mapping[tuple[str, str, str], float | None] | None = None,
        intervals: Mapping[tuple[str, str, str], Interval] | None = None,
    ) -> Leaderboard:
        from evaltui.scoring.leaderboard import build_leaderboard
        from evaltui.scoring.summary import RunSummary

        if self.plan is None:
            return build_leaderboard([], [], {})
        if self._summary is None:  # the table of the run's pairs, as the run's own (a --datasets run: those)
            models, datasets = list(dict.fromkeys(m for m, _ in self._taken)), list(dict.fromkeys(d for _, d in self._taken))
            self._summary = RunSummary(select(self.plan, models, datasets))
        return self._summary.leaderboard(scores, extra, intervals)

    def details(self, model: str, dataset: str, status: PairStatus) -> PairDetails:
        if self.plan is None:  # (no pairs without a plan: nothing asks)
            return PairDetails(model, dataset, status, [], [], {})
        return read_pair_details(self.workdir, self.plan, model, dataset, status)
