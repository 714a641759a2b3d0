"""What a newcomer following the README met in the session (the demo at 80×24 and 100×30, and
`evaltui watch`), each checked as a user reads the screen: a stray letter of the footer beside
every toast, two signs for a missing score, ..."""

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


def test_one_sign_for_no_score_on_screen_as_in_the_headless_table(tmp_path: Path) -> None:
    """`arith … -` beside `Average … –`: the leaderboard is the table `--no-ui` prints and the
    summary files hold, whose sign is `-`; the progress pane's score column says the same."""
    from evaltui.scoring.leaderboard import MISSING

    async def scenario() -> tuple[list[list[str]], str]:
        clock = Clock()
        app = demo_app(tmp_path, clock)
        async with app.run_test(size=(100, 30)) as pilot:
            feed(app, demo_running(clock))
            await pilot.pause()
            board = [app.board.render_line(y).text.split() for y in range(1 + app.board.row_count)]  # its rows in or out of sight
            return board, app.progress.shown_line("sim-weak", "code")

    board, row = asyncio.run(scenario())
    assert [cells[0] for cells in board[1:]] == ["word-problems", "multiple-choice", "completions", "code", "Average"], board
    assert all(cells[-2:] == [MISSING, MISSING] for cells in board[1:]), board
    assert row.split()[-1] == MISSING, row
