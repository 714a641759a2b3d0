"""Small text pieces the panes share: durations, rates, bars, status colours.

Colours come from the running theme's variables (passed in as `palette`), so a bar or a status
word follows `t` like the CSS-styled parts do. Everything returns rich Text: DataTable parses a
plain string as markup, and error messages and dataset names may contain brackets.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from evaltui.engine.stream.events import PairStatus

Palette = Mapping[str, str]

STATUS_COLOUR = {
    PairStatus.PENDING: "foreground-muted",
    PairStatus.RUNNING: "primary",
    PairStatus.DONE: "secondary",
    PairStatus.FAIL: "error",
    PairStatus.SCORING: "warning",
    PairStatus.SCORED: "success",
    PairStatus.ERROR: "error",
    PairStatus.SKIPPED: "warning",
    PairStatus.STOPPED: "warning",
}


def colour(palette: Palette, name: str) -> str:
    return palette.get(name) or palette.get("foreground") or ""


def rate(per_second: float | None) -> str:
    if per_second is None:
        return "–"
    return f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.1f}"


def status_text(status: str, palette: Palette) -> Text:
    try:
        key = PairStatus(status)
    except ValueError:
        return Text(str(status))
    style = colour(palette, STATUS_COLOUR[key])
    bold = key in (PairStatus.FAIL, PairStatus.ERROR)
    return Text(key.value, style=f"bold {style}" if bold else style)


def bar(completed: int, failed: int, total: int, width: int, palette: Palette) -> Text:
    """A bar of `width` cells: completed in the success colour, failed in the error colour."""
    if total <= 0:
        return Text("─" * width, style=colour(palette, "evaltui-bar-empty"))
    ok = int(width * min(completed, total) / total)
    bad = int(width * min(failed, total) / total)
    if failed and not bad:
        bad = 1  # one failure must be visible, however large the dataset
    ok = min(ok, width - bad)
    text = Text()
    text.append("━" * ok, style=colour(palette, "success"))
    text.append("━" * bad, style=colour(palette, "error"))
    text.append("━" * (width - ok - bad), style=colour(palette, "evaltui-bar-empty"))
    return text


def same(a: Text, b: Text) -> bool:
    """Whether two cells look alike. rich's Text == compares the words and their spans only, not
    the Text's own style: a status word recoloured by a new theme would compare equal."""
    return a == b and a.style == b.style

