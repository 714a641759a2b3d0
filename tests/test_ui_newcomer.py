"""What a newcomer following the README met in the session (the demo at 80×24 and 100×30), each
checked as a user reads the screen: a stray letter of the footer beside every toast, two signs
for a missing score, the quit question still asked once the run had ended, the elapsed time
back to 0s on a retry, the strip's count behind the rows', a leaderboard of 3 rows and a
scrollbar under blank rows of the progress pane."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan
from test_ui_80x24 import screen_lines
from test_ui_app import until
from ui_demo_script import demo_app, demo_running
from ui_script import Clock, feed

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig
from evaltui.ui.app import EvalApp


def test_a_toast_is_the_whole_bottom_row_no_letter_of_the_footer_beside_it(tmp_path: Path) -> None:
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
            board = [app.run_screen.board.render_line(y).text.split() for y in range(1 + app.run_screen.board.row_count)]  # its rows in or out of sight
            return board, app.run_screen.progress.shown_line("sim-weak", "code")

    board, row = asyncio.run(scenario())
    assert [cells[0] for cells in board[1:]] == ["word-problems", "multiple-choice", "completions", "code", "Average"], board
    assert all(cells[-2:] == [MISSING, MISSING] for cells in board[1:]), board
    assert row.split()[-1] == MISSING, row


def test_the_quit_question_open_as_the_run_ends_leaves_as_q_would_then(tmp_path: Path, sim_factory: Any) -> None:
    """`q` during the last samples asked `Work is still running. Quit now?`; the run ended, the
    strip said `● run finished`, and the question stayed. Nothing is left to interrupt then: the
    question goes, and the session leaves as `q` does once the run has ended, with the run's code."""
    from evaltui.ui.screens.modals import ConfirmQuit

    N = 12
    sim = sim_factory(SimConfig(default=ModelProfile(latency=1.0)))  # one at a time, a second each: still going when q comes
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=1)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(N)))])
    app = EvalApp(Runner(load_plan(plan)), theme="evaltui-dark")

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.run_screen.state.live, "the run to start")
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), "the quit question")
            sim.config.default = ModelProfile(latency=0.0)  # the rest of the run goes by while the question is open
            await until(pilot, lambda: app._exit, "the session to leave once the run ended")  # the question not answered

    asyncio.run(scenario())
    finished = app.run_screen.state.finished
    assert finished is not None and not finished.interrupted and app.run_screen.state.totals()[0] == N  # the run was not cut short
    assert app.exit_code == 0 and app.return_value == 0


def test_elapsed_is_the_sessions_a_retry_goes_on_from_it(tmp_path: Path) -> None:
    """After `r` once the run had ended, the strip said `elapsed 0s`: the retry's time, not the
    run's. It goes on from the run's (since the session started), the rates count afresh."""

    async def scenario() -> list[str]:
        clock = Clock()
        app = demo_app(tmp_path, clock)
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, demo_running(clock))
            clock.now += 10.0
            feed(app, [ev.RunFinished(1, False)])
            clock.now += 5.0  # reading the leaderboard, then `r`
            feed(app, [ev.RetryStarted((("sim-strong", "word-problems"),)), ev.DatasetStarted("sim-strong", "word-problems", 200, 80)])
            clock.now += 3.0
            app.fold_pending()
            await pilot.pause()
            return screen_lines(app)

    strip = asyncio.run(scenario())[0]
    assert "elapsed 18s" in strip, strip


def test_the_strip_counts_what_the_rows_count_in_the_same_frame(tmp_path: Path) -> None:
    """`samples 6/60` above a row of `22/60`: the strip was repainted once a second, the rows every
    tick. Its counts come from the same fold as the rows; only its rate waits for the second."""

    async def scenario() -> tuple[str, str]:
        clock = Clock()
        app = demo_app(tmp_path, clock)
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, demo_running(clock))  # 120 done
            await pilot.pause()
            clock.now += 0.2  # the next tick, within the second
            feed(app, [ev.SampleFinished("sim-strong", "word-problems", 0, i) for i in range(120, 150)])
            await pilot.pause()
            return screen_lines(app)[0], app.run_screen.progress.shown_line("sim-strong", "word-problems")

    strip, row = asyncio.run(scenario())
    assert " 150/200 " in row, row
    assert "samples 150/1248" in strip, strip


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
def test_panes_take_the_rows_they_need_the_average_in_sight_while_running(tmp_path: Path, size: tuple[int, int]) -> None:
    """The demo's leaderboard was 3 rows and a scrollbar (the Average out of sight until the run
    ended) under 6–8 blank rows of the progress pane. Progress takes what its rows need; the
    leaderboard its rows, there being room for both."""

    async def scenario() -> list[str]:
        clock = Clock()
        app = demo_app(tmp_path, clock)
        async with app.run_test(size=size) as pilot:
            feed(app, demo_running(clock))
            await pilot.pause()
            return screen_lines(app)

    lines = asyncio.run(scenario())
    bottom = next(i for i, line in enumerate(lines) if line.startswith("╰"))  # the progress pane's
    assert "  code  " in lines[bottom - 1] and "/24" in lines[bottom - 1], lines  # its last row, no blank one after it
    assert any(line.startswith("│ Average ") for line in lines), lines
    board = [line.split()[1] for line in lines[bottom + 1 :] if " accuracy " in line]
    assert board == ["word-problems", "multiple-choice", "completions", "code"], lines  # every row, no scrolling
