"""Pictures where people would rather look than read: each dataset's scores as bars, one a
model, and the run's throughput over the last minutes as a sparkline in the strip.

The bars are rich's `Bar` (half-cell steps) in a grid; a score's interval, where the scorer
gives one (scoring's 95 % interval: `Mark.low`/`Mark.high`), is drawn as a second bar under the score's, from its low end
to its high. Both are repainted only when what they show changed: the chart when a score came
in, the sparkline once a second.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar, NamedTuple

from rich.bar import Bar
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Sparkline, Static

from evaltui.scoring.stats.interval import Interval
from evaltui.ui import fmt, look
from evaltui.ui.look import Look

SCALE = 100.0  # scores are percentages
HISTORY = 120  # seconds of throughput the sparkline keeps


class Mark(NamedTuple):
    """One model's score of one dataset, and its interval when known."""

    model: str
    score: float | None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, model: str, score: float | None, interval: Interval | None) -> Mark:
        """The mark of a score and its 95 % interval (scoring's, in percent), when it has one."""
        if score is None or interval is None:
            return cls(model, score)
        return cls(model, score, interval.low, interval.high)


class ScoreChart(VerticalScroll):
    """Per dataset, a bar per model (best first, the best in its own colour)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.CHART)

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.look = Look(self)
        self._body = Static(id="scores-body")
        self._shown: tuple[object, ...] | None = None
        self._drawn: dict[str, tuple[list[Mark], RenderableType]] = {}  # each dataset's marks and picture shown
        self.lines = 0  # what the chart takes, in rows
        self.picture: RenderableType = ""

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._body

    def show(self, rows: list[tuple[str, list[Mark]]], *, restyled: bool = False) -> None:
        """`rows`: (dataset, its marks) in the leaderboard's order; a dataset none scored yet is left out."""
        rows = [(name, marks) for name, marks in rows if any(m.score is not None for m in marks)]
        if tuple(rows) == self._shown and not restyled:
            return
        self._shown = tuple(rows)
        self.lines = sum(1 + sum(2 if m.low is not None and m.high is not None else 1 for m in marks) for _, marks in rows)
        drawn, self._drawn = self._drawn, {}
        for name, marks in rows:  # a dataset's picture made again only when its marks changed
            same = drawn.get(name)
            self._drawn[name] = same if same is not None and same[0] == marks and not restyled else (marks, self._dataset(name, marks))
        self.picture = Group(*(self._drawn[name][1] for name, _ in rows)) if rows else ""
        self._body.update(self.picture)

    def _dataset(self, name: str, marks: list[Mark]) -> RenderableType:
        best = max((m.score for m in marks if m.score is not None), default=None)
        names = max(len(m.model) for m in marks)
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(width=min(names, 20) + 1, no_wrap=True, overflow="ellipsis")  # under its dataset, a column in
        grid.add_column(ratio=1)
        grid.add_column(width=6, justify="right")
        for m in marks:
            if m.score is None:
                grid.add_row(Text(f" {m.model}"), Text(""), Text("-"))
                continue
            style = self.look(look.CHART_BEST if m.score == best else look.CHART_BAR)
            grid.add_row(Text(f" {m.model}"), Bar(SCALE, 0, m.score, color=style.color or "default"), Text(f"{m.score:.2f}"))
            if m.low is not None and m.high is not None:
                interval = self.look(look.CHART_INTERVAL)
                span = Bar(SCALE, max(0.0, m.low), min(SCALE, m.high), color=interval.color or "default")  # a t interval may pass 0 or 100
                grid.add_row(Text(""), span, Text(f"±{(m.high - m.low) / 2:.2f}", style=interval))
        return Group(Text(name, style="bold"), grid)


class RateLine(Sparkline):
    """Samples per second over the last two minutes, one value a second; in the strip where it
    is wide enough."""

    def __init__(self, **kw: object) -> None:
        super().__init__([], **kw)  # type: ignore[arg-type]
        self._rates: deque[float] = deque(maxlen=HISTORY)
        self._last: tuple[float, int] | None = None  # (when, samples done) at the last second

    def sample(self, now: float, done: int) -> None:
        """Note how many samples are done at `now` (called about once a second)."""
        if self._last is not None and now > self._last[0]:
            self._rates.append(max(0, done - self._last[1]) / (now - self._last[0]))
            self.data = list(self._rates)
        self._last = (now, done)

    @property
    def said(self) -> str:
        """The newest rate, in the strip's words (tests read it)."""
        return fmt.rate(self._rates[-1] if self._rates else None)
