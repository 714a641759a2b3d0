"""Small text pieces the panes share: durations, rates, bars, status words.

Colours are the painting widget's (its `Look`: component classes set from the theme in
ui/look.tcss), so a bar or a status word follows `t` like the CSS-styled parts do. Everything
returns rich Text: DataTable parses a plain string as markup, and error messages and dataset
names may contain brackets.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text

from evaltui.engine.stream.events import PairStatus
from evaltui.ui import look

Styles = Callable[[str], Style]  # a widget's Look: a component class's name -> its style


def rate(per_second: float | None) -> str:
    if per_second is None:
        return "–"
    return f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.1f}"


def status_text(status: str, styles: Styles) -> Text:
    try:
        key = PairStatus(status)
    except ValueError:
        return Text(str(status))
    return Text(key.value, style=styles(look.STATUS[key]))


def bar(completed: int, failed: int, total: int, width: int, styles: Styles) -> Text:
    """A bar of `width` cells: completed in the success colour, failed in the error colour."""
    if total <= 0:
        return Text("─" * width, style=styles(look.BAR_EMPTY))
    ok = int(width * min(completed, total) / total)
    bad = int(width * min(failed, total) / total)
    if failed and not bad:
        bad = 1  # one failure must be visible, however large the dataset
    ok = min(ok, width - bad)
    text = Text()
    text.append("━" * ok, style=styles(look.BAR_DONE))
    text.append("━" * bad, style=styles(look.BAR_FAILED))
    text.append("━" * (width - ok - bad), style=styles(look.BAR_EMPTY))
    return text


def judging_bar(label: str, short: str, done: int, failed: int, total: int, width: int, styles: Styles) -> Text:
    """A pair being judged: `judged 37/120 ━━━━` — the label, then a bar in what is left (of its
    verdicts over its answers, or of its answers while they still come: the caller's counts);
    where the label does not fit, `short` (cut at the edge)."""
    if width < len(label):
        return Text(short[:width], style=styles(look.MUTED))
    text = Text(label, style=styles(look.MUTED))
    if width - len(label) >= 3:
        text.append(" ")
        text.append_text(bar(done, failed, total, width - len(label) - 1, styles))
    return text


def same(a: Text, b: Text) -> bool:
    """Whether two cells look alike. rich's Text == compares the words and their spans only, not
    the Text's own style: a status word recoloured by a new theme would compare equal."""
    return a == b and a.style == b.style


def middle(name: str, width: int) -> str:
    """`name` in `width` columns, shortened in the middle where longer (`mmlu-abs…nd-more`): both
    ends of a benchmark's name tell it from its neighbours (the details show it whole)."""
    if len(name) <= width:
        return name
    if width <= 1:
        return name[:width]
    head = width // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]
