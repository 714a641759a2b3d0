"""The app on a scripted event stream: what each pane shows, which keys apply, the themes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ui_script import HEARTBEAT_TIMEOUT, Clock, alpha_gsm_failed, feed, finished, planned, running, scripted_app

from evaltui.engine.stream import events as ev
from evaltui.ui.widgets.board import LeaderboardTable
from evaltui.ui.widgets.panes import EngineStrip, FailuresLog
from evaltui.ui.widgets.progress import ProgressTable


def footer_keys(app) -> set[str]:  # type: ignore[no-untyped-def]
    return {b.key for _, b, enabled, _ in app.screen.active_bindings.values() if b.show and enabled}


def strip_text(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.query_one(EngineStrip).render())


def test_panes_follow_the_stream(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(200, 50)) as pilot:
            feed(app, planned())
            table = app.query_one(ProgressTable)
            # per model: a heading row, a row per dataset and one per shard of the split one
            assert table.row_count == 2 * (1 + 1 + 1 + 2)
            assert "waiting" in strip_text(app)
            await pilot.pause()
            assert "0/100" in table.shown_line("alpha", "gsm") and "pending" in table.shown_line("alpha", "gsm")
            feed(app, running(clock))
            clock.now += 10.0
            app.fold_pending()
            await pilot.pause()
            assert str(table.get_cell("alpha\tgsm", "done")) == "43/100"
            assert str(table.get_cell("alpha\tgsm", "fail")) == "3"
            assert str(table.get_cell("alpha\tgsm", "req/s")) == "4.3"  # 43 samples in 10 s
            assert str(table.get_cell("alpha\tgsm", "ETA")) == "13s"  # 57 left at 4.3/s
            assert str(table.get_cell("alpha\tmmlu\t0", "done")) == "50/100"
            # what is on screen moved too, not only the table's data
            assert table.shown_line("alpha", "gsm").split()[2:] == ["43/100", "3", "running", "4.3", "13s", "-"]
            strip = strip_text(app)
            assert "alive" in strip and "alpha 12/16" in strip and "retries 5" in strip
            # brackets in an error message are shown as they are, not taken as markup
            lines = app.query_one(FailuresLog).lines
            assert lines[-1] == 'alpha/gsm #42 http 500: upstream said [bold]nope[/bold] {"detail": [1, 2]}'
            assert len(lines) == 3

            clock.now += HEARTBEAT_TIMEOUT + 1
            app.fold_pending()
            assert "STALE" in strip_text(app)

    asyncio.run(scenario())


def test_r_applies_only_to_a_failed_dataset(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + running(clock))
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("alpha\tgsm"))
            await pilot.pause()
            assert "r" not in footer_keys(app) and "R" not in footer_keys(app)  # running, not failed
            feed(app, alpha_gsm_failed())
            await pilot.pause()
            assert "fail" in str(table.get_cell("alpha\tgsm", "status"))
            assert {"r", "R", "enter"} <= footer_keys(app)
            assert app.run_screen.action_applies("retry")
            table.move_cursor(row=table.get_row_index("beta\tgsm"))
            await pilot.pause()
            assert "r" not in footer_keys(app) and "R" in footer_keys(app)
            assert not app.run_screen.action_applies("retry")

    asyncio.run(scenario())


def test_leaderboard_fills_in_and_stays(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(200, 50)) as pilot:
            feed(app, planned())
            board = app.query_one(LeaderboardTable)
            assert [str(c) for c in board.get_row("gsm")] == ["gsm", "accuracy", "-", "-"]
            feed(app, [ev.DatasetScored("beta", "gsm", "accuracy", 80.25)])
            await pilot.pause()
            # beta is ranked first (the only model with a score), with a partial average
            assert [str(c.label) for c in board.columns.values()][2] == "1. beta"
            assert [str(c) for c in board.get_row("gsm")][2] == "80.25"
            assert [str(c) for c in board.get_row("Average")][2] == "80.25 (1/2)"
            feed(app, alpha_gsm_failed() + finished())
            await pilot.pause()
            assert [str(c.label) for c in board.columns.values()][2:] == ["1. beta", "2. alpha"]
            assert [str(c) for c in board.get_row("Average")][2:] == ["69.12", "67.75"]  # 69.125, 67.75
            assert app.query_one(FailuresLog).lines == []  # retried: its old failures are gone
            assert "run finished" in strip_text(app)

    asyncio.run(scenario())


def test_the_command_palette_offers_retry_only_when_something_failed(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        from textual.command import CommandPalette

        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            feed(app, planned() + running(clock))

            async def pick(query: str) -> None:
                await pilot.press("ctrl+p")
                await pilot.pause()
                assert isinstance(app.screen, CommandPalette)
                await pilot.press(*query)
                await pilot.pause(0.5)
                await pilot.press("enter")
                await pilot.pause(0.3)
                if isinstance(app.screen, CommandPalette):
                    await pilot.press("escape")
                    await pilot.pause()

            toasts: list[str] = []  # every toast said (a later one replaces it on screen: the engine's refusal here)
            shown = app.notify
            app.notify = lambda message, **kw: (toasts.append(message), shown(message, **kw))[1]  # type: ignore[method-assign]

            def said() -> list[str]:
                return toasts

            await pick("retry every")
            assert not any("retrying" in m for m in said())  # nothing failed: nothing offered
            feed(app, alpha_gsm_failed())
            await pick("retry every")
            assert "retrying the failed samples of alpha/gsm" in said()

    asyncio.run(scenario())


def test_the_command_palette_offers_one_quit_ours(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        from textual.command import CommandList, CommandPalette

        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + running(clock))
            await pilot.press("ctrl+p")
            await pilot.pause()
            assert isinstance(app.screen, CommandPalette)
            await pilot.press(*"quit")
            for _ in range(20):  # the palette searches in the background; bounded wait for its hits
                await pilot.pause(0.1)
                hits = app.screen.query_one(CommandList)
                if hits.option_count:
                    break
            shown = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
            quits = [s for s in shown if "Quit" in s]
            assert len(quits) == 1, shown
            assert "finished work is kept" in quits[0]  # ours, which says what quitting keeps

    asyncio.run(scenario())
