"""The one way a span of time and a message on one line are said (evaltui/text.py)."""

from __future__ import annotations

from evaltui.text import duration, one_line


def test_one_line_joins_whitespace_and_cuts_plainly_or_with_a_mark() -> None:
    said = "a server\n said\t this  at length"
    assert one_line(said, 100) == "a server said this at length"
    assert one_line(said, 8) == "a server"  # a record keeps the server's words cut plainly
    assert one_line(said, 8, cut="…") == "a serve…" and len(one_line(said, 8, cut="…")) == 8  # a pane marks the cut
    assert one_line("x" * 10**7, 5) == "xxxxx"  # only a bounded head of a huge text is looked at


def test_duration_reads_as_seconds_minutes_or_hours_and_a_dash_when_unknown() -> None:
    assert [duration(s) for s in (0.4, 42, 192, 3900, None)] == ["0s", "42s", "3m12s", "1h05m", "–"]
