"""Notifications: one toast at a time, one line, on the bottom row over the footer.

At 80×24 every row between the strip and the footer is a pane's data, so a toast that wraps,
or a second one stacked above the first, hides some of it. A toast is therefore one line
(app.tcss: no wrapping, cut with an ellipsis at the screen's edge), and a new one replaces the
one showing: it is what the user just did or what just happened; the panes show the rest.
(Textual 8.2.8's notify() returns no handle to take one toast back; clearing them all is the
public way, and there is never more than one.)
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

RANK: dict[str, int] = {"information": 0, "warning": 1, "error": 2}


def toast(app: App[Any], message: str, *, severity: SeverityLevel = "information", timeout: float | None = None) -> None:
    """Show `message` in place of whatever toast is showing (never markup: messages hold brackets)."""
    app.clear_notifications()
    app.notify(message, severity=severity, timeout=timeout, markup=False)
