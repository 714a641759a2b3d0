"""Defects found by driving the app as a user would (tmux, 80×24 and 200×50), each pinned by
what the user saw."""

from __future__ import annotations

import asyncio
from pathlib import Path

from evaltui.engine import events as ev
from ui_script import Clock, feed, planned, scripted_app


def test_the_failures_pane_keeps_showing_the_newest_after_a_dataset_starts(tmp_path: Path) -> None:
    # Seen at 80x24: failures came in, another dataset started (the pane is rebuilt then), and from
    # that moment on the pane stayed where it was, lines behind the newest, however many came in.
    from evaltui.ui.widgets.panes import FailuresLog

    err = ev.SampleError("http", 400, "bad request", 1)

    async def scenario() -> None:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, planned() + [ev.DatasetStarted("alpha", "gsm", 100, 100)])
            feed(app, [ev.SampleFailed("alpha", "gsm", 0, i, err) for i in range(8)])
            await pilot.pause()
            log = app.query_one(FailuresLog)
            assert log.scroll_offset.y == log.max_scroll_y > 0  # following the newest
            feed(app, [ev.DatasetStarted("beta", "gsm", 100, 100)] + [ev.SampleFailed("alpha", "gsm", 0, i, err) for i in (8, 9)])
            await pilot.pause()
            feed(app, [ev.SampleFailed("beta", "gsm", 0, 50, err)])
            await pilot.pause()
            shown = [log.render_line(y).text for y in range(log.scrollable_content_region.height)]
            assert any(line.startswith("beta/gsm #50 ") for line in shown), shown

    asyncio.run(scenario())


def test_the_help_fits_80x24(tmp_path: Path) -> None:
    # Seen at 80x24: `?` opened a help box wider than the terminal; the key texts were cut at the
    # right edge ("failed samples, predict", "only on a f").
    from textual.widgets import Static

    from evaltui.ui.screens.modals import HELP, HelpScreen

    async def scenario() -> None:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, planned())
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            box = app.screen.query_one("#help")
            assert box.region.right <= 80 and box.region.bottom <= 24, box.region
            text = app.screen.query_one("#help Static", Static)
            lines = HELP.rstrip("\n").splitlines()
            assert max(len(line) for line in lines) <= text.content_region.width, text.content_region
            assert text.content_region.height >= len(lines) and text.region.bottom <= box.content_region.bottom
            shown = [text.render_line(y).text.rstrip() for y in range(len(lines))]
            assert shown == [line.rstrip() for line in lines]

    asyncio.run(scenario())
