"""The progress pane: one DataTable row per model×dataset, plus one per shard when it is split.

Hundreds of rows must stay smooth, so bars are rich Text in cells rather than widgets, rows are
keyed, and a repaint only writes the cells whose text changed (the reconcile-by-key pattern).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist, RowKey

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.engine.stream.pair import PairState
from evaltui.engine.stream.state import RunState
from evaltui.scoring.leaderboard import MISSING
from evaltui.text import duration
from evaltui.ui import fmt, keys, layout, look
from evaltui.ui.look import Look

COLUMNS = ("dataset", "progress", "done", "fail", "status", "req/s", "ETA", "score")
# Fixed widths where the content grows while running (an auto width is measured only once). The
# name column and the bar share what is left (ui/layout.py: ProgressColumns).
WIDTHS = (None, None, 9, 4, 7, 5, 5, 6)
_DONE = COLUMNS.index("done")  # at least 9 (`9999/9999`), wider for a larger total (`123456/200000`)
SHARD_NAME = "  └ shard "  # and its number: under its dataset's name
_RATE, _ETA = COLUMNS.index("req/s"), COLUMNS.index("ETA")


@dataclass
class ShardCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0
    status: str = "pending"


class ShardFold:
    """Per-shard counters, which RunState keeps per pair only; folded from the same events.

    Only a split dataset has shard rows, so a sample's event — one per answer, the hot path —
    is counted only for those: a set lookup, not a pattern match (which cost more than the
    state's own fold)."""

    def __init__(self) -> None:
        self.shards: dict[tuple[str, str, int], ShardCounts] = {}
        self._split: set[tuple[str, str]] = set()  # the pairs in more than one shard
        self._of_pair: dict[tuple[str, str], set[int]] = {}  # each pair's shards with counts: what a new start forgets

    def apply(self, e: ev.Event) -> None:
        kind = type(e)
        if kind is ev.SampleFinished or kind is ev.SampleFailed:
            if self._split and (e.model, e.dataset) in self._split:  # type: ignore[union-attr]
                counts = self.shards.get((e.model, e.dataset, e.shard))  # type: ignore[union-attr]
                if counts is None:
                    counts = self.shards[(e.model, e.dataset, e.shard)] = ShardCounts()  # type: ignore[union-attr]
                    self._of_pair.setdefault((e.model, e.dataset), set()).add(e.shard)  # type: ignore[union-attr]
                if kind is ev.SampleFinished:
                    counts.completed += 1
                else:
                    counts.failed += 1
            return
        match e:
            case ev.ShardStatusChanged(model=m, dataset=d, shard=s, shards=n, status=st, total=t, completed=c, failed=f):
                self.shards[(m, d, s)] = ShardCounts(t, c, f, st)
                self._of_pair.setdefault((m, d), set()).add(s)
                if n > 1:
                    self._split.add((m, d))
            case ev.DatasetPlanned(model=m, dataset=d) | ev.DatasetStarted(model=m, dataset=d):
                # fresh counts come with the shard status events (the pair's own, not a walk over
                # every shard's: at 10,000 datasets that walk, twice a dataset, was most of the session's CPU)
                for s in self._of_pair.pop((m, d), ()):
                    del self.shards[(m, d, s)]
                if isinstance(e, ev.DatasetPlanned) and e.shards > 1:
                    self._split.add((m, d))


def _row_key(model: str, dataset: str | None = None, shard: int | None = None) -> str:
    """A model's heading row, a pair's row, or a shard's row."""
    return "\t".join(str(part) for part in (model, dataset, shard) if part is not None)


def repaint_rows(table: DataTable[Any], rows: Mapping[RowKey, Collection[ColumnKey] | None]) -> None:
    """Repaint the rows whose cells (`rows[row]`: those columns, None: all) were changed in place
    (`table._data`). DataTable.update_cell would drop the render caches of every row (its cache
    keys carry a table-wide update count), and re-rendering a whole screen of rows five times a
    second costs the engine's thread a seventh of the interpreter; a running row's unchanged cells
    (its name, status, score) keep theirs too (a cell is the costly part of a row to render).
    All the rows of a repaint at once: each cache is walked once (a walk per row made a tick's
    cost grow with the rows that moved times the cache's size: 2.4 ms a row), and only the lines
    in sight are refreshed (DataTable.refresh_row sums the heights of every row above). Textual
    is pinned (8.2.8), so these caches are a known shape; tests cover the picture."""
    if not rows:
        return
    cells = table._cell_render_cache
    for cell in [k for k in cells.keys() if k[0] in rows and ((columns := rows[k[0]]) is None or k[1] in columns)]:
        cells.discard(cell)
    for row_key in [k for k in table._row_render_cache.keys() if k[0] in rows]:
        table._row_render_cache.discard(row_key)
    indexes = {index for row in rows if (index := table._row_locations.get(row)) is not None}
    for renderables in [k for k in table._row_renderable_cache.keys() if k[1] in indexes]:
        table._row_renderable_cache.discard(renderables)
    _forget_lines(table, rows)
    _refresh_lines(table, rows)


def _row_at(table: DataTable[Any], y: int) -> RowKey | None:
    """The row on line `y` of the table's content (its header's first); None past its end."""
    try:
        return table._get_offsets(y)[0]
    except LookupError:
        return None


def _forget_lines(table: DataTable[Any], rows: Collection[RowKey]) -> None:
    """Drop the cached lines of `rows` (and of lines past the end): the cache is keyed by line."""
    lines = table._line_cache
    stale = {y for y in {k[0] for k in lines.keys()} if (row := _row_at(table, y)) is None or row in rows}
    for line in [k for k in lines.keys() if k[0] in stale]:
        lines.discard(line)


def _refresh_lines(table: DataTable[Any], rows: Collection[RowKey]) -> None:
    """Ask for the lines in sight that show `rows` to be drawn again (its tables fix no rows but the header)."""
    header = table.header_height if table.show_header else 0
    scroll_y = round(table.scroll_offset.y)
    width, height = table.size
    for y in range(header, height):
        row = _row_at(table, y + scroll_y)
        if row is not None and row in rows:
            table.refresh(Region(0, y, width, 1))


class ProgressTable(DataTable[Text]):
    """Rows grouped under a heading row per model; the bar is as wide as the pane allows."""

    # enter opens the highlighted row's details: bound here too, as the focused table's own
    # (hidden) enter would hide the screen's from the footer
    BINDINGS = keys.table_bindings()
    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.PROGRESS)

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self._cells: dict[str, list[Text]] = {}
        self._pair_of_row: dict[str, Pair] = {}
        self._row_of_pair: dict[Pair, str] = {}  # a pair's row key, for the pairs that have a row
        self._changed: dict[RowKey, list[ColumnKey]] = {}  # the cells a sync changed, by row
        self._models: set[str] = set()
        self._width = 0  # the pane's width, as the screen's layout gives it
        self._name_width, self._bar_width = layout.ProgressColumns.NAMES_MIN, layout.ProgressColumns.BAR_MIN
        self._done = WIDTHS[_DONE] or 0  # the done column's width, as the largest total needs
        self._names = layout.ProgressColumns.NAMES_MIN  # the widest text in the name column, whole
        self._known: set[Pair] = set()
        self._source: tuple[RunState, ShardFold] | None = None  # what the last sync showed
        self.look = Look(self)
        self._keep: str | None = None  # the highlighted row's key across a rebuild
        self.needs_full_sync = True
        self.planned_rows: int | None = None  # the data rows the layout gives it (None: as measured)

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for name, width in zip(COLUMNS, self._widths(), strict=False):
            if name == "progress":
                label = name if self._bar_width >= len(name) else "bar"
                self.add_column(label, key=name, width=self._bar_width)
            else:
                self.add_column(name, key=name, width=width)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.say_fold()

    @property
    def rows_needed(self) -> int:
        """Its height with every row in sight: the rows, the header, the frame."""
        return self.row_count + 1 + layout.FRAME

    def say_fold(self) -> None:
        """Say in the bottom border how many rows are out of sight above and below: at 80×24 a
        second model's datasets can be below the fold, and a scrollbar alone is easy to miss.
        From the rows the layout gives the pane, not its measured size, which lags a frame
        behind a change (at the start it said `↓ 7 more` over ten rows in sight)."""
        shown = self.planned_rows if self.planned_rows is not None else self.scrollable_content_region.height - self.header_height
        if shown <= 0:
            return
        above = round(self.scroll_y)
        below = max(0, self.row_count - above - shown)
        said = "  ".join(part for part in (f"↑ {above} more" if above else "", f"↓ {below} more" if below else "") if part)
        if said != self.border_subtitle:
            self.border_subtitle = said

    def _widths(self) -> list[int | None]:
        return [self._name_width if i == 0 else self._done if i == _DONE else w for i, w in enumerate(WIDTHS)]

    def column_needs(self) -> layout.ProgressColumns:
        """What its columns need (the screen's layout asks, to size the pane)."""
        return layout.ProgressColumns(self._names, sum(w for w in self._widths()[2:] if w) + layout.PAD * (len(COLUMNS) - 2))

    def _fit_columns(self, state: RunState, pairs: set[Pair] | None) -> None:
        """Columns as wide as new pairs need: their names, their totals (`done/total` never cut)."""
        if len(state.pairs) != len(self._known):  # new pairs: their names may be wider
            names = [len(m) for m in {m for m, _ in state.pairs}] + [len(d) + 2 for _, d in state.pairs]
            self._names = max([self._names, *names, *(len(SHARD_NAME) + 2 + len(str(p.shards - 1)) for p in state.pairs.values() if p.shards > 1)])
            self._known = set(state.pairs)
            self.fit_to(self._width)
        moved = state.pairs.values() if pairs is None else [state.pairs[key] for key in pairs if key in state.pairs]
        widest = max((p.total for p in moved), default=0)
        if 2 * len(str(widest)) + 1 > self._done:
            self._done = 2 * len(str(widest)) + 1
            self.fit_to(self._width, rebuild=True)

    def fit_to(self, width: int, *, rebuild: bool = False) -> None:
        """Fit the columns to a pane `width` wide: names whole where they fit, else shortened in
        the middle; the bar what is left. The rows are rebuilt when a width changed (or when
        asked: the done column grew)."""
        self._width = width
        names, bar = self.column_needs().split(width) if width else (self._name_width, self._bar_width)
        if (names, bar) != (self._name_width, self._bar_width) or rebuild:
            self._name_width, self._bar_width = names, bar
            self._keep = self._cursor_row_key() or self._keep  # the row `r` and enter act on stays the one chosen
            self.clear(columns=True)  # every row comes back, at the new widths, at once
            self._cells.clear()
            self._pair_of_row.clear()
            self._row_of_pair.clear()
            self._models.clear()
            self._add_columns()
            self.needs_full_sync = True
            if self._source is not None:
                self.sync(*self._source, None)  # now: a blank table until the next tick would flicker

    def shown_line(self, model: str, dataset: str) -> str:
        """The row of a pair as it is on screen now (what a user reads; tests check it)."""
        return self.render_line(self.header_height + self.get_row_index(_row_key(model, dataset)) - self.scroll_offset.y).text

    def highlighted_pair(self) -> Pair | None:
        return self._pair_of_row.get(self._cursor_row_key() or "")

    def highlighted_model(self) -> str | None:
        """The model whose heading row is highlighted (enter shows its breakdown)."""
        key = self._cursor_row_key()
        return key if key in self._models else None

    def _cursor_row_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - the cursor is between states (table being filled)
            return None

    def _place_cursor(self) -> None:
        """After the rows are (re)built: back on the row that was highlighted, else the first dataset."""
        key, self._keep = self._keep, None
        if key is not None:
            with contextlib.suppress(RowDoesNotExist):  # that row is gone: the first dataset then
                self.move_cursor(row=self.get_row_index(key))
                return
        self.move_cursor(row=1)  # the first dataset, not its model's heading

    def sync(self, state: RunState, shards: ShardFold, pairs: set[Pair] | None, *, rates: bool = True) -> None:
        """Bring rows for `pairs` (None: all) up to date with the state; `rates=False` keeps the
        req/s and ETA cells as they are (they move every tick, and a repaint costs the engine).
        Only `pairs` are visited while every pair has its row (a plan of thousands of datasets:
        a tick's work is that of the rows that moved), and the rows that changed are repainted
        together."""
        self._source = (state, shards)
        self._fit_columns(state, pairs)
        if self.needs_full_sync:
            pairs, self.needs_full_sync = None, False
        now = state.clock()
        was_empty = not self._cells
        rows_before = self.row_count
        rows = self._row_of_pair
        for key, p in self._to_visit(state, pairs):
            if p.model not in self._models:
                self._models.add(p.model)
                self.add_row(Text(fmt.middle(p.model, self._name_width), style="bold"), *(Text("") for _ in COLUMNS[1:]), key=_row_key(p.model))
            row = rows.get(key) or rows.setdefault(key, _row_key(*key))
            cells = self._pair_cells(p, now)
            old = self._cells.get(row)
            if not rates and old is not None and p.status == ev.PairStatus.RUNNING:
                cells[_RATE:_ETA + 1] = old[_RATE:_ETA + 1]
            self._put(row, key, cells)
            if p.shards > 1:
                for s in range(p.shards):
                    counts = shards.shards.get((p.model, p.dataset, s), ShardCounts(status="pending"))
                    self._put(_row_key(p.model, p.dataset, s), key, self._shard_cells(s, counts))
        changed, self._changed = self._changed, {}
        repaint_rows(self, changed)
        if was_empty and self._cells:
            self._place_cursor()
        if self.row_count != rows_before:  # rows came in below the fold: the count under it grows (the layout may not change)
            self.say_fold()

    def _to_visit(self, state: RunState, pairs: set[Pair] | None) -> list[tuple[Pair, PairState]]:
        """`pairs` (None: every pair), and every pair without a row yet, in the state's order then."""
        if pairs is None or len(self._row_of_pair) != len(state.pairs):  # new pairs: their rows go in in the state's order
            return [(key, p) for key, p in state.pairs.items() if pairs is None or key in pairs or key not in self._row_of_pair]
        return [(key, state.pairs[key]) for key in pairs if key in state.pairs]

    def _put(self, key: str, pair: Pair, cells: list[Text]) -> None:
        """Add the row, or write its changed cells in place (repainted together at the sync's end)."""
        old = self._cells.get(key)
        if old is None:
            self.add_row(*cells, key=key)
            self._cells[key] = cells
            self._pair_of_row[key] = pair
            return
        changed = []
        for name, before, after in zip(COLUMNS, old, cells, strict=False):
            if not fmt.same(before, after):
                self._data[RowKey(key)][ColumnKey(name)] = after
                changed.append(ColumnKey(name))
        if changed:
            self._changed[RowKey(key)] = changed
        self._cells[key] = cells

    def _pair_cells(self, p: PairState, now: float) -> list[Text]:
        eta = p.eta(now) if p.status == ev.PairStatus.RUNNING else None
        throughput = p.throughput(now) if p.status == ev.PairStatus.RUNNING else None
        score = Text(f"{p.score:.2f}", style=self.look(look.SCORE)) if p.score is not None else Text(MISSING)  # the leaderboard's sign
        failed = Text(str(p.failed), style=self.look(look.FAILED)) if p.failed else Text("0")
        progress, status = fmt.bar(p.completed, p.failed, p.total, self._bar_width, self.look), fmt.status_text(p.status, self.look)
        if p.judge and (p.judging or p.status == ev.PairStatus.SCORING):  # its judge at work: its verdicts before the bar
            short = f"j {p.judged}/{p.to_judge}"
            if p.status == ev.PairStatus.RUNNING:  # judged as it is answered: the bar stays its answers'
                progress = fmt.judging_bar(p.judged_text(), short, p.completed, p.failed, p.total, self._bar_width, self.look)
            else:  # its answers are in: the bar is its verdicts'
                progress = fmt.judging_bar(p.judged_text(), short, p.judged, p.judge_failed, p.to_judge, self._bar_width, self.look)
                if p.judging:
                    status = Text("judging", style=self.look(look.STATUS[ev.PairStatus.SCORING]))
        return [
            Text("  " + fmt.middle(p.dataset, self._name_width - 2)),
            progress,
            Text(f"{p.completed + p.failed}/{p.total}" + (f" · {p.requests} req" if p.conversation else ""), justify="right"),
            failed,
            status,
            Text(fmt.rate(throughput), justify="right"),
            Text(duration(eta), justify="right"),
            score,
        ]

    def _shard_cells(self, shard: int, c: ShardCounts) -> list[Text]:
        muted = self.look(look.MUTED)
        return [
            Text(f"  {SHARD_NAME}{shard}", style=muted),
            fmt.bar(c.completed, c.failed, c.total, self._bar_width, self.look),
            Text(f"{c.completed + c.failed}/{c.total}", justify="right", style=muted),
            Text(str(c.failed), style=muted),
            fmt.status_text(c.status, self.look),
            Text(""),
            Text(""),
            Text(""),
        ]
