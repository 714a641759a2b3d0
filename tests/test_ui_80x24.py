"""What a new user met running the demo at 80×24 (issue 17), each as a picture
(pytest-textual-snapshot; update with --snapshot-update) and, where it can be said in words, an
assertion: a notification over the data, rows below the fold with no sign, the help taller than
the screen, the plan title cut, the footer losing "Details", an empty failures pane taking room."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_ui_app import footer_keys
from ui_demo_script import TITLE, demo_app, demo_failures, demo_running
from ui_script import Clock, feed

from evaltui.engine.stream import events as ev
from evaltui.ui.app import EvalApp

FRESH = ev.Notice("--fresh: the earlier work is set aside in /home/user/evaltui/outputs/demo/superseded/20261203-114111")


def screen_lines(app: EvalApp) -> list[str]:
    """The screen as a user reads it, a string a row (toasts included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _scene(tmp_path: Path, *extra: ev.Event, failures: bool = False) -> tuple[EvalApp, Any]:
    clock = Clock()
    app = demo_app(tmp_path, clock)

    async def play(pilot: Any) -> None:
        feed(app, demo_running(clock) + list(extra) + (demo_failures() if failures else []))
        clock.now += 10.0
        app.fold_pending()
        await pilot.pause()

    return app, play


def _then(play: Any, check: Any) -> Any:
    async def run_before(pilot: Any) -> None:
        await play(pilot)
        check()

    return run_before


def test_the_fresh_notice_is_short_and_out_of_the_datas_way(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path, FRESH)

    def check() -> None:
        lines = screen_lines(app)
        said = "".join(lines)
        assert "superseded/20261203-114111" in said and "/home/user/evaltui/outputs/demo" not in said  # relative to the work dir
        assert all(any(f" {d} " in line and "accuracy" in line for line in lines) for d in ("word-problems", "multiple-choice"))  # the leaderboard's rows unhidden
        toast = [i for i, line in enumerate(lines) if "--fresh" in line]
        assert toast == [len(lines) - 1]  # one line, over the footer

    assert snap_compare(app, run_before=_then(play, check), terminal_size=(80, 24))


def test_a_stopped_run_says_so_in_one_line_a_count_not_a_list(tmp_path: Path, snap_compare: Any) -> None:
    left = [f"{m}/{d}" for m in ("sim-strong", "sim-weak") for d in ("word-problems", "multiple-choice", "completions")]
    stopped = ev.Notice(f"the run stopped (last heartbeat 3m12s ago) with 6 datasets unfinished: {', '.join(left)}", "warning", "stopped 3m12s ago: 6 datasets unfinished")
    app, play = _scene(tmp_path, failures=True)

    async def then_stopped(pilot: Any) -> None:
        await play(pilot)
        quiet = screen_lines(app)
        feed(app, [stopped, ev.Notice("--fresh: the earlier work is set aside in /home/user/evaltui/outputs/demo/superseded/20261203-114111")])
        await pilot.pause(0.3)
        lines = screen_lines(app)
        assert lines[:-1] == quiet[:-1]  # the panes untouched: the toast is on the bottom row
        assert "stopped 3m12s ago: 6 datasets unfinished" in lines[-1]  # the warning, not the later info
        assert [n.message for n in app._notifications] == ["stopped 3m12s ago: 6 datasets unfinished"]

    assert snap_compare(app, run_before=then_stopped, terminal_size=(80, 24))


def test_every_dataset_row_fits_at_80x24_while_nothing_failed(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path)

    def check() -> None:
        lines = screen_lines(app)
        assert sum(1 for line in lines if "  code  " in line and "/24" in line) == 2  # both models' last dataset
        assert not any("failures" in line for line in lines) and not any("more ─" in line for line in lines)

    assert snap_compare(app, run_before=_then(play, check), terminal_size=(80, 24))


def test_rows_below_the_fold_are_said_when_failures_take_room(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path, failures=True)

    def check() -> None:
        lines = screen_lines(app)
        assert any("failures" in line for line in lines)
        assert any(line.rstrip().endswith("↓ 2 more ─╯") for line in lines), lines

    assert snap_compare(app, run_before=_then(play, check), terminal_size=(80, 24))


def test_the_help_fits_80x24(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path)

    async def then_help(pilot: Any) -> None:
        await play(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        lines = screen_lines(app)
        assert any("╭─ help ─" in line for line in lines) and any("esc closes ─╯" in line for line in lines)  # the whole frame
        assert any(" leaderboard  datasets × models" in line for line in lines)  # down to its last line

    assert snap_compare(app, run_before=then_help, terminal_size=(80, 24))


def test_the_footer_keeps_details_after_help_escape_tab(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path)

    async def then_keys(pilot: Any) -> None:
        await play(pilot)
        await pilot.press("question_mark", "escape", "tab")
        await pilot.pause()
        assert "enter" in footer_keys(app)

    assert snap_compare(app, run_before=then_keys, terminal_size=(80, 24))


def test_the_plan_title_is_whole_at_80_columns(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path)

    async def look(pilot: Any) -> None:
        await play(pilot)
        assert any(TITLE in line for line in screen_lines(app)), screen_lines(app)

    assert snap_compare(app, run_before=look, terminal_size=(80, 24))


def test_panes_are_sized_by_their_content_at_160x48(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path)

    def check() -> None:
        lines = screen_lines(app)
        assert not any("failures" in line for line in lines)  # no empty pane taking half the screen
        bottoms = [i for i, line in enumerate(lines) if line.startswith("╰")]
        assert bottoms and bottoms[0] <= 16  # the progress pane as tall as its 10 rows, not the screen

    assert snap_compare(app, run_before=_then(play, check), terminal_size=(160, 48))


def test_the_done_column_is_as_wide_as_the_largest_total(tmp_path: Path) -> None:
    """A 200,000-sample dataset shows `123456/200000` whole, at 80 columns as at 200."""
    import asyncio

    big = [
        ev.DatasetPlanned("sim-strong", "big", 200_000, 1),
        ev.DatasetStarted("sim-strong", "big", 200_000, 200_000 - 123_456),
        ev.ShardStatusChanged("sim-strong", "big", 0, 1, ev.PairStatus.RUNNING, 200_000, 123_456, 0),
    ]

    async def scenario(size: tuple[int, int]) -> str:
        clock = Clock()
        app = demo_app(tmp_path / f"{size[0]}", clock)
        async with app.run_test(size=size) as pilot:
            feed(app, demo_running(clock) + big)
            await pilot.pause()
            return app.run_screen.progress.shown_line("sim-strong", "big")

    for size in ((200, 30), (80, 24)):
        line = asyncio.run(scenario(size))
        assert " 123456/200000 " in line, (size, line)


def test_the_strip_of_a_stopped_run_keeps_its_failures_at_80_columns(tmp_path: Path) -> None:
    """A killed run (watched): its stale heartbeat and its failed count both in the strip's first
    line; where all of it cannot fit, the elapsed time goes first."""
    import asyncio

    async def scenario(extra: list[ev.Event], elapsed: float) -> str:
        clock = Clock()
        app = demo_app(tmp_path / f"{elapsed:.0f}", clock)
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, demo_running(clock) + extra + demo_failures())
            clock.now += elapsed
            feed(app, [ev.RunFinished(1, True)])
            clock.now += 192.0
            app.fold_pending()
            await pilot.pause()
            return screen_lines(app)[0].strip()  # as shown: what does not fit is cut

    line = asyncio.run(scenario([], 10.0))
    assert line.startswith("■ stopped: heartbeat 3m") and line.endswith("  failed 2") and "elapsed 10s" in line, line
    big = [ev.DatasetPlanned("sim-weak", "big", 2_000_000, 1, 1_234_567, 12_345)]
    line = asyncio.run(scenario(big, 3900.0))
    assert line.endswith("samples 1247034/2001248  failed 12347") and "elapsed" not in line, line
