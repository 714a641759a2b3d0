"""What every front end and log says alike: a span of time, and a message on one line.

Low in the package, so a backend's failure message, the run log, the headless lines, `evaltui
show` and the Textual panes shorten and time things the same way.
"""

from __future__ import annotations


def one_line(text: str, limit: int, *, cut: str = "") -> str:
    """`text` on one line (every run of whitespace one space), at most `limit` characters, the
    last of them `cut` when it was shortened (a server's words in a record are cut plainly; a
    pane says "…"). Only a bounded head of a huge text is looked at."""
    flat = " ".join(text[: 4 * limit + 4096].split())
    return flat if len(flat) <= limit else flat[: limit - len(cut)] + cut


def duration(seconds: float | None) -> str:
    """`42s`, `3m12s`, `1h05m`: a span of time in a line; `–` when it is not known."""
    if seconds is None:
        return "–"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")
