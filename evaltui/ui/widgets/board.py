"""The leaderboard pane: datasets × models (ranked, best first), and an Average row that fills in
live.

A missing score is the `-` of the table `--no-ui` prints and the summary files hold (on the
whole screen: the progress pane's score column too); `–` is for what is not known yet or not
measured (ETA, req/s, the load of a watched run).

A score shows its 95 % interval (`93.00 ±3.54`, scoring's format_score) where the pane is wide
enough. Its columns are fitted to the width the layout gives the pane (ui/layout.py: BoardFit):
names shortened in the middle, the intervals, then the metric column and the ranks left out — a
score is never cut.
It has a cell cursor: `enter` on a score opens that model's details of that dataset; on the
Average row, the model's breakdown.

Scores come in one pair at a time, hundreds of them on a big plan: a score changes its cell
and the Average row in place (the progress pane's reconcile-by-key); the table is built again
only when its columns change: the ranking, a label, the width a column needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import ClassVar, NamedTuple

from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey

from evaltui.engine.stream.events import Pair
from evaltui.scoring.leaderboard import MISSING, DatasetRow, Leaderboard, RankedModel, format_score
from evaltui.ui import fmt, keys, layout, look
from evaltui.ui.look import Look
from evaltui.ui.widgets.progress import repaint_rows

AVERAGE = "Average"


class Row(NamedTuple):
    """One row whole, before it is fitted: its name, metric, each model's score cell and the same
    in detail (with its interval `±3.54`; the partial Average's with its count `(2/4)`)."""

    name: str
    abbr: str  # the dataset it is about ("" for the Average)
    metric: str
    main: bool
    scores: tuple[Text, ...]
    detailed: tuple[Text, ...]


class LeaderboardTable(DataTable[Text]):
    BINDINGS = keys.table_bindings()
    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.BOARD)

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=True, **kw)  # type: ignore[arg-type]
        self._shown: tuple[object, ...] | None = None
        self._board: tuple[list[RankedModel], dict[str, Row]] = ([], {})
        self._needs = layout.BoardColumns(len("dataset"), len("metric"), ())
        self._width = 0  # the pane's, as the layout gives it
        self._fit = layout.FITS[0]
        self._built: tuple[object, ...] | None = None  # the built table's labels, widths and row keys
        self._rows: dict[str, list[Text]] = {}
        self._lens: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}  # each row's cells' widths (_row_lens)
        self._frame: tuple[object, ...] = ((), ())  # the rows and the models' order shown (_same_frame)
        self.look = Look(self)

    # ------------------------------------------------------------------ what it shows
    def show(self, board: Leaderboard | None, *, restyled: bool = False, datasets: Collection[str] | None = None) -> None:
        """Show `board`; `restyled`: the theme changed, so cells whose text is the same may not be.
        `datasets`: the only datasets whose scores may have changed (None: any). With the same
        rows and the same order of models, only those rows and the Average are made again and
        repainted (a plan of thousands of datasets: a score's cost is its row's, not the table's)."""
        if board is None:
            return
        ranked = board.ranking()
        if datasets is not None and not restyled and self._shown is not None and self._same_frame(board, ranked):
            self._show_rows(board, ranked, datasets)
            return
        values = (board.scores, board.extra, board.intervals)
        signature = (board.datasets, tuple(ranked), *(tuple(sorted(v.items())) for v in values))
        if signature == self._shown and not restyled:
            return
        self._shown, self._frame = signature, (board.datasets, tuple(r.model for r in ranked))
        rows = self._whole_rows(board, ranked)
        self._board = (ranked, rows)
        self._lens = {key: self._row_lens(row) for key, row in rows.items()}
        self._measure(ranked)
        self._paint()

    def _same_frame(self, board: Leaderboard, ranked: list[RankedModel]) -> bool:
        """The same rows, and the models in the same order, as the table shown."""
        return board.datasets == self._frame[0] and tuple(r.model for r in ranked) == self._frame[1]

    def _show_rows(self, board: Leaderboard, ranked: list[RankedModel], datasets: Collection[str]) -> None:
        """Make again the rows of `datasets` and the Average; repaint them (the rest as they were)."""
        rows = dict(self._board[1])
        again = {AVERAGE}
        for row in board.datasets:
            if row.abbr in datasets:
                key, whole = self._whole_row(board, ranked, row)
                rows[key] = whole
                again.add(key)
        rows[AVERAGE] = self._average_row(board, ranked)
        self._board = (ranked, rows)
        self._shown = (board.datasets, tuple(ranked), None)  # not a full signature: the next full show compares anew
        for key in again:
            self._lens[key] = self._row_lens(rows[key])
        fit = self._fit
        self._measure(ranked, same_rows=True)
        self._paint(only=again if self._fit == fit else None)

    def _measure(self, ranked: list[RankedModel], *, same_rows: bool = False) -> None:
        """The columns' needs, and the fit to the pane's width; `same_rows`: the names and metrics
        are those measured last (only scores changed)."""
        rows = self._board[1].values()
        names = (self._needs.names, self._needs.metric) if same_rows else (
            max(len("dataset"), *(len(r.name) for r in rows)), max(len("metric"), *(len(r.metric) for r in rows)))
        self._needs = layout.BoardColumns(*names, tuple(self._model_needs(i, r) for i, r in enumerate(ranked)))
        self._fit = self._needs.fit(self._width) if self._width else layout.FITS[0]

    def _model_needs(self, i: int, r: RankedModel) -> tuple[int, int, int, int]:
        rank = len(f"{i + 1}. ") if r.average is not None else 0
        lens = self._lens.values()
        return rank + len(r.model), rank, max(score[i] for score, _ in lens), max(detail[i] for _, detail in lens)

    @staticmethod
    def _row_lens(row: Row) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The cells' widths of a row, kept: the columns' needs are their maxima over every row."""
        return tuple(c.cell_len for c in row.scores), tuple(c.cell_len for c in row.detailed)

    def _whole_rows(self, board: Leaderboard, ranked: list[RankedModel]) -> dict[str, Row]:
        rows = dict(self._whole_row(board, ranked, row) for row in board.datasets)
        rows[AVERAGE] = self._average_row(board, ranked)
        return rows

    @staticmethod
    def _whole_row(board: Leaderboard, ranked: list[RankedModel], row: DatasetRow) -> tuple[str, Row]:
        """A dataset's row (its key: the dataset, or with the metric for another metric's row)."""
        cells = tuple(Text(format_score(board.value(r.model, row)), justify="right") for r in ranked)
        detailed = tuple(Text(format_score(board.value(r.model, row), board.interval(r.model, row)), justify="right") for r in ranked)
        return row.abbr if row.main else f"{row.abbr} {row.metric}", Row(row.abbr, row.abbr, row.label, row.main, cells, detailed)

    def _average_row(self, board: Leaderboard, ranked: list[RankedModel]) -> Row:
        scores, detail = [], []
        for r in ranked:
            half = board.average_half(r.model)
            if r.average is None:
                cell = more = Text(MISSING, justify="right")
            elif r.scored < r.total:
                cell = Text(f"{r.average:.2f}", justify="right", style="italic")
                more = Text(f"{r.average:.2f} ({r.scored}/{r.total})", justify="right", style="italic")
            else:
                cell = Text(f"{r.average:.2f}", justify="right", style=self.look(look.BEST))
                more = Text(f"{r.average:.2f}" + (f" ±{half:.2f}" if half is not None else ""), justify="right", style=self.look(look.BEST))
            scores.append(cell)
            detail.append(more)
        return Row(AVERAGE, "", "naive_average", True, tuple(scores), tuple(detail))

    # ------------------------------------------------------------------ fitted to its width
    def column_needs(self) -> layout.BoardColumns:
        return self._needs

    @property
    def overflows(self) -> bool:
        """Wider than its pane even at its tightest (many models at 80 columns): it scrolls sideways."""
        return bool(self._width) and self._needs.width(self._fit) > self._width

    @property
    def shows_intervals(self) -> bool:
        """Whether the scores carry their `±` now (the pane is wide enough for them)."""
        return self._fit.detail

    @property
    def rows_needed(self) -> int:
        """Its height with every row in sight: the rows, the header, the frame (and a scrollbar's row)."""
        return self.row_count + 1 + layout.FRAME + (1 if self.overflows else 0)

    def fit_to(self, width: int) -> None:
        self._width = width
        fit = self._needs.fit(width)
        if fit != self._fit:
            self._fit = fit
            self._paint()

    def _paint(self, only: Collection[str] | None = None) -> None:
        """Build the table, or, when its columns are as built, repaint the cells that changed
        (of the rows `only`, when the others are known to be as they were)."""
        ranked, rows = self._board
        fit, needs = self._fit, self._needs
        widths = [min(needs.names, fit.names)] + ([needs.metric] if fit.metric else [])
        widths += [fit.model_width(*m) for m in needs.models]
        labels = [Text("dataset")] + ([Text("metric")] if fit.metric else []) + [self._header(i, r) for i, r in enumerate(ranked)]
        built = (tuple(r.model for r in ranked), tuple(label.plain for label in labels), tuple(widths), tuple(rows))
        if built == self._built:
            self._update({key: self._fitted(rows[key], widths[0]) for key in (rows if only is None else only)})
            return
        keys_ = ["dataset"] + (["metric"] if fit.metric else []) + [r.model for r in ranked]
        if self._built is not None and built[0] == self._built[0] and built[3] == self._built[3] and keys_ == list(self.columns):
            # the same columns and rows, other widths or headers (the Average's `(999/1000)` gained a
            # digit): changed in place, not every row added again for Textual to measure each cell
            self._built = built
            self._reshape(labels, widths)
            self._update({key: self._fitted(row, widths[0]) for key, row in rows.items()})
            return
        cells = {key: self._fitted(row, widths[0]) for key, row in rows.items()}
        self._built, self._rows = built, cells
        where = self._cursor_keys()
        self.clear(columns=True)
        for label, key, width in zip(labels, keys_, widths, strict=True):
            self.add_column(label, key=key, width=width)
        for key, row_cells in cells.items():
            self.add_row(*row_cells, key=key)
        self._restore_cursor(where)

    def _reshape(self, labels: list[Text], widths: list[int]) -> None:
        """New headers and widths for the built columns. DataTable has no call for it (textual is
        pinned): the columns are its own records, and its caches and size are made again as its
        clear() would, without the rows going."""
        for column, label, width in zip(self.ordered_columns, labels, widths, strict=True):
            column.label, column.width = label, width
        self._clear_caches()
        self._require_update_dimensions = True  # its width, on the next idle (no new row to measure)
        self.refresh()
        if self.row_count:  # the cursor's cell may have moved out of sight sideways (a rebuild brought it back too)
            self.call_after_refresh(self._scroll_cursor_into_view, animate=False)

    def _header(self, i: int, r: RankedModel) -> Text:
        name = f"{i + 1}. {r.model}" if self._fit.ranks and r.average is not None else r.model
        return Text(fmt.middle(name, self._fit.headers) if self._fit.headers else name)

    def _fitted(self, row: Row, names: int) -> list[Text]:
        fit = self._fit
        whole = row.name if fit.metric or row.main else f"{row.name} {row.metric}"  # another metric's row says which
        name = Text(fmt.middle(whole, names), style="bold" if not row.abbr else "")
        return [name] + ([Text(row.metric)] if fit.metric else []) + list(row.detailed if fit.detail else row.scores)

    def _update(self, rows: dict[str, list[Text]]) -> None:
        """Write the cells that changed into the built table and repaint their rows only."""
        columns = list(self.columns)
        repaint: dict[RowKey, list[ColumnKey]] = {}
        for key, cells in rows.items():
            old = self._rows[key]
            changed = [(column, after) for column, before, after in zip(columns, old, cells, strict=False) if not fmt.same(before, after)]
            if not changed:
                continue
            row = RowKey(key)
            for column, after in changed:
                self._data[row][column] = after
            repaint[row] = [column for column, _ in changed]
            self._rows[key] = cells
        repaint_rows(self, repaint)

    # ------------------------------------------------------------------ the cursor
    def _cursor_keys(self) -> tuple[str, str] | None:
        with contextlib.suppress(CellDoesNotExist):
            if self.row_count:
                cell = self.coordinate_to_cell_key(self.cursor_coordinate)
                return str(cell.row_key.value), str(cell.column_key.value)
        return None

    def _restore_cursor(self, where: tuple[str, str] | None) -> None:
        """Back on the cell it was on (the scores' order may have changed), else the first score."""
        models = len(self._board[0])
        first = Coordinate(0, len(self.columns) - models if models else 0)
        if where is not None:
            with contextlib.suppress(Exception):  # that row or column is gone: the first score then
                self.move_cursor(row=self.get_row_index(where[0]), column=self.get_column_index(where[1]))
                return
        self.move_cursor(row=first.row, column=first.column)

    def _cursor_model_and_row(self) -> tuple[str, str] | None:
        """(model, row key) under the cursor; on the name or metric column, the first model's."""
        where = self._cursor_keys()
        ranked = self._board[0]
        if where is None or not ranked:
            return None
        row, column = where
        model = column if any(r.model == column for r in ranked) else ranked[0].model
        return model, row

    def highlighted_pair(self) -> Pair | None:
        found = self._cursor_model_and_row()
        if found is None:
            return None
        row = self._board[1].get(found[1])
        return (found[0], row.abbr) if row is not None and row.abbr else None

    def highlighted_model(self) -> str | None:
        """On the Average row: the model whose column the cursor is in (enter: its breakdown)."""
        found = self._cursor_model_and_row()
        return found[0] if found is not None and found[1] == AVERAGE else None
