"""The interactive session: watch a run, retry what failed, read the leaderboard.

Data flow, one way each: the engine (on its own thread, see engine_thread.py) reports events to
`sink`, which only appends to a deque. Every 0.2 s `fold_pending` drains the deque, folds the
events into the app's own RunState and repaints, inside one `batch_update`, only what changed.
Commands go the other way as portal calls (run, retry, cancel). The app never calls into the
engine per event, and the engine never waits on the app.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from concurrent.futures import Future
from typing import Callable, ClassVar, Iterable, Sequence

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from evaltui.engine import events as ev
from evaltui.engine.runner import Runner
from evaltui.engine.state import Failure, RunState
from evaltui.scoring.leaderboard import Leaderboard
from evaltui.ui import fmt
from evaltui.ui.commands import EvalCommands
from evaltui.ui.engine_thread import EngineThread
from evaltui.ui.screens.details import DetailsScreen
from evaltui.ui.screens.modals import ConfirmQuit, HelpScreen
from evaltui.ui.themes import BAR_EMPTY, DEFAULT_THEME, ThemeSet, load_themes, remember_theme, remembered_theme
from evaltui.ui.widgets.panes import EngineStrip, FailuresLog, LeaderboardTable
from evaltui.ui.widgets.progress import ProgressTable, ShardFold

TICK = 0.2  # seconds between repaints of counters and bars: smooth, and cheap for the engine
SLOW_TICK = 1.0  # seconds between repaints of what moves every tick anyway: rates, ETAs, the strip
EXIT_INTERRUPTED = 130
_PALETTE_NAMES = ("foreground", "foreground-muted", "primary", "secondary", "success", "warning", "error", "accent", BAR_EMPTY)
_PAIR_ACTIONS = ("retry", "details")


class EvalApp(App[int]):
    CSS_PATH = "app.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    COMMANDS = App.COMMANDS | {EvalCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "retry", "Retry", id="retry"),
        Binding("R", "retry_all", "Retry all", id="retry-all"),
        Binding("enter", "details", "Details", id="details"),
        Binding("t", "next_theme", "Theme", id="next-theme"),
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
    ]

    def __init__(
        self,
        runner: Runner,
        *,
        theme: str | None = None,
        themes: ThemeSet | None = None,
        start: bool = True,
        exit_when_done: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        """`start=False` leaves the engine idle (tests feed `sink` a scripted stream);
        `exit_when_done` ends the session when the run ends (benchmarks)."""
        super().__init__()
        self.runner = runner
        self.engine = EngineThread(runner)
        self.state = RunState(clock=clock, wall_clock=wall_clock)
        self.shards = ShardFold()
        self._inbox: deque[ev.Event] = deque()
        self._start = start
        self._exit_when_done = exit_when_done
        self._quitting = False
        self._live = False  # between RunStarted/RetryStarted and RunFinished
        self._last_slow = -SLOW_TICK
        self._keys_shown: tuple[bool, ...] = ()
        self._retrying: set[tuple[str, str]] = set()  # asked for; not offered again until over
        self._retry_started: set[tuple[str, str]] = set()  # of those, the ones the engine took up
        self._jobs_at_finish = 0  # engine jobs asked for when the last RunFinished came in
        self._reported: set[int] = set()
        self._retry_jobs: dict[int, tuple[tuple[str, str], ...]] = {}  # retry job -> its pairs
        self._palette: dict[str, str] = {}
        self.exit_code = 1
        self.themes = themes if themes is not None else load_themes()
        for t in self.themes.themes.values():
            self.register_theme(t)
        self._asked_theme = theme
        self.theme = self._pick_theme(theme)
        plan = runner.plan
        self.title = plan.title or "evaltui"
        self._heartbeat_timeout = plan.run.heartbeat_timeout
        self._max_workers = {m.abbr: m.max_workers for m in plan.models}
        # the panes, kept at hand: the tick repaints them without a query, even while closing
        self.strip = EngineStrip(id="strip")
        self.progress = ProgressTable(id="progress")
        self.board = LeaderboardTable(id="leaderboard")
        self.failures = FailuresLog(id="failures", max_lines=1000, auto_scroll=True)
        self.main = Horizontal(id="main")
        # the plan's rows, models and versions, taken now, before the engine's thread starts: later
        # the runner's state is that thread's to change, and the scores come from this app's own fold
        self._empty_board = dataclasses.replace(runner.leaderboard(), scores={})
        self._plan_pairs = frozenset(runner.pairs)
        runner.subscribe(self.sink)

    # ------------------------------------------------------------------ set-up
    def _pick_theme(self, asked: str | None) -> str:
        for name in (asked, remembered_theme(), DEFAULT_THEME):
            if name and name in self.available_themes:
                return name
        return "textual-dark"  # every theme file broken: Textual's own keeps the app usable

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {BAR_EMPTY: "$panel-lighten-2"}

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own, less its Quit: ours (EvalCommands) says what quitting keeps."""
        return (c for c in super().get_system_commands(screen) if c.title != "Quit")

    def compose(self) -> ComposeResult:
        yield self.strip
        with self.main:
            yield self.progress
            with Vertical(id="side"):
                yield self.board
                yield self.failures
        yield Footer()

    def on_mount(self) -> None:
        self.animation_level = "none"  # nothing here needs motion; it only costs repaints over SSH
        self.progress.border_title = "progress"
        self.board.border_title = "leaderboard"
        self.failures.border_title = "failures"
        for problem in self.themes.problems:
            self.notify(f"theme file skipped: {problem}", severity="warning", timeout=10, markup=False)
        if self._asked_theme and self._asked_theme != self.theme:
            self.notify(f"no usable theme {self._asked_theme!r}: using {self.theme}", severity="warning", timeout=10, markup=False)
        elif self._asked_theme:
            self._remember_theme()  # asked for by name (--theme) and used: the next session opens with it
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._update_palette()
        self.progress.focus()
        self.set_interval(TICK, self.fold_pending)
        if self._start:
            self.engine.run()

    def on_unmount(self) -> None:
        self.engine.close()  # however the app ends, the engine stops and keeps its work

    def _theme_changed(self, theme: object) -> None:
        self._update_palette()
        self._remember_theme()
        self.fold_pending(all_rows=True)

    def _remember_theme(self) -> None:
        """Save the theme in use unless it is already the remembered one (back to it with `t` too)."""
        if self.theme != remembered_theme():
            problem = remember_theme(self.theme)
            if problem:
                self.notify(problem, severity="warning", markup=False)

    def _update_palette(self) -> None:
        variables = self.get_css_variables()
        background = Color.parse(variables.get("background", "black"))
        palette = {}
        for name in _PALETTE_NAMES:
            try:
                palette[name] = (background + Color.parse(variables[name])).hex
            except Exception:  # noqa: BLE001 - a missing or odd variable: the foreground stands in
                continue
        self._palette = palette

    # ------------------------------------------------------------------ events in
    def sink(self, event: ev.Event) -> None:
        """Called on the engine's thread for every event: an O(1) append, nothing else."""
        self._inbox.append(event)

    def fold_pending(self, all_rows: bool = False) -> None:
        """Drain the inbox, fold it into the state, repaint what changed."""
        inbox = self._inbox
        dirty: set[tuple[str, str]] | None = None if all_rows else set()
        new_failures: list[Failure] = []
        rebuild_failures = scores_changed = statuses_changed = all_rows
        while inbox:
            e = inbox.popleft()
            before = self._status_of(e)
            self.state.apply(e)
            self.shards.apply(e)
            match e:
                case ev.SampleFailed(model=m, dataset=d, sample_index=i, error=err):
                    new_failures.append(Failure(m, d, i, err))
                case ev.DatasetStarted() | ev.DatasetPlanned() | ev.RetryStarted():
                    rebuild_failures = True
                case ev.DatasetScored() | ev.RunFinished() | ev.RunStarted():
                    scores_changed = True
            match e:
                case ev.RetryStarted(pairs=pairs):
                    self._retry_started.update(pairs)
                case ev.DatasetInferred(model=m, dataset=d, status=ev.PairStatus.FAIL) | ev.DatasetScored(model=m, dataset=d) if (m, d) in self._retry_started:
                    # a retry joined to a live run ends with that run; this pair's part is over now
                    self._retry_started.discard((m, d))
                    self._retrying.discard((m, d))
                    statuses_changed = True
            match e:
                case ev.RunStarted() | ev.RetryStarted():
                    self._live = True
                    self.main.remove_class("-finished")
                case ev.RunFinished():
                    self._live = False
                    self._jobs_at_finish = len(self.engine.jobs)
                    self.main.add_class("-finished")  # the final leaderboard gets the room it needs
                case ev.Notice(message=msg, level=level):
                    self.notify(msg, severity="error" if level == "error" else ("warning" if level == "warning" else "information"), markup=False)
            match e:
                case ev.RunStarted() | ev.RunFinished() | ev.WatchSkipped() | ev.RetryStarted() | ev.DatasetPlanned():
                    dirty = None
                    statuses_changed = True
                case _ if dirty is not None and isinstance(e, _PAIR_EVENTS):
                    dirty.add((e.model, e.dataset))
            if before is not None and before != self._status_of(e):
                statuses_changed = True
        if dirty is not None:
            dirty.update(k for k, p in self.state.pairs.items() if p.status == ev.PairStatus.RUNNING)
        # Every repaint takes the interpreter from the engine's thread for a while: what changes
        # with time alone (rates, ETAs, ages) is repainted once a second, counters every tick.
        now = self.state.clock()
        slow = all_rows or statuses_changed or now - self._last_slow >= SLOW_TICK
        if slow:
            self._last_slow = now
        with self.batch_update():
            self.progress.sync(self.state, self.shards, dirty, self._palette, rates=slow)
            if slow:
                self.strip.show(
                    self.state, heartbeat_timeout=self._heartbeat_timeout, max_workers=self._max_workers,
                    title=self.title, live=self._live, palette=self._palette,
                )
            if rebuild_failures:
                self.failures.show_all(list(self.state.failures))
            else:
                self.failures.add(new_failures)
            if scores_changed:
                self.board.show(self.leaderboard(), self._palette)
        if self._jobs_ended() or statuses_changed:
            self._refresh_keys()
        if (self._quitting or self._exit_when_done) and self._start and not self.engine.busy and self.engine.jobs:
            self.exit(self.exit_code)

    def _status_of(self, e: ev.Event) -> str | None:
        if isinstance(e, _PAIR_EVENTS):
            p = self.state.pairs.get((e.model, e.dataset))
            return None if p is None else str(p.status)
        return None

    def _jobs_ended(self) -> bool:
        """Take the result of each run/retry that ended since the last tick."""
        ended = False
        for job in self.engine.jobs:
            if not job.done() or id(job) in self._reported:
                continue
            self._reported.add(id(job))
            ended = True
            self._retrying.difference_update(self._retry_jobs.get(id(job), ()))  # others still run
            self._retry_started.difference_update(self._retry_jobs.get(id(job), ()))
            self._take_result(job)
        return ended

    def _take_result(self, job: Future[int]) -> None:
        error = job.exception()
        if error is not None:
            title = "retry refused" if id(job) in self._retry_jobs else "the run stopped"
            self.notify(str(error), title=title, severity="error", timeout=15, markup=False)
            return
        self.exit_code = EXIT_INTERRUPTED if self._quitting else job.result()

    def leaderboard(self) -> Leaderboard | None:
        """The plan's table with the scores this screen has seen; the engine's final one at the end."""
        finished = self.state.finished
        if finished is not None and finished.leaderboard is not None and not self._live:
            return finished.leaderboard
        seen = {k: p.score for k, p in self.state.pairs.items() if p.score is not None and k in self._plan_pairs}
        return dataclasses.replace(self._empty_board, scores=seen)

    # ------------------------------------------------------------------ actions
    def highlighted(self) -> tuple[str, str] | None:
        return self.progress.highlighted_pair()

    def _retryable(self) -> list[tuple[str, str]]:
        return [p for p in self.state.failed_pairs() if p not in self._retrying]

    def action_applies(self, action: str) -> bool:
        """Whether `action` means something now (the footer and the command palette ask)."""
        if action == "retry":
            return self.highlighted() in self._retryable()
        if action == "retry_all":
            return bool(self._retryable())
        if action == "details":
            return self.highlighted() is not None
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in _PAIR_ACTIONS or action == "retry_all":
            if len(self.screen_stack) > 1:
                return False  # behind a details or help screen these keys mean nothing
            return self.action_applies(action)
        return True

    def _refresh_keys(self) -> None:
        """Refresh the footer when the keys that apply changed: it rebuilds itself each time,
        which is costly enough to slow the engine if done every tick."""
        keys = tuple(self.action_applies(a) for a in ("retry", "retry_all", "details"))
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.refresh_bindings()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "progress":
            self._refresh_keys()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "progress":
            self.action_details()

    def action_retry(self) -> None:
        pair = self.highlighted()
        if pair is not None and pair in self._retryable():
            self._retry([pair])

    def action_retry_all(self) -> None:
        pairs = self._retryable()
        if pairs:
            self._retry(pairs)

    def _retry(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._retrying.update(pairs)
        self._retry_jobs[id(self.engine.retry(pairs))] = tuple(pairs)
        # a skipped pair with nothing failed is only scored (the watcher gave up on it; its answers are kept)
        skipped = [p for p in pairs if self.state.pairs[p].status == ev.PairStatus.SKIPPED and not self.state.pairs[p].failed]
        failed = [p for p in pairs if p not in skipped]
        said = []
        if failed:
            said.append("retrying the failed samples of " + ", ".join(f"{m}/{d}" for m, d in failed))
        if skipped:
            said.append("scoring " + ", ".join(f"{m}/{d}" for m, d in skipped))
        self.notify("; ".join(said), timeout=4, markup=False)
        self._refresh_keys()

    def action_details(self) -> None:
        pair = self.highlighted()
        if pair is None:
            return
        model, dataset = pair
        self.push_screen(DetailsScreen(model, dataset, lambda: self.runner.pair_details(model, dataset)))

    def action_next_theme(self) -> None:
        names = self.themes.cycle()
        if not names:
            self.notify("no theme files were found", severity="warning", markup=False)
            return
        at = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(at + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2, markup=False)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def _work_over(self) -> bool:
        """Nothing left to interrupt: nothing runs, or the last run (or retry) reported its end —
        its job's future completes a moment after RunFinished, while it lets go of the work dir —
        and no retry was asked for since."""
        self.fold_pending()
        ended = self.state.finished is not None and not self._live and len(self.engine.jobs) == self._jobs_at_finish
        return not self.engine.busy or ended

    def _leave(self) -> None:
        finished = self.state.finished
        if finished is not None and not self._live:
            self.exit_code = finished.exit_code
        self.exit(self.exit_code)

    async def action_quit(self) -> None:
        if self._quitting:
            # a second q (or ctrl+q) while stopping: leave now; what finished is already on disk
            self.exit_code = EXIT_INTERRUPTED
            self.exit(EXIT_INTERRUPTED)
            return
        if isinstance(self.screen, ConfirmQuit):
            self.screen.dismiss(True)  # asked twice while the question is open (ctrl+q): the answer is yes
            return
        if self._work_over():
            self._leave()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._quit_now()

        self.push_screen(ConfirmQuit(), answered)

    def _quit_now(self) -> None:
        """Cancel the engine; the tick leaves once the run has put its finished work away."""
        if self._work_over():  # it ended while the question was open: nothing was interrupted
            self._leave()
            return
        self._quitting = True
        self.exit_code = EXIT_INTERRUPTED
        self.notify("stopping: finished samples are kept…", timeout=30, markup=False)
        self.engine.cancel()


_PAIR_EVENTS = (
    ev.DatasetPlanned, ev.DatasetStarted, ev.SampleFinished, ev.SampleFailed, ev.ShardStatusChanged,
    ev.DatasetInferred, ev.DatasetScored, ev.DatasetScoring,
)
