"""The run as it goes: the engine strip (and its throughput sparkline), progress, the leaderboard
and its score chart, and the failures. The keys that act on a model×dataset are
screens/pair_actions.py's.

Data flow, one way each: the engine (on its own thread) reports events to `sink`, which only
appends to a deque. Every tick `fold_pending` drains the deque, folds each event into this
screen's own RunState, merges the deltas it returns and repaints, inside one `batch_update`,
only what they name. What an event means is the fold's to say (engine/stream/state.py); this screen
only follows the deltas.

Where the panes go and how big each is, is ui/layout.py's arithmetic over what each holds and the
terminal's size, applied here (a style is set only when a size changed: a new style asks the
whole screen for a layout).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container, Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.widgets import Footer

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import Changes, follow
from evaltui.engine.stream.events import Pair
from evaltui.engine.stream.pair import Clock, board_values
from evaltui.engine.stream.source import RunSource
from evaltui.engine.stream.state import RunState
from evaltui.scoring.leaderboard import Leaderboard
from evaltui.ui import keys, layout
from evaltui.ui.engine_thread import EngineThread
from evaltui.ui.screens.pair_actions import PairActions
from evaltui.ui.toast import RANK, toast
from evaltui.ui.widgets.board import LeaderboardTable
from evaltui.ui.widgets.chart import Mark, RateLine, ScoreChart
from evaltui.ui.widgets.panes import EngineStrip, FailuresLog
from evaltui.ui.widgets.progress import ProgressTable, ShardFold

SLOW_TICK = 1.0  # seconds between repaints of what moves every tick anyway: rates, ETAs
STRIP, FOOTER = 2, 1  # rows of the strip and the footer: the panes have the rest
RATE_LINE = 12, 30  # the strip's sparkline: at least 12 columns beside its text, at most 30
# The leaderboard and its chart rank and average over every dataset: at thousands of datasets a
# repaint of them takes tens of milliseconds, and scores change every tick. In a plan of more than
# SCORES_MANY pairs, one that took longer than SCORES_FREE is followed by the next only
# SCORES_SPACING times as long later (they take at most ~1/20 of the app's thread, which shares the
# interpreter with the engine's); at the run's end at once. A plan of fewer shows each score the tick it comes.
SCORES_MANY = 500
SCORES_FREE = 0.005
SCORES_SPACING = 20.0
_RUNNING = frozenset({ev.PairStatus.RUNNING})
_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning"}  # a Notice's level: a toast's; else information


def _advice_first(why: str) -> str:
    """A failure's reason with what to change first (`fail_on_error = 0.185 would score the
    others; 37 of the dataset's 200 samples failed …`): a toast is one line, cut at the edge."""
    reason, _, advice = why.rpartition("; ")
    return f"{advice}; {reason}" if reason and "would score" in advice else why


