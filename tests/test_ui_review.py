"""Defects a review found in the app, each pinned by what a user would see."""

from __future__ import annotations

import asyncio
from pathlib import Path

from evaltui.engine import events as ev
from ui_script import Clock, feed, planned, scripted_app


def test_a_notice_with_markup_like_text_is_shown_as_it_is(tmp_path: Path) -> None:
    async def scenario() -> None:
        from textual.widgets._toast import Toast

        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            feed(app, planned() + [ev.Notice("stopped: [/INST] bad", "error")])
            await pilot.pause(0.3)
            assert app.is_running and app._exception is None
            toasts = [str(t.render()) for t in app.screen.query(Toast)]
            assert any("stopped: [/INST] bad" in t for t in toasts), toasts

    asyncio.run(scenario())
