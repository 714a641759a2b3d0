"""What every front end and log says alike: a span of time, a moment, and a message on one line.

Low in the package, so a backend's failure message, the run log, the headless lines, `evaltui
show` and the Textual panes shorten and time things the same way.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone


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


def now_iso() -> str:
    """The local time with its offset, to the millisecond (`2026-12-06T17:26:06.123+01:00`), as
    `datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds")` says it. The
    second's text is made once a second: the local zone's lookup was most of a status file's cost."""
    fraction, whole = math.modf(time.time())  # rounded to the microsecond as datetime rounds a timestamp
    second, micros = int(whole), round(fraction * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    held = _SECOND[0]
    if held[0] != second:
        text = datetime.fromtimestamp(second, timezone.utc).astimezone().isoformat(timespec="seconds")
        held = _SECOND[0] = (second, text[:19], text[19:])  # (one tuple: a thread reading it meanwhile sees one second, whole)
    return f"{held[1]}.{micros // 1000:03d}{held[2]}"


_SECOND: list[tuple[int, str, str]] = [(-1, "", "")]  # the latest second said: (its time, its text, the zone's offset)


def parse_iso(text: str) -> float | None:
    text = text.strip()
    if text.endswith("Z"):  # Python 3.10's fromisoformat does not read the UTC designator
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
