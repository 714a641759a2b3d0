"""The keys of the run screen that act on a model×dataset: retry it (`r`), retry every failed
one (`R`), open its details (`enter`) — on the pair highlighted in the focused table, the
progress pane's or the leaderboard's — and, where a key does not apply, why.

It keeps to itself which retries it asked for: a pair is not offered again until its retry is over.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

from textual.screen import Screen
from textual.widgets import DataTable

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.delta import follow
from evaltui.engine.stream.events import Pair
from evaltui.engine.stream.source import RunSource
from evaltui.engine.stream.state import RETRYABLE, RunState
from evaltui.ui.engine_thread import EngineThread
from evaltui.ui.screens.details import DetailsScreen
from evaltui.ui.screens.fleet import FleetScreen
from evaltui.ui.toast import toast
from evaltui.ui.widgets.board import LeaderboardTable
from evaltui.ui.widgets.progress import ProgressTable

PAIR_ACTIONS = ("retry", "retry_all", "details")


def _which(pairs: Sequence[Pair]) -> str:
    """One pair by name; several by their count (a toast has one line; the rows say which)."""
    return f"{pairs[0][0]}/{pairs[0][1]}" if len(pairs) == 1 else f"{len(pairs)} datasets"


class PairActions(Screen[None]):
    """The run screen's actions (screens/run.py builds the panes they read)."""

    runner: RunSource
    engine: EngineThread
    state: RunState
    progress: ProgressTable
    board: LeaderboardTable

    def __init__(self) -> None:
        super().__init__()
        self._keys_shown: tuple[bool, ...] = ()
        self._retrying: set[Pair] = set()  # asked for; not offered again until over
        self._retry_started: set[Pair] = set()  # of those, the ones the engine took up
        self._retry_jobs: dict[int, tuple[Pair, ...]] = {}  # retry job -> its pairs
        # the pairs retryable() would list, kept as the deltas name the pairs that changed
        # (follow_retryable): the footer asks every tick that statuses changed, and a walk over
        # thousands of pairs for it was a share of the engine's interpreter
        self._retry_candidates: set[Pair] = set()

    def follow_retryable(self, pairs: set[Pair] | None) -> None:
        """Keep the set of pairs `r`/`R` may act on from the pairs that changed (None: every pair)."""
        kinds = RETRYABLE | {ev.PairStatus.STOPPED} if self.runner.watching else RETRYABLE
        self._retry_candidates = follow(self.state.pairs, self._retry_candidates, pairs, kinds)

    def follow_retries(self, retried: frozenset[Pair] | set[Pair], settled: frozenset[Pair] | set[Pair]) -> bool:
        """Which asked-for retries the engine took up, and which are over: a retry joined to a
        live run ends with that run, but each pair's part in it ends on its own. True when one ended."""
        self._retry_started.update(retried)
        over = self._retry_started & settled
        self._retry_started -= over
        self._retrying -= over
        return bool(over)

    def job_ended(self, job: Future[int]) -> bool:
        """A run or retry job ended: its pairs may be offered again. True if it was a retry."""
        pairs = self._retry_jobs.get(id(job), ())
        self._retrying.difference_update(pairs)  # others still run
        self._retry_started.difference_update(pairs)
        return id(job) in self._retry_jobs

    def highlighted(self) -> Pair | None:
        """The pair the focused table's cursor is on: the leaderboard's when it has the focus."""
        return self.board.highlighted_pair() if self.board.has_focus else self.progress.highlighted_pair()

    def highlighted_model(self) -> str | None:
        """The model whose heading row (progress) or Average cell (leaderboard) is highlighted."""
        return self.board.highlighted_model() if self.board.has_focus else self.progress.highlighted_model()

    def retryable(self) -> list[Pair]:
        """What `r`/`R` act on; watching, a stopped run's unfinished pairs too (`r` says how it resumes)."""
        pairs = self.state.failed_pairs() + (self.state.stopped_pairs() if self.runner.watching else [])
        return [p for p in pairs if p not in self._retrying]

    def action_applies(self, action: str) -> bool:
        """Whether `action` means something now (the footer and the command palette ask)."""
        if action == "retry":
            pair = self.highlighted()
            return pair in self._retry_candidates and pair not in self._retrying
        if action == "retry_all":
            return any(p not in self._retrying for p in self._retry_candidates)
        if action == "details":
            return self.highlighted() is not None or self.highlighted_model() is not None
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "why_not":
            return len(self.app.screen_stack) == 1
        if action in PAIR_ACTIONS:
            if len(self.app.screen_stack) > 1:
                return False  # behind a details or help screen these keys mean nothing
            return self.action_applies(action)
        return True

    def refresh_keys(self) -> None:
        """Refresh the footer when the keys that apply changed: it rebuilds itself each time,
        which is costly enough to slow the engine if done every tick."""
        keys = tuple(self.action_applies(a) for a in PAIR_ACTIONS)
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.refresh_bindings()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.refresh_keys()

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        self.refresh_keys()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_details()  # a click on a row: its details, as enter

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
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
            model = self.highlighted_model()
            if model is not None:  # a model's heading row (or Average cell): its replicas and limits
                cfg = self.runner.models.get(model)
                if cfg is None:
                    toast(self.app, f"{model}: this work dir does not say how the model is served", timeout=4)
                else:
                    self.app.push_screen(FleetScreen(cfg, self.state, load_known=not self.runner.watching))
            return
        model, dataset = pair
        known = self.state.pairs.get(pair)
        reason = known.error if known is not None else ""
        self.app.push_screen(DetailsScreen(model, dataset, lambda: self.runner.pair_details(model, dataset), reason=reason))
