"""Where the run screen's panes go and how big each is, as arithmetic over what each pane holds
and the room the terminal gives: no widget here, so every size can be checked in a test.

Side by side (progress left; the leaderboard and the score chart right) only where both fit
whole; else stacked. Each pane is as tall as what it holds while the room allows; where it does
not, each keeps a few rows and the rest goes first to the pane that matters most now — the one
you moved to with Tab, else the progress pane while the run goes on and the leaderboard once it
has ended. The failures pane, once something failed, runs the screen's width at the bottom and
takes what is left over; the chart only what nobody else needs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

FRAME = 2  # a pane's round border, top and bottom (and left and right)
GUTTER = 1  # the vertical scrollbar's column, kept whether it shows or not (no reflow when it comes)
PAD = 2  # a DataTable cell's padding, left and right
SQUEEZED = 6  # a pane short of room keeps its frame, header and three rows
FAILURES_MIN, FAILURES_FOCUSED = 4, 9  # two lines of failures; nine rows when moved to
CHART_MIN = 5  # fewer rows than this and the chart is not worth showing

PROGRESS, BOARD, FAILURES = "progress", "leaderboard", "failures"


@dataclass(frozen=True)
class Needs:
    """Rows (frame included) each pane takes to show all it holds; 0: not shown."""

    progress: int
    board: int
    failures: int = 0
    chart: int = 0
    focus: str = PROGRESS  # PROGRESS, BOARD, FAILURES, or "" (the chart, say)
    finished: bool = False


@dataclass(frozen=True)
class Heights:
    progress: int
    board: int
    chart: int
    failures: int
    top: int  # the rows above the failures pane (side by side: shared by progress and the side column)


def _order(needs: Needs) -> list[str]:
    """Who gets the rows beyond each pane's few: the focused pane first; once the run ended the
    leaderboard before the progress pane (it is what is left to read)."""
    if needs.finished:
        first = [FAILURES, BOARD] if needs.focus == FAILURES else [BOARD]
    else:
        first = [needs.focus] if needs.focus in (PROGRESS, BOARD, FAILURES) else []
    order: list[str] = []
    for pane in [*first, PROGRESS, BOARD, FAILURES]:
        if pane not in order:
            order.append(pane)
    return order


def stacked(needs: Needs, room: int) -> Heights:
    """Progress, leaderboard, chart and failures one under the other, in `room` rows."""
    want = {PROGRESS: needs.progress, BOARD: needs.board, FAILURES: needs.failures}
    floor = {PROGRESS: min(want[PROGRESS], SQUEEZED), BOARD: min(want[BOARD], SQUEEZED), FAILURES: min(want[FAILURES], FAILURES_MIN)}
    for pane in (FAILURES, BOARD, PROGRESS):  # a tiny terminal: the few rows shrink, the failures' first
        over = sum(floor.values()) - room
        if over > 0:
            floor[pane] = max(min(floor[pane], FRAME + 1), floor[pane] - over)
    got = dict(floor)
    left = room - sum(got.values())
    chart = 0
    for pane in _order(needs):
        if pane == FAILURES and needs.finished and needs.focus != FAILURES:  # the run is over: its picture before more failures
            chart, left = _chart(needs.chart, left)
        more = max(0, min(want[pane] - got[pane], left))
        got[pane] += more
        left -= more
    if not chart:
        chart, left = _chart(needs.chart, left)
    return Heights(got[PROGRESS], got[BOARD], chart, got[FAILURES], room - got[FAILURES])


def _chart(want: int, left: int) -> tuple[int, int]:
    """(the chart's rows, the rows left after it): none where fewer than CHART_MIN are left."""
    rows = min(want, left) if want and left >= CHART_MIN else 0
    return rows, left - rows


def side_by_side(needs: Needs, room: int) -> Heights:
    """Progress on the left, the leaderboard (and the chart under it) on the right, the failures
    pane across the bottom taking what the taller of the two leaves (and a few rows at least;
    once the run has ended, what the chart leaves)."""
    failures = 0
    if needs.failures:
        floor = min(needs.failures, FAILURES_FOCUSED if needs.focus == FAILURES else FAILURES_MIN)
        above = max(needs.progress, needs.board + (needs.chart if needs.finished and needs.focus != FAILURES else 0))
        failures = max(floor, min(needs.failures, room - above))
        failures = min(failures, max(room - SQUEEZED, FRAME + 1))
    top = room - failures
    board = min(needs.board, top)
    chart = min(needs.chart, top - board) if needs.chart and top - board >= CHART_MIN else 0
    return Heights(min(needs.progress, top), board, chart, failures, top)


@dataclass(frozen=True)
class BoardFit:
    """How the leaderboard's columns give way when the room is short, one step at a time: the
    dataset names shortened in the middle (their full names are in the details), each score's
    `±2.00` and the Average's `(2/4)` left out (the details and the chart keep the interval),
    the metric column left out, the names shorter, the headers' ranks left out,
    the headers shortened. A score itself is never shortened."""

    names: int
    metric: bool = True
    detail: bool = True  # each score's interval, the partial Average's count
    ranks: bool = True
    headers: int = 0  # 0: whole

    def model_width(self, header: int, rank: int, score: int, detailed: int) -> int:
        """A model's column: its header (`1. name`, `rank` of it the rank) and its widest score
        (`detailed`: the widest with its interval, or the partial Average's count)."""
        head = header - (0 if self.ranks else rank)
        if self.headers:
            head = min(head, self.headers)
        return max(head, detailed if self.detail else score)


FITS = (
    BoardFit(40),
    BoardFit(24),
    BoardFit(24, detail=False),
    BoardFit(24, metric=False, detail=False),
    BoardFit(24, metric=False, detail=False, ranks=False),
    BoardFit(12, metric=False, detail=False, ranks=False),
    BoardFit(12, metric=False, detail=False, ranks=False, headers=6),
)


@dataclass(frozen=True)
class BoardColumns:
    """What the leaderboard's columns need, whole: the widest dataset name and metric, and per
    model (header, its rank prefix, widest score, widest score with its interval or the Average's count)."""

    names: int
    metric: int
    models: tuple[tuple[int, int, int, int], ...]

    def width(self, fit: BoardFit) -> int:
        """The pane's outer width with `fit`."""
        columns = [min(self.names, fit.names)] + ([self.metric] if fit.metric else [])
        columns += [fit.model_width(*m) for m in self.models]
        return FRAME + GUTTER + sum(c + PAD for c in columns)

    def fit(self, room: int) -> BoardFit:
        """The most generous fit within `room` columns (the tightest when none is), its names
        as wide as the columns it leaves allow."""
        for fit in FITS:
            if self.width(fit) <= room:
                return dataclasses.replace(fit, names=max(fit.names, min(self.names, fit.names + room - self.width(fit))))
        return FITS[-1]


@dataclass(frozen=True)
class ProgressColumns:
    """The progress pane's columns: the name column (dataset names under their model, shard
    rows) and the bar give way; the counters, status, rate, ETA and score keep their widths."""

    names: int  # the widest name cell, whole
    fixed: int  # the other columns' widths, their padding included

    BAR_MIN, BAR_GOOD, BAR_MAX = 6, 20, 40
    NAMES_MIN, NAMES_GOOD = 12, 24

    def split(self, width: int) -> tuple[int, int]:
        """(names, bar) for a pane `width` wide, the room given in turn: names up to 24 (at least
        12) beside a bar of 6, the bar up to 20, the names whole, the bar up to 40. A name
        longer than its column is shortened in the middle."""
        inner = width - FRAME - GUTTER - self.fixed - 2 * PAD
        names = min(self.names, max(self.NAMES_MIN, min(self.NAMES_GOOD, inner - self.BAR_MIN)))
        bar = self.BAR_MIN
        for grow in ("bar", "names", "bar"):
            left = max(0, inner - names - bar)
            if grow == "names":
                names += min(self.names - names, left)
            else:
                bar += min((self.BAR_GOOD if names < self.names else self.BAR_MAX) - bar, left)
        return names, bar

    def width(self, names: int, bar: int) -> int:
        return FRAME + GUTTER + self.fixed + 2 * PAD + names + bar

    @property
    def natural(self) -> int:
        """As wide as it is worth: whole names, the longest bar."""
        return self.width(self.names, self.BAR_MAX)

    @property
    def least(self) -> int:
        """The narrowest it may be beside the leaderboard: names of 20 at most, a bar of 12."""
        return self.width(min(self.names, 20), 12)


def side_widths(progress: ProgressColumns, board: int, width: int) -> tuple[int, int] | None:
    """(progress, side) widths where both fit side by side — the progress pane up to its natural
    width, the side column the rest — else None (stacked)."""
    if width - board < progress.least:
        return None
    left = min(progress.natural, width - board)
    return left, width - left
