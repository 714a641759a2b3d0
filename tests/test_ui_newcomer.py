"""What a newcomer following the README met in the session (the demo at 80×24 and 100×30, and
`evaltui watch`), each checked as a user reads the screen: a stray letter of the footer beside
every toast, ..."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_ui_80x24 import screen_lines
from ui_demo_script import demo_app, demo_running
from ui_script import Clock, feed


def test_a_toast_reaches_the_right_edge_no_letter_of_the_footer_beside_it(tmp_path: Path) -> None:
    """The footer showed through beside every toast: the last letter of its `^p palette` at the
    toast's right (`▌ theme: evaltui-light e`), half a key at its left. The toast is the row."""

    async def scenario() -> str:
        clock = Clock()
        app = demo_app(tmp_path, clock)
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            feed(app, demo_running(clock))
            await pilot.press("t")
            await pilot.pause(0.3)
            return screen_lines(app)[-1]

    bottom = asyncio.run(scenario())
    assert bottom.startswith("▌ theme: evaltui-light ") and bottom.rstrip().endswith("theme: evaltui-light"), bottom