class RunScreen(PairActions):
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
        self._heartbeat_timeout = runner.heartbeat_timeout
        self._max_workers = {abbr: m.limits.max_workers for abbr, m in runner.models.items()}
        self._applied: tuple[object, ...] = ()  # the sizes last set on the panes
        self._said_failed: set[tuple[str, str]] = set()  # the failed datasets a toast told of
        self._running_pairs: set[Pair] = set()  # the pairs running, as the deltas folded so far say
        # scores folded but not yet shown on the leaderboard and chart (SCORES_SPACING): their datasets (None: any), restyled
        self._scores_owed: tuple[set[str] | None, bool] | None = None
        self._scores_due = 0.0  # perf_counter time before which they wait
        # the panes, kept at hand: the tick repaints them without a query, even while closing
        self.strip = EngineStrip(id="strip")
        self.rate = RateLine(id="rate")
        self.progress = ProgressTable(id="progress")
        self.board = LeaderboardTable(id="leaderboard")
        self.chart = ScoreChart(id="scores")
        self.failures = FailuresLog(id="failures", max_lines=1000, auto_scroll=True)
        self.main = Vertical(id="main")
        self.top = Container(id="top")
        self.side = Vertical(id="side")
        # the plan's rows, models and versions, taken now, before the engine's thread starts: later
        # the runner's state is that thread's to change, and the scores come from this screen's own fold
        self._empty_board = dataclasses.replace(runner.leaderboard(), scores={}, extra={}, intervals={})
        self._plan_pairs = frozenset(runner.pairs)

    def compose(self) -> ComposeResult:
        with Horizontal(id="strip-row"):
            yield self.strip
            yield self.rate
        with self.main:
            with self.top:
                yield self.progress
                with self.side:
                    yield self.board
                    yield self.chart
            yield self.failures
        yield Footer()

    def on_mount(self) -> None:
        self.show_title(self.app.title)
        self.board.border_title = "leaderboard"
        self.chart.border_title = "scores"
        self.failures.border_title = "failures"
        self.rate.display = False  # until the layout finds it room beside the strip's words
        self.progress.focus()
        self._fit_panes()

    def show_title(self, title: str) -> None:
        """The whole title where the pane has the room; cut with an ellipsis where not (Textual's)."""
        self.progress.border_title = f"progress · {title}"

    # ------------------------------------------------------------------ events in
    def sink(self, event: ev.Event) -> None:
        """Called on the engine's thread for every event: an O(1) append, nothing else."""
        self._inbox.append(event)

    def restyle(self) -> None:
        """The theme changed: every pane forgets its styles and repaints every cell."""
        for look in (self.progress.look, self.board.look, self.strip.look, self.chart.look):
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
            if (delta.retried or delta.settled) and self.follow_retries(delta.retried, delta.settled):
                changes.statuses = True
        self._notify(changes)
        self._repaint(changes, restyled=restyled)
        return changes

    def _notify(self, changes: Changes) -> None:
        """One toast a tick: a dataset that failed (why, and what to change), else the most severe
        notice that came, the latest of equals."""
        failed = []
        if changes.statuses:  # else no pair failed since the last tick: not a walk over every pair
            pairs = self.state.pairs
            # the pairs that changed (a pair's status changes with it), not every pair: at thousands of
            # datasets statuses change every tick
            for key in pairs if changes.pairs is None else changes.pairs:
                p = pairs.get(key)
                if p is None or p.status != ev.PairStatus.FAIL:
                    self._said_failed.discard(key)
                elif key not in self._said_failed:
                    self._said_failed.add(key)
                    if p.error:
                        failed.append((key, p.error))
        if failed:
            (model, dataset), why = failed[-1]
            said = f"{model}/{dataset} failed: {_advice_first(why)}" if len(failed) == 1 else f"{len(failed)} datasets failed: their details say why"
            toast(self.app, said, severity="error", timeout=15)
            return
        if changes.notices:
            notice = max(reversed(changes.notices), key=lambda n: RANK[_SEVERITY.get(n.level, "information")])
            toast(self.app, notice.short or self._short(notice.message), severity=_SEVERITY.get(notice.level, "information"))

    def _short(self, message: str) -> str:
        """A notice's paths inside the work dir, relative to it: a toast has a few dozen columns."""
        root = self.state.work_dir
        return message.replace(root.rstrip("/") + "/", "") if root else message

    def _repaint(self, changes: Changes, *, restyled: bool = False) -> None:
        state = self.state
        dirty = changes.pairs
        self._running_pairs = follow(self.state.pairs, self._running_pairs, dirty, _RUNNING)
        self.follow_retryable(dirty)
        # Every repaint takes the interpreter from the engine's thread for a while: what changes
        # with time alone (rates, ETAs, ages) is repainted once a second, counters every tick.
        now = state.clock()
        slow = changes.statuses or changes.fleet or now - self._last_slow >= SLOW_TICK  # a replica out: the strip says so now
        if dirty is not None and slow:  # a running row's rate and ETA moved with the time alone
            dirty |= self._running_pairs
        with self.app.batch_update():
            self.progress.sync(state, self.shards, dirty, rates=slow)
            self._show_strip(rates=slow)
            if now - self._last_slow >= SLOW_TICK and state.live:
                c, f, _ = state.totals()
                self.rate.sample(now, c + f)
            if changes.failures_reset:
                self.failures.show_all(list(state.failures))
            else:
                self.failures.add(state.newest_failures(changes.failures))
            if changes.scores or restyled:
                self._owe_scores(None if dirty is None else {d for _, d in dirty}, restyled)
            self._show_scores()
            self._fit_panes()
        if slow:
            self._last_slow = now

    def _owe_scores(self, datasets: set[str] | None, restyled: bool) -> None:
        owed = self._scores_owed
        if owed is not None:
            datasets = None if datasets is None or owed[0] is None else owed[0] | datasets
            restyled = restyled or owed[1]
        self._scores_owed = (datasets, restyled)

    def _show_scores(self) -> None:
        """The leaderboard and its chart, when scores are owed and their turn has come (SCORES_SPACING)."""
        if self._scores_owed is None:
            return
        datasets, restyled = self._scores_owed
        began = time.perf_counter()
        if began < self._scores_due and not restyled and self.state.live:
            return
        self._scores_owed = None
        board = self.leaderboard()
        self.board.show(board, restyled=restyled, datasets=datasets)
        self.chart.show(self._marks(board), restyled=restyled)
        took = time.perf_counter() - began
        many = len(self.state.pairs) > SCORES_MANY
        self._scores_due = began + SCORES_SPACING * took if many and took > SCORES_FREE else 0.0

    def _show_strip(self, *, rates: bool) -> None:
        """The strip from the same fold as the rows (its counts never behind theirs), in the room
        its sparkline leaves; again at once when its words' width changed whether that fits."""
        state = self.state
        for again in (False, True):
            fits = self._rate_width() >= RATE_LINE[0]
            self.strip.show(
                state, heartbeat_timeout=self._heartbeat_timeout, max_workers=self._max_workers, live=state.live,
                load_known=not self.runner.watching, rates=rates and not again, room=self._strip_room(),
            )
            if (self._rate_width() >= RATE_LINE[0]) == fits:
                break

    def _rate_width(self) -> int:
        """The sparkline's columns beside the strip's words (fewer than RATE_LINE[0]: not shown)."""
        return min(RATE_LINE[1], self.size.width - self.strip.needed - 2)

    def _strip_room(self) -> int:
        rate = self._rate_width()
        return self.size.width - 2 - (rate + 2 if rate >= RATE_LINE[0] else 0)

    def _marks(self, board: Leaderboard | None) -> list[tuple[str, list[Mark]]]:
        """The chart's rows: each dataset's main score per model, in the leaderboard's order."""
        if board is None:
            return []
        ranked = [r.model for r in board.ranking()]
        return [(row.abbr, [Mark.of(m, board.value(m, row), board.interval(m, row)) for m in ranked]) for row in board.datasets if row.main]

    # ------------------------------------------------------------------ the layout
    def on_resize(self) -> None:
        self._fit_panes()

    def on_descendant_focus(self) -> None:
        self._fit_panes()  # the pane moved to may grow (layout.py)
        self.refresh_keys()

    def _fit_panes(self) -> None:
        """Size every pane for the screen as it is now (ui/layout.py), and each table's columns
        for its width. Cheap when nothing changed: the arithmetic only."""
        width, room = self.size.width, self.size.height - STRIP - FOOTER
        if width <= 0 or room <= 0:
            return
        columns = self.progress.column_needs()
        board_width = self.board.column_needs().width(layout.FITS[1])
        split = layout.side_widths(columns, board_width, width)
        self.progress.fit_to(split[0] if split else width)
        self.board.fit_to(split[1] if split else width)
        shown = self.failures.line_count > 0
        focused = self.focused
        needs = layout.Needs(
            self.progress.rows_needed, self.board.rows_needed,
            self.failures.line_count + layout.FRAME if shown else 0,
            self.chart.lines + layout.FRAME if self.chart.lines else 0,
            focus=focused.id if focused is not None and focused.id in (layout.PROGRESS, layout.BOARD, layout.FAILURES) else "",
            finished=self.state.finished is not None and not self.state.live,
        )
        heights = layout.side_by_side(needs, room) if split else layout.stacked(needs, room)
        self._apply(split, heights, width)

    def _apply(self, split: tuple[int, int] | None, h: layout.Heights, width: int) -> None:
        rate = self._rate_width()
        sizes = (split, h, rate)
        if sizes == self._applied:
            return
        self._applied = sizes
        self.top.set_class(split is not None, "-side")
        self.progress.styles.width = split[0] if split else "1fr"
        self.side.styles.width = split[1] if split else "1fr"
        self.progress.styles.height = h.progress
        self.board.styles.height = h.board
        self.chart.styles.height = h.chart
        self.chart.display = h.chart > 0
        self.side.styles.height = h.top if split else h.board + h.chart
        self.top.styles.height = h.top
        self.failures.styles.height = h.failures
        if self.failures.display != (h.failures > 0):
            if h.failures == 0 and self.failures.has_focus:
                self.progress.focus()
            self.failures.display = h.failures > 0
        self.rate.display = rate >= RATE_LINE[0]
        self.rate.styles.width = max(rate, 1)
        self.progress.planned_rows = h.progress - layout.FRAME - 1
        self.progress.say_fold()

    # ------------------------------------------------------------------ what it shows
    def leaderboard(self) -> Leaderboard | None:
        """The plan's table with the scores this screen has seen; the engine's final one at the end."""
        finished = self.state.finished
        if finished is not None and finished.leaderboard is not None and not self.state.live:
            return finished.leaderboard
        if not self._plan_pairs.issuperset(self.state.pairs):  # a followed run's pairs appear as it goes
            self._empty_board = dataclasses.replace(self.runner.leaderboard(), scores={}, extra={}, intervals={})
            self._plan_pairs = frozenset(self.runner.pairs)
        values = board_values(self.state.pairs.values(), self._plan_pairs)
        return dataclasses.replace(self._empty_board, scores=values.scores, extra=values.extra, intervals=values.intervals)
