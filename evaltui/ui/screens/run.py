"""The run as it goes: the engine strip, progress, leaderboard and failures, and the keys that
act on a model×dataset (retry it, retry every failed one, open its details).

Data flow, one way each: the engine (on its own thread) reports events to `sink`, which only
appends to a deque. Every tick `fold_pending` drains the deque, folds each event into this
screen's own RunState, merges the deltas it returns and repaints, inside one `batch_update`,
only what they name. What an event means is the fold's to say (engine/stream/state.py); this screen
only follows the deltas, and keeps to itself which retries it asked for.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import Changes, Delta
from evaltui.engine.stream.events import Pair
from evaltui.engine.stream.pair import Clock
from evaltui.engine.stream.source import RunSource
from evaltui.engine.stream.state import RunState
from evaltui.scoring.leaderboard import Leaderboard
from evaltui.ui import keys
from evaltui.ui.engine_thread import EngineThread
from evaltui.ui.screens.details import DetailsScreen
from evaltui.ui.screens.fleet import FleetScreen
from evaltui.ui.toast import RANK, toast
from evaltui.ui.widgets.panes import EngineStrip, FailuresLog, LeaderboardTable
from evaltui.ui.widgets.progress import ProgressTable, ShardFold

SLOW_TICK = 1.0  # seconds between repaints of what moves every tick anyway: rates, ETAs
_PAIR_ACTIONS = ("retry", "retry_all", "details")
# rows of the stacked layout (under 120 columns) that app.tcss sets and the fit below counts on
_FRAME = 2  # a pane's round border, top and bottom
_PROGRESS_MIN = 6
_FAILURES_ROWS, _FAILURES_FOCUSED = 4, 9
_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning"}  # a Notice's level: a toast's; else information



def _which(pairs: Sequence[Pair]) -> str:
    """One pair by name; several by their count (a toast has one line; the rows say which)."""
    return f"{pairs[0][0]}/{pairs[0][1]}" if len(pairs) == 1 else f"{len(pairs)} datasets"


class RunScreen(Screen[None]):
    CSS_PATH = "run.tcss"
    BINDINGS: ClassVar[list[BindingType]] = keys.bindings(keys.RUN)

    def __init__(self, runner: RunSource, engine: EngineThread, *, clock: Clock, wall_clock: Clock):
        super().__init__()
        self.runner = runner
        self.engine = engine
        self.state = RunState(clock=clock, wall_clock=wall_clock)
        self.shards = ShardFold()
        self._inbox: deque[ev.Event] = deque()
        self._last_slow = -SLOW_TICK
        self._keys_shown: tuple[bool, ...] = ()
        self._retrying: set[Pair] = set()  # asked for; not offered again until over
        self._retry_started: set[Pair] = set()  # of those, the ones the engine took up
        self._retry_jobs: dict[int, tuple[Pair, ...]] = {}  # retry job -> its pairs
        self._progress_rows = 0  # the progress pane's height cap, as its rows last needed
        self._heartbeat_timeout = runner.heartbeat_timeout
        self._max_workers = {abbr: m.limits.max_workers for abbr, m in runner.models.items()}
        # the panes, kept at hand: the tick repaints them without a query, even while closing
        self.strip = EngineStrip(id="strip")
        self.progress = ProgressTable(id="progress")
        self.board = LeaderboardTable(id="leaderboard")
        self.failures = FailuresLog(id="failures", max_lines=1000, auto_scroll=True)
        self.main = Horizontal(id="main")
        # the plan's rows, models and versions, taken now, before the engine's thread starts: later
        # the runner's state is that thread's to change, and the scores come from this screen's own fold
        self._empty_board = dataclasses.replace(runner.leaderboard(), scores={})
        self._plan_pairs = frozenset(runner.pairs)

    def compose(self) -> ComposeResult:
        yield self.strip
        with self.main:
            yield self.progress
            with Vertical(id="side"):
                yield self.board
                yield self.failures
        yield Footer()

    def on_mount(self) -> None:
        self.show_title(self.app.title)
        self.board.border_title = "leaderboard"
        self.failures.border_title = "failures"
        self.failures.display = False  # until a sample fails
        self.progress.focus()

    def show_title(self, title: str) -> None:
        """The whole title where the pane has the room; cut with an ellipsis where not (Textual's)."""
        self.progress.border_title = f"progress · {title}"

    # ------------------------------------------------------------------ events in
    def sink(self, event: ev.Event) -> None:
        """Called on the engine's thread for every event: an O(1) append, nothing else."""
        self._inbox.append(event)

    def restyle(self) -> None:
        """The theme changed: every pane forgets its styles and repaints every cell."""
        for look in (self.progress.look, self.board.look, self.strip.look):
            look.forget()
        self.fold_pending(all_rows=True, restyled=True)

    def fold_pending(self, *, all_rows: bool = False, restyled: bool = False) -> Changes:
        """Drain the inbox, fold it into the state, repaint what changed; say what did."""
        inbox, apply, shards = self._inbox, self.state.apply, self.shards
        changes = Changes(everything=all_rows)
        while inbox:
            e = inbox.popleft()
            delta = apply(e)
            shards.apply(e)
            changes.add(delta)
            if (delta.retried or delta.settled) and self._follow_retries(delta):
                changes.statuses = True
        if changes.notices:  # one toast: the most severe of those that came, the latest of equals
            notice = max(reversed(changes.notices), key=lambda n: RANK[_SEVERITY.get(n.level, "information")])
            toast(self.app, notice.short or self._short(notice.message), severity=_SEVERITY.get(notice.level, "information"))
        if changes.live is not None:
            self.main.set_class(not changes.live, "-finished")  # the final leaderboard gets the room it needs
        self._repaint(changes, restyled=restyled)
        return changes

    def _short(self, message: str) -> str:
        """A notice's paths inside the work dir, relative to it: a toast has a few dozen columns."""
        root = self.state.work_dir
        return message.replace(root.rstrip("/") + "/", "") if root else message

    def _follow_retries(self, delta: Delta) -> bool:
        """Which asked-for retries the engine took up, and which are over: a retry joined to a
        live run ends with that run, but each pair's part in it ends on its own. True when one ended."""
        self._retry_started.update(delta.retried)
        over = self._retry_started & delta.settled
        self._retry_started -= over
        self._retrying -= over
        return bool(over)

    def _repaint(self, changes: Changes, *, restyled: bool = False) -> None:
        state = self.state
        dirty = changes.pairs
        if dirty is not None:
            dirty.update(k for k, p in state.pairs.items() if p.status == ev.PairStatus.RUNNING)
        # Every repaint takes the interpreter from the engine's thread for a while: what changes
        # with time alone (rates, ETAs, ages) is repainted once a second, counters every tick.
        now = state.clock()
        slow = changes.statuses or changes.fleet or now - self._last_slow >= SLOW_TICK  # a replica out: the strip says so now
        if slow:
            self._last_slow = now
        with self.app.batch_update():
            self.progress.sync(state, self.shards, dirty, rates=slow)
            self.strip.show(  # from the same fold as the rows: its counts never behind theirs
                state, heartbeat_timeout=self._heartbeat_timeout, max_workers=self._max_workers, live=state.live,
                load_known=not self.runner.watching, rates=slow,
            )
            if changes.failures_reset:
                self.failures.show_all(list(state.failures))
            else:
                self.failures.add(state.newest_failures(changes.failures))
            self._fit_failures()
            if changes.scores or restyled:
                self.board.show(self.leaderboard(), restyled=restyled)
            self._fit_panes()

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_panes)  # once the panes have their new sizes

    def on_descendant_focus(self) -> None:
        self._fit_panes()  # a focused failures pane grows (app.tcss): the leaderboard may not fit beside it

    def _fit_panes(self) -> None:
        """Stacked (under 120 columns), each pane as tall as what it holds while the room allows:
        the progress pane no taller than its rows (1fr alone left blank rows under them, while
        the leaderboard scrolled), and the leaderboard all its rows (the Average among them)
        where they fit beside the progress pane's and the failures' (`-roomy`, app.tcss); where
        they do not, it keeps its 6 rows and progress takes the rest. Cheap: it changes a style
        only when a pane's needs did (a new style asks the whole screen for a layout)."""
        narrow = self.has_class("-narrow")
        progress = self.progress.row_count + self.progress.header_height + _FRAME if narrow else 0
        if progress != self._progress_rows:
            self._progress_rows = progress
            self.progress.styles.max_height = max(progress, _PROGRESS_MIN) if narrow else None  # wide: app.tcss's
        if not narrow:
            return
        failures = (_FAILURES_FOCUSED if self.failures.has_focus else _FAILURES_ROWS) if self.failures.display else 0
        board = self.board.row_count + self.board.header_height + _FRAME + self.board.scrollbar_size_horizontal
        self.main.set_class(self.main.size.height >= progress + board + failures, "-roomy")

    def _fit_failures(self) -> None:
        """The failures pane only once a sample failed: empty, it took the room of the datasets'
        rows (at 80×24 the second model's) or half a wide screen."""
        shown = self.failures.line_count > 0
        if shown != self.failures.display:
            if not shown and self.failures.has_focus:
                self.progress.focus()
            self.failures.display = shown

    def job_ended(self, job: Future[int]) -> bool:
        """A run or retry job ended: its pairs may be offered again. True if it was a retry."""
        pairs = self._retry_jobs.get(id(job), ())
        self._retrying.difference_update(pairs)  # others still run
        self._retry_started.difference_update(pairs)
        return id(job) in self._retry_jobs

    def leaderboard(self) -> Leaderboard | None:
        """The plan's table with the scores this screen has seen; the engine's final one at the end."""
        finished = self.state.finished
        if finished is not None and finished.leaderboard is not None and not self.state.live:
            return finished.leaderboard
        if not self._plan_pairs.issuperset(self.state.pairs):  # a followed run's pairs appear as it goes
            self._empty_board = dataclasses.replace(self.runner.leaderboard(), scores={})
            self._plan_pairs = frozenset(self.runner.pairs)
        seen = {k: p.score for k, p in self.state.pairs.items() if p.score is not None and k in self._plan_pairs}
        return dataclasses.replace(self._empty_board, scores=seen)

    # ------------------------------------------------------------------ actions
    def highlighted(self) -> Pair | None:
        return self.progress.highlighted_pair()

    def retryable(self) -> list[Pair]:
        """What `r`/`R` act on; watching, a stopped run's unfinished pairs too (`r` says how it resumes)."""
        pairs = self.state.failed_pairs() + (self.state.stopped_pairs() if self.runner.watching else [])
        return [p for p in pairs if p not in self._retrying]

    def action_applies(self, action: str) -> bool:
        """Whether `action` means something now (the footer and the command palette ask)."""
        if action == "retry":
            return self.highlighted() in self.retryable()
        if action == "retry_all":
            return bool(self.retryable())
        if action == "details":
            return self.highlighted() is not None or self.progress.highlighted_model() is not None
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "why_not":
            return len(self.app.screen_stack) == 1
        if action in _PAIR_ACTIONS:
            if len(self.app.screen_stack) > 1:
                return False  # behind a details or help screen these keys mean nothing
            return self.action_applies(action)
        return True

    def refresh_keys(self) -> None:
        """Refresh the footer when the keys that apply changed: it rebuilds itself each time,
        which is costly enough to slow the engine if done every tick."""
        keys = tuple(self.action_applies(a) for a in _PAIR_ACTIONS)
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.refresh_bindings()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "progress":
            self.refresh_keys()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "progress":
            self.action_details()

    def action_why_not(self, action: str) -> None:
        """`r` or `R` where it does not apply: say why, rather than nothing."""
        toast(self.app, self._why_not(action), timeout=4)

    def _why_not(self, action: str) -> str:
        if action == "retry_all":
            return "the failed datasets are being retried" if self._retrying else "nothing failed: nothing to retry"
        pair = self.highlighted()
        if pair is None:
            return "highlight a failed dataset to retry it"
        if pair in self._retrying:
            return f"{pair[0]}/{pair[1]}: its retry is under way"
        state = self.state.pairs.get(pair)
        status = state.status.value if state is not None else "not started"
        return f"{pair[0]}/{pair[1]} is {status}: nothing to retry"

    def action_retry(self) -> None:
        pair = self.highlighted()
        if pair is not None and pair in self.retryable():
            self._retry([pair])

    def action_retry_all(self) -> None:
        pairs = self.retryable()
        if pairs:
            self._retry(pairs)

    def _retry(self, pairs: Sequence[Pair]) -> None:
        if self.runner.watching:  # the followed run's plan and lock are its own process's
            toast(self.app, self.runner.retry_advice, severity="warning", timeout=8)
            return
        self._retrying.update(pairs)
        self._retry_jobs[id(self.engine.retry(pairs))] = tuple(pairs)
        # a skipped pair with nothing failed is only scored (the watcher gave up on it; its answers are kept)
        skipped = [p for p in pairs if self.state.pairs[p].status == ev.PairStatus.SKIPPED and not self.state.pairs[p].failed]
        failed = [p for p in pairs if p not in skipped]
        said = []
        if failed:
            said.append(f"retrying the failed samples of {_which(failed)}")
        if skipped:
            said.append(f"scoring {_which(skipped)}")
        toast(self.app, "; ".join(said), timeout=4)
        self.refresh_keys()

    def action_details(self) -> None:
        pair = self.highlighted()
        if pair is None:
            model = self.progress.highlighted_model()
            if model is not None:  # a model's heading row: its replicas and limits
                cfg = self.runner.models.get(model)
                if cfg is None:
                    toast(self.app, f"{model}: this work dir does not say how the model is served", timeout=4)
                else:
                    self.app.push_screen(FleetScreen(cfg, self.state, load_known=not self.runner.watching))
            return
        model, dataset = pair
        self.app.push_screen(DetailsScreen(model, dataset, lambda: self.runner.pair_details(model, dataset)))
