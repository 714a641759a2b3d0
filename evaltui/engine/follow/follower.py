"""The follower: `evaltui watch`'s run source, read from a work dir that another process writes.

It emits the engine's own events (events.py) into an EventBus, so the Textual view and the
headless lines show a followed run exactly as one they drive. What it reads (through a View:
evaltui_view.py, opencompass.py) and what it makes of it:

- the pairs and their shards from the plan snapshot (or, for OpenCompass, the folders);
- each shard's status file: `DatasetPlanned` on first sight, `DatasetStarted` when it starts
  running, `ShardStatusChanged` when its status moves, `DatasetInferred` once all are final;
- each running shard's checkpoint, from where it was last read: one `SampleFinished` or
  `SampleFailed` per line, as the engine emitted them (the engine appends exactly one line per
  sample that ends). The failures come from there, not from logs/failures.jsonl: a checkpoint
  line says which shard, and whether a later line for the same sample answered it;
- a judged pair's verdicts (judgments/, follow/judged.py), from where they were last read:
  `PairJudged` when its counts move, ended once the pair has its result (or the run ended);
- results: `DatasetScored`; infer_heartbeat: `Heartbeat`;
- the end: once no process holds the work dir's lock — where /proc/locks can tell (lockstate.py:
  a local filesystem) at once, a killed run included; elsewhere once its files say it is over
  (the run's last line in logs/run.log, a heartbeat older than `heartbeat_timeout` — a killed
  run, or OpenCompass's summary written after everything else) — `ScoringSkipped` for done pairs left
  unscored, a `Notice` when work was left, and `RunFinished` with the leaderboard. A run that
  takes the work dir again later is followed anew (`RunStarted`).

How it follows: a stat loop, one look every FOLLOW_INTERVAL (IDLE_INTERVAL once the run has
ended). A look stats each status file, each unfinished shard's checkpoint, each result and the
heartbeat, reads a file only when its stat changed, and reads a checkpoint only from where it
stopped: its cost grows with the files (a few µs a stat) and with what the run writes, never
with what it has written. bench/watch_cost.py measures it on a 200,000-sample run against the
run's own CPU. inotify would save the stats, but not the reading, and needs a dependency.

It only ever reads: no file is created, changed or locked (the lock is looked up in
/proc/locks, lockstate.py), so a writer starting at any moment finds the work dir as it left it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from evaltui.engine.disk.heartbeat import stale
from evaltui.engine.disk.workdir import NotAWorkDir
from evaltui.engine.follow.view import View
from evaltui.engine.follow.watches import PairWatch
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.bus import EventBus
from evaltui.engine.stream.events import Pair, PairStatus
from evaltui.engine.stream.pair import BoardValues, board_values
from evaltui.engine.stream.state import RunState
from evaltui.exitcode import ExitCode
from evaltui.text import duration

if TYPE_CHECKING:
    from evaltui.engine.disk.details import PairDetails
    from evaltui.plan import ModelConfig
    from evaltui.scoring.leaderboard import Leaderboard

FOLLOW_INTERVAL = 0.5  # s between looks while the run is live: smooth progress, a few hundred stats
IDLE_INTERVAL = 2.0  # s between looks once it has ended (a new run taking the work dir is still seen)


def _newest_write(root: Path) -> float | None:
    """The newest mtime of the folder and what it holds; None when it is empty (or unreadable)."""
    try:
        entries = list(os.scandir(root))
        return max(e.stat(follow_symlinks=False).st_mtime for e in entries) if entries else None
    except OSError:
        return None


def open_view(root: Path) -> View:
    """The view of `root`: an evaltui work dir (plan.toml, its lock, or an empty folder a run is
    about to fill) or an OpenCompass one (infer_status/, predictions/, results/, summary/)."""
    from evaltui.engine.follow.evaltui_view import EvaltuiView
    from evaltui.engine.follow.opencompass import OpenCompassView, is_opencompass_dir

    if not root.is_dir():
        raise NotAWorkDir(f"{root}: a file, not a work dir's folder" if root.exists() else f"{root}: no such folder")
    if (root / "plan.toml").exists() or (root / ".evaltui.lock").exists():
        return EvaltuiView(root)
    if is_opencompass_dir(root):
        return OpenCompassView(root)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as e:
        raise NotAWorkDir(f"{root}: cannot list it: {e.strerror or e}") from None
    if not entries:
        return EvaltuiView(root)  # a run is about to begin there: wait for it
    runs = [e.name for e in entries if e.is_dir() and is_opencompass_dir(Path(e.path))]
    hint = f" (it holds OpenCompass runs: watch one of them, e.g. {root / runs[-1]})" if runs else ""
    raise NotAWorkDir(f"{root}: not a work dir of evaltui (plan.toml) or OpenCompass (infer_status/, predictions/, results/){hint}")


class Follower:
    """A RunSource (source.py) over a work dir another process writes; see the module's docstring.

    `until_over`: `run()` returns once the followed run has ended (`evaltui watch --no-ui`);
    otherwise it follows until cancelled, and a run that takes the work dir later is followed too.
    """

    watching = True

    def __init__(self, view: View, *, until_over: bool = False, interval: float = FOLLOW_INTERVAL, idle_interval: float = IDLE_INTERVAL):
        self.view = view
        self.until_over = until_over
        self.interval, self.idle_interval = interval, idle_interval
        self.state = RunState()
        self.bus = EventBus(self.state)
        self.subscribe = self.bus.subscribe
        self.emit = self.bus.emit
        self.exit_code: int = ExitCode.FAILED
        self.interrupted = False
        self._watches: dict[Pair, PairWatch] = {}
        self._live: bool | None = None  # what was last said: None before the first look
        self._heartbeat_key: object = None
        self._holder: int | None = None
        self._waiting = False  # said that no run has begun yet
        self._began = False  # a run began while there was nothing to follow yet
        self._scope: anyio.CancelScope | None = None
        view.refresh()  # the pairs and the title, before a front end asks

    # ------------------------------------------------------------------ what a front end asks
    @property
    def pairs(self) -> list[Pair]:
        return [(p.model, p.dataset) for p in self.view.pairs()]

    @property
    def title(self) -> str:
        return self.view.title or f"{self.view.kind} {self.view.root.name}"

    @property
    def heartbeat_timeout(self) -> float:
        return self.view.heartbeat_timeout

    @property
    def models(self) -> dict[str, ModelConfig]:
        return self.view.models

    @property
    def log_interval(self) -> float:
        return self.view.log_interval

    @property
    def epochs(self) -> dict[str, int]:
        return self.view.epochs

    def leaderboard(self) -> Leaderboard:
        with self.bus.lock:
            values = board_values(self.state.pairs.values())
        return self.view.leaderboard(*values)

    def pair_details(self, model: str, dataset: str) -> PairDetails:
        p = self.state.pairs.get((model, dataset))
        return self.view.details(model, dataset, p.status if p is not None else PairStatus.PENDING)

    # ------------------------------------------------------------------ following
    async def run(self) -> int:
        """Follow until cancelled (or, with `until_over`, until the run has ended); the exit code
        of the followed run (0 every pair it took up scored, 1 otherwise), 130 when cancelled."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.interrupted:
                scope.cancel()
            while True:
                self.look()
                if self.until_over and (self._live is False or self.exit_code == ExitCode.USAGE):
                    return self.exit_code
                await anyio.sleep(self.idle_interval if self._live is False else self.interval)
        return ExitCode.INTERRUPTED

    @property
    def retry_advice(self) -> str:
        """How the run followed is retried: a follower cannot (the plan and the work dir's lock
        are the run's process's), and while that process runs, `evaltui PLAN.toml` is refused."""
        if self.view.kind != "evaltui":
            return f"retry: run {self.view.kind} again (evaltui only watches it)"
        if self._live:
            return "retry from the session that runs it, or `evaltui PLAN.toml` after it ends"
        if self.state.stopped_pairs():
            return "resume: `evaltui PLAN.toml` resumes the run, running what is unfinished and rerunning what failed"
        return "retry: `evaltui PLAN.toml` resumes the run, rerunning what failed"

    async def retry(self, pairs: Sequence[Pair]) -> int:
        raise RuntimeError(self.retry_advice)

    def cancel(self) -> None:
        self.interrupted = True
        if self._scope is not None:
            self._scope.cancel()

    def close(self) -> None:
        """Nothing to let go of: the follower holds no file open between looks."""

    def look(self) -> None:
        """One look at the work dir: emit what changed since the last one."""
        if not self.view.pairs():
            self._decide_view()
        holder = self.view.holder()
        # a run (re)wrote what defines the pairs: it began (said once it has pairs to follow)
        began = self._began = self.view.refresh() or self._began
        taken = bool(holder) and holder != self._holder  # a process took the work dir since the last look
        self._holder = holder
        if not self.view.pairs():  # nothing to follow yet: no run has begun in the dir
            if not self._waiting:
                self._waiting = True
                self.emit(ev.Notice(f"waiting for a run to begin in {self.view.root}{': ' + self.view.problem if self.view.problem else ''}"))
            why = self.unusable() if self.until_over else None
            if why is not None:  # and nothing will make it one: `--no-ui` would wait for ever
                self.exit_code = ExitCode.USAGE  # `--no-ui` over a folder that is no work dir and that nothing writes
                self.emit(ev.Notice(why, "error"))
            return
        self._began = False
        if began or taken or self._live is None:
            self._attach(holder)
            return
        self._add_new_pairs(bool(self._live))
        for watch in self._watches.values():
            for e in watch.look():
                self.emit(e)
        self._look_heartbeat()
        live = self._is_live(holder)
        if live and not self._live:
            self._attach(holder)  # its files moved again after it was said to have ended
        elif self._live and not live:
            self._finish()
        self._live = live

    def unusable(self) -> str | None:
        """Why the folder gives nothing to follow while nothing makes it a work dir: no pairs, no
        process here holding its lock, nothing written there for heartbeat_timeout, and not
        empty (an empty folder is a run about to begin there: waited for). None otherwise."""
        if self.view.pairs() or self.view.holder():
            return None
        newest = _newest_write(self.view.root)
        if newest is None:
            return None
        quiet = time.time() - newest
        if not stale(quiet, self.view.heartbeat_timeout):
            return None
        what = self.view.problem or self.view.expects
        return f"nothing to follow in {self.view.root}, and nothing has written there for {duration(quiet)}: {what}"

    def _decide_view(self) -> None:
        """While there is nothing to follow, which kind of work dir the folder is may still change:
        an empty folder (taken for evaltui's) that OpenCompass fills is followed as OpenCompass's."""
        try:
            view = open_view(self.view.root)
        except NotAWorkDir:
            return  # something else appeared there: the view stands (and says what it waits for)
        if view.kind != self.view.kind:
            self.view = view

    def _attach(self, holder: int | None) -> None:
        """Say the run anew from its files: RunStarted, every pair as it stands, the heartbeat."""
        view = self.view
        self._watches = {}
        pairs = view.pairs()
        models, datasets = tuple(dict.fromkeys(p.model for p in pairs)), tuple(dict.fromkeys(p.dataset for p in pairs))
        self.emit(ev.RunStarted(str(view.root), models, datasets, self.title, view.began_at()))
        if view.problem:
            self.emit(ev.Notice(view.problem, "error"))
        self._heartbeat_key = None
        self._look_heartbeat()
        live = self._is_live(holder)
        said = self._new_pairs(live)  # (said after the line saying what the watcher found)
        if live:
            found = "a run in progress" + (f" (pid {holder})" if holder else "")
        elif any(w.unfinished for w in self._watches.values()):
            found = "a run that stopped with work left (killed or interrupted)" + (": no process holds its lock" if holder == 0 else "")
        else:
            found = "no run is using it now"
        self.emit(ev.Notice(f"watching {view.kind} work dir: {found}"))
        for e in said:
            self.emit(e)
        if not live:
            self._finish()
        self._live = live

    def _add_new_pairs(self, live: bool) -> None:
        for e in self._new_pairs(live):
            self.emit(e)

    def _new_pairs(self, live: bool) -> list[ev.Event]:
        """Pairs that appeared since the last look (OpenCompass's folders fill as it goes): what
        their files say."""
        out: list[ev.Event] = []
        for spec in self.view.pairs():
            key = (spec.model, spec.dataset)
            watch = self._watches.get(key)
            if watch is None or watch.spec != spec:
                watch = self._watches[key] = PairWatch(self.view, spec)
                out += watch.attach(live=live, joined=True)
        return out

    def _look_heartbeat(self) -> None:
        key = self.view.heartbeat_key()
        if key == self._heartbeat_key:
            return
        self._heartbeat_key = key
        at = self.view.heartbeat_at()
        if at is not None:
            self.emit(ev.Heartbeat(at))

    def _is_live(self, holder: int | None) -> bool:
        """Whether a run works in the dir now. The lock says so where it can tell (`holder`: a
        pid, or 0 for none); else the files do: a heartbeat (or a file written) within
        heartbeat_timeout, unless they say the run ended — a run on another host writing over
        NFS holds a lock that this host's /proc/locks does not show (`holder` None)."""
        if holder is not None:
            return holder != 0
        at = self.view.activity_at()
        if at is None or stale(time.time() - at, self.view.heartbeat_timeout):
            return False
        return not self.view.ended()

    def _finish(self) -> None:
        """The run has ended: say what it left, then RunFinished with its leaderboard."""
        watches = list(self._watches.values())
        for watch in watches:  # a judging the run left under way is over too
            for e in watch.judging_over():
                self.emit(e)
        unscored = tuple(w.pair for w in watches if w.done and w.score is None)
        if unscored:
            self.emit(ev.ScoringSkipped(unscored, "the run ended before they were scored"))
        left = [f"{m}/{d}" for m, d in (w.pair for w in watches if w.unfinished)]
        if left:
            self.emit(self._stopped(left))
        taken = [w for w in watches if w.planned]  # a --models/--datasets run leaves the plan's other pairs untouched
        scored = taken and all(w.score is not None and w.score.value is not None for w in taken)
        self.exit_code = ExitCode.OK if scored else ExitCode.FAILED
        board = self.view.leaderboard(*_board_of(watches))
        self.emit(ev.RunFinished(self.exit_code, bool(left), self.view.summary_files(), board, self._elapsed()))

    def _stopped(self, left: list[str]) -> ev.Notice:
        """The run stopped with work left: how many datasets (which, in the line), and when its
        heartbeat last beat (a killed run's is stale)."""
        n = f"{len(left)} dataset{'s' if len(left) > 1 else ''} unfinished"
        beat = self.view.heartbeat_at()
        ago = duration(max(0.0, time.time() - beat)) + " ago" if beat is not None else ""
        named = ", ".join(left[:5]) + (f", … ({len(left) - 5} more)" if len(left) > 5 else "")
        message = f"the run stopped{f' (last heartbeat {ago})' if ago else ''} with {n}: {named} — running it again resumes {'them' if len(left) > 1 else 'it'}"
        return ev.Notice(message, "warning", f"stopped{' ' + ago if ago else ''}: {n}")

    def _elapsed(self) -> float:
        """From the run's start to the last file it wrote (0, said as nothing, when they do not tell)."""
        began, ended = self.view.began_at(), self.view.ended_at()
        return max(0.0, ended - began) if began is not None and ended is not None else 0.0



def _board_of(watches: list[PairWatch]) -> BoardValues:
    """What the leaderboard shows of the followed pairs' scores (the result files' as last read)."""
    scored = [(w.pair, w.score) for w in watches if w.score is not None]
    return BoardValues(
        {pair: score.value for pair, score in scored},
        {(*pair, metric): value for pair, score in scored for metric, value in score.extra},
        {(*pair, metric): value for pair, score in scored for metric, value in score.intervals},
    )
