"""The engine strip, the failures pane and the leaderboard pane.

Each takes the folded RunState (or the Leaderboard) and repaints itself; none holds a reference
to the engine. Text is rich Text or Log lines, never markup: error messages contain brackets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable, Log
from textual.widgets.data_table import RowKey

from evaltui.engine.disk.heartbeat import stale
from evaltui.engine.stream.pair import Failure
from evaltui.engine.stream.state import RunState
from evaltui.plan.price import said_cost
from evaltui.scoring.leaderboard import MISSING, Leaderboard, RankedModel, format_score
from evaltui.text import duration, one_line
from evaltui.ui import fmt, keys, look
from evaltui.ui.look import Look
from evaltui.ui.widgets.fleet import model_load, strip_models
from evaltui.ui.widgets.progress import repaint_row


class EngineStrip(Widget):
    """Heartbeat, in-flight vs max_workers per model, throughput, retries, elapsed. (The plan's
    title is the progress pane's border title: here it was cut at 80 columns.)

    A plain Widget that renders its Text, repainted only when the text changed: a Static's
    update() would ask the whole screen for a new layout, several times a second. It is shown
    every tick, from the fold the rows are (its counts are theirs in the same frame); its
    req/s, like the rows', moves once a second (`rates`).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.CLASSES)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.look = Look(self)
        self._text = Text()
        self._rate = fmt.rate(None)

    def render(self) -> Text:
        return self._text

    def show(
        self,
        state: RunState,
        *,
        heartbeat_timeout: float,
        max_workers: dict[str, int],
        live: bool,
        load_known: bool = True,
        rates: bool = True,
    ) -> None:
        """`load_known`: False when the source cannot know the requests in flight and retries (a
        follower: the work dir holds none of it), which are then "–", never a made-up 0.
        `rates=False` keeps the req/s shown last."""
        if rates:
            self._rate = fmt.rate(state.throughput())
        text = Text(no_wrap=True, overflow="ellipsis")  # one line each, cut at the edge, never wrapped
        beat = self._heartbeat(state, heartbeat_timeout, live)
        c, f, n = state.totals()
        elapsed, samples, failed = f"  elapsed {duration(state.elapsed())}", f"  samples {c + f}/{n}", f"  failed {f}" if f else ""
        room = self.content_size.width
        if room and beat.cell_len + len(elapsed) + len(samples) + len(failed) > room:
            elapsed = ""  # what failed counts for more than the time it took
        text.append_text(beat)
        text.append(elapsed + samples)
        if failed:
            text.append(failed, style=self.look(look.BAD))
        text.append("\n")
        cost = state.cost()
        spent = f"  cost {said_cost(cost)}" if cost is not None else ""  # a priced model's tokens, so far in this run
        text.append(f"{self._rate} req/s  retries {state.retries() if load_known else '–'}{spent}  in flight ")
        for i, (model, limit) in enumerate(strip_models(state, max_workers).items()):
            text.append("  " if i else "")
            text.append_text(model_load(state, model, limit, live=live, styles=self.look) if load_known else Text(f"{model} –/{limit}"))
        if not max_workers:
            text.append("–")
        if text != self._text:
            self._text = text
            self.refresh()

    def _heartbeat(self, state: RunState, timeout: float, live: bool) -> Text:
        age = state.heartbeat_age()
        if state.finished is not None and not live:
            if state.finished.interrupted and age is not None:  # stopped with work left (a killed run, when watched)
                return Text(f"■ stopped: heartbeat {duration(age)} ago", style=self.look(look.WARN) + Style(bold=True))
            return Text("● run finished", style=self.look(look.GOOD))
        if age is None:
            return Text("○ heartbeat: waiting", style=self.look(look.MUTED))
        if stale(age, timeout):
            return Text(f"✖ heartbeat STALE {duration(age)} ago", style=self.look(look.ALARM))
        return Text(f"♥ alive {duration(age)} ago", style=self.look(look.GOOD))


def failure_line(f: Failure) -> str:
    status = f.error.status if f.error.status is not None else "-"
    epoch = f" epoch {f.epoch}" if f.epoch else ""
    return f"{f.model}/{f.dataset} #{f.sample_index}{epoch} {f.error.type} {status}: {one_line(f.error.message, 300, cut='…')}"


class FailuresLog(Log):
    """One line per failed sample, newest last; Log keeps at most `max_lines` and parses no markup.

    It follows the newest line until the user scrolls up. Log alone takes "at the end" from the
    scroll offset, which a resize leaves behind (a smaller pane: no longer at the end), so the
    pane remembers whether it was following and goes on doing so after a resize.
    """

    _following = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._following = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        if self._following and self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def show_all(self, failures: list[Failure]) -> None:
        # clear() empties the lines but keeps the scroll offset, so Log would no longer see itself
        # at the end and would stop following the newest line: take that from before the clear
        following = self.is_vertical_scroll_end
        self.clear()
        self.add(failures)
        if following and self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def add(self, failures: list[Failure]) -> None:
        if failures:
            self.write_lines([failure_line(f) for f in failures])


class LeaderboardTable(DataTable[Text]):
    """Datasets × models (ranked, best first), and an Average row that fills in live.

    A missing score is the `-` of the table `--no-ui` prints and the summary files hold (on the
    whole screen: the progress pane's score column too); `–` is for what is not known yet or not
    measured (ETA, req/s, the load of a watched run).

    Its rows are not selectable, so enter here keeps meaning what it means on the run screen:
    the details of the dataset highlighted in the progress pane (DataTable's own enter would
    hide that key from the footer whenever Tab brings the focus here).

    Scores come in one pair at a time, hundreds of them on a big plan: a score changes its cell
    and the Average row in place (the progress pane's reconcile-by-key); the table is built again
    only when its columns change: the ranking, a label, the width a column needs.
    """

    BINDINGS = keys.table_bindings()
    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.CLASSES)

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="none", zebra_stripes=True, **kw)  # type: ignore[arg-type]
        self._shown: tuple[object, ...] | None = None
        self._layout: tuple[object, ...] | None = None  # the built table's column labels and row keys
        self._widths: list[int] = []  # the widths its columns needed
        self._rows: dict[str, list[Text]] = {}
        self.look = Look(self)

    def show(self, board: Leaderboard | None, *, restyled: bool = False) -> None:
        """Show `board`; `restyled`: the theme changed, so cells whose text is the same may not be."""
        if board is None:
            return
        ranked = board.ranking()
        signature = (board.datasets, tuple(ranked), tuple(sorted(board.scores.items())), tuple(sorted(board.extra.items())))
        if signature == self._shown and not restyled:
            return
        self._shown = signature
        labels = [Text("dataset"), Text("metric")] + [Text(f"{rank}. {r.model}" if r.average is not None else r.model) for rank, r in enumerate(ranked, 1)]
        rows = self._cells(board, ranked)
        layout = (tuple(r.model for r in ranked), tuple(label.plain for label in labels), tuple(rows))
        widths = [max(cell.cell_len for cell in column) for column in zip(labels, *rows.values(), strict=False)]
        if layout == self._layout and widths == self._widths:  # else columns as wide as their cells
            self._update(rows)
            return
        self._layout, self._widths, self._rows = layout, widths, rows
        self.clear(columns=True)
        for label, key in zip(labels, ["dataset", "metric", *(r.model for r in ranked)], strict=False):
            self.add_column(label, key=key)
        for key, cells in rows.items():
            self.add_row(*cells, key=key)

    def _update(self, rows: dict[str, list[Text]]) -> None:
        """Write the cells that changed into the built table and repaint their rows only."""
        columns = list(self.columns)
        for key, cells in rows.items():
            old = self._rows[key]
            changed = [(column, after) for column, before, after in zip(columns, old, cells, strict=False) if not fmt.same(before, after)]
            if not changed:
                continue
            row = RowKey(key)
            for column, after in changed:
                self._data[row][column] = after
            repaint_row(self, row)
            self._rows[key] = cells

    def _cells(self, board: Leaderboard, ranked: list[RankedModel]) -> dict[str, list[Text]]:
        best = self.look(look.BEST)
        rows: dict[str, list[Text]] = {}
        for row in board.datasets:
            cells = [Text(row.abbr), Text(row.label)]
            for r in ranked:
                value = board.value(r.model, row)
                cells.append(Text(format_score(value), justify="right"))
            rows[row.abbr if row.main else f"{row.abbr} {row.metric}"] = cells
        average = [Text("Average", style="bold"), Text("naive_average")]
        for r in ranked:
            if r.average is None:
                average.append(Text(MISSING, justify="right"))
            elif r.scored < r.total:
                average.append(Text(f"{r.average:.2f} ({r.scored}/{r.total})", justify="right", style="italic"))
            else:
                average.append(Text(f"{r.average:.2f}", justify="right", style=best))
        rows["Average"] = average
        return rows
