"""The progress pane: one DataTable row per model×dataset, plus one per shard when it is split.

Hundreds of rows must stay smooth, so bars are rich Text in cells rather than widgets, rows are
keyed, and a repaint only writes the cells whose text changed (the reconcile-by-key pattern).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from evaltui.engine import events as ev
from evaltui.engine.state import PairState, RunState
from evaltui.ui import fmt

BAR_WIDTH = 16
COLUMNS = ("model", "dataset", "progress", "done", "failed", "status", "req/s", "ETA", "score")
# Fixed widths where the content grows while running (an auto width is only measured once);
# None: sized by the names, which are known when the row is added.
WIDTHS = (None, None, BAR_WIDTH, 13, 6, 7, 6, 6, 6)
Pair = tuple[str, str]


@dataclass
class ShardCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0
    status: str = "pending"


class ShardFold:
    """Per-shard counters, which RunState keeps per pair only; folded from the same events."""

    def __init__(self) -> None:
        self.shards: dict[tuple[str, str, int], ShardCounts] = {}

    def apply(self, e: ev.Event) -> None:
        match e:
            case ev.ShardStatusChanged(model=m, dataset=d, shard=s, status=st, total=n, completed=c, failed=f):
                self.shards[(m, d, s)] = ShardCounts(n, c, f, st)
            case ev.SampleFinished(model=m, dataset=d, shard=s):
                self.shards.setdefault((m, d, s), ShardCounts()).completed += 1
            case ev.SampleFailed(model=m, dataset=d, shard=s):
                self.shards.setdefault((m, d, s), ShardCounts()).failed += 1
            case ev.DatasetPlanned(model=m, dataset=d) | ev.DatasetStarted(model=m, dataset=d):
                for key in [k for k in self.shards if k[:2] == (m, d)]:
                    del self.shards[key]  # fresh counts come with the shard status events


def _row_key(model: str, dataset: str, shard: int | None = None) -> str:
    return f"{model}\t{dataset}" if shard is None else f"{model}\t{dataset}\t{shard}"


class ProgressTable(DataTable[Text]):
    # enter on a row opens its details (the app handles RowSelected); shown in the footer here
    # because the focused table's own enter binding hides the app's
    BINDINGS = [Binding("enter", "select_cursor", "Details", id="progress.details")]

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self._cells: dict[str, list[Text]] = {}
        self._pair_of_row: dict[str, Pair] = {}
        self._shown_model: set[str] = set()

    def on_mount(self) -> None:
        for name, width in zip(COLUMNS, WIDTHS):
            self.add_column(name, key=name, width=width)

    def highlighted_pair(self) -> Pair | None:
        if self.row_count == 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - the cursor is between states (table being filled)
            return None
        return self._pair_of_row.get(key or "")

    def sync(self, state: RunState, shards: ShardFold, pairs: set[Pair] | None, palette: fmt.Palette) -> None:
        """Bring rows for `pairs` (None: all) up to date with the state."""
        now = state.clock()
        for key, p in state.pairs.items():
            if pairs is not None and key not in pairs and key in self._pair_of_row.values():
                continue
            self._put(_row_key(*key), key, self._pair_cells(p, now, palette))
            if p.shards > 1:
                for s in range(p.shards):
                    counts = shards.shards.get((p.model, p.dataset, s), ShardCounts(status="pending"))
                    self._put(_row_key(p.model, p.dataset, s), key, self._shard_cells(s, counts, palette))

    def _put(self, key: str, pair: Pair, cells: list[Text]) -> None:
        old = self._cells.get(key)
        if old is None:
            first_of_model = pair[0] not in self._shown_model
            self._shown_model.add(pair[0])
            if not first_of_model:
                cells[0] = Text("")
            self.add_row(*cells, key=key)
            self._cells[key] = cells
            self._pair_of_row[key] = pair
            return
        cells[0] = old[0]  # the model name is written once, on its first row
        for name, before, after in zip(COLUMNS, old, cells):
            if before != after:
                self.update_cell(key, name, after)
        self._cells[key] = cells

    def _pair_cells(self, p: PairState, now: float, palette: fmt.Palette) -> list[Text]:
        eta = p.eta(now) if p.status == ev.PairStatus.RUNNING else None
        throughput = p.throughput(now) if p.status == ev.PairStatus.RUNNING else None
        score = Text(f"{p.score:.2f}", style=f"bold {fmt.colour(palette, 'success')}") if p.score is not None else Text("–")
        failed = Text(str(p.failed), style=f"bold {fmt.colour(palette, 'error')}") if p.failed else Text("0")
        return [
            Text(p.model, style="bold"),
            Text(p.dataset),
            fmt.bar(p.completed, p.failed, p.total, BAR_WIDTH, palette),
            Text(f"{p.completed + p.failed}/{p.total}", justify="right"),
            failed,
            fmt.status_text(p.status, palette),
            Text(fmt.rate(throughput), justify="right"),
            Text(fmt.duration(eta), justify="right"),
            score,
        ]

    def _shard_cells(self, shard: int, c: ShardCounts, palette: fmt.Palette) -> list[Text]:
        muted = fmt.colour(palette, "foreground-muted")
        return [
            Text(""),
            Text(f"  └ shard {shard}", style=muted),
            fmt.bar(c.completed, c.failed, c.total, BAR_WIDTH, palette),
            Text(f"{c.completed + c.failed}/{c.total}", justify="right", style=muted),
            Text(str(c.failed), style=muted),
            fmt.status_text(c.status, palette),
            Text(""),
            Text(""),
            Text(""),
        ]
