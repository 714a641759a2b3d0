"""Colours by meaning: a widget paints its cells (rich Text in a DataTable, the strip's line)
with the styles of its component classes, which ui/look.tcss sets from the theme's variables
(`$success`, `$evaltui-bar-empty`, …). A theme file changes them all; no colour is named in Python.

Textual caches a component's style only until the widget next repaints, and computing one costs
~50 µs, too much for every cell of every tick: a `Look` keeps each style until the theme changes
(the run screen, and each screen that paints, forget them then)."""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget

from evaltui.engine.stream.events import PairStatus

STATUS = {s: f"status--{s.value}" for s in PairStatus}
BAR_DONE, BAR_FAILED, BAR_EMPTY = "bar--done", "bar--failed", "bar--empty"
GOOD, BAD, WARN, MUTED, ALARM = "look--good", "look--bad", "look--warn", "look--muted", "look--alarm"
SCORE, FAILED, BEST = "cell--score", "cell--failed", "cell--best"
CHART_BAR, CHART_BEST, CHART_INTERVAL = "chart--bar", "chart--best", "chart--interval"

# What each painting widget declares: only what it paints with, since Textual styles every
# component class of a widget whenever the widget is restyled (a focus change, a class set)
PROGRESS = frozenset([*STATUS.values(), BAR_DONE, BAR_FAILED, BAR_EMPTY, MUTED, SCORE, FAILED])
LOADS = frozenset([GOOD, BAD, WARN, MUTED, ALARM])  # the strip's heartbeat and loads, a model's breakdown
BOARD = frozenset([BEST])
CHART = frozenset([CHART_BAR, CHART_BEST, CHART_INTERVAL])
CLASSES = PROGRESS | LOADS | BOARD | CHART


class Look:
    """One widget's styles by name (a component class it declares), kept until `forget`."""

    def __init__(self, widget: Widget) -> None:
        self._widget = widget
        self._styles: dict[str, Style] = {}

    def __call__(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            # the partial style (no background: a cell keeps its row's, the cursor's, the
            # zebra's) with the colour of the full one, where a translucent colour
            # (`$foreground-muted`) is blended over the pane's background
            try:
                partial = self._widget.get_component_rich_style(name, partial=True)
                if partial.color is not None:
                    partial += Style(color=self._widget.get_component_rich_style(name).color)
            except KeyError:
                if self._widget.is_attached:
                    raise  # a name the widget does not declare: a mistake, not a closing app
                # a tick that comes as the app closes finds its widgets unmounted, their component
                # styles gone (or one never mounted has none yet): plain, and not kept
                return Style()
            style = self._styles[name] = partial
        return style

    def forget(self) -> None:
        """The theme changed: the next call reads the new styles."""
        self._styles.clear()
