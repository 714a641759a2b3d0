"""Defects a review found in the app, each pinned by what a user would see."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ui_script import Clock, feed, planned, scripted_app

from evaltui.engine.stream import events as ev


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


def test_a_bad_colour_in_theme_variables_is_reported_and_falls_back(tmp_path: Path) -> None:
    from evaltui.ui.themes import config_dir, load_themes

    user = config_dir() / "themes"
    user.mkdir(parents=True)
    (user / "vars.toml").write_text(
        'name = "vars"\nprimary = "#ff8800"\n[variables]\nevaltui-bar-empty = "nonsense"\n', encoding="utf-8"
    )
    (user / "styled.toml").write_text(
        'name = "styled"\nprimary = "#ff8800"\n[variables]\nblock-cursor-text-style = "bold"\nevaltui-bar-empty = "$panel"\n',
        encoding="utf-8",
    )
    found = load_themes()
    assert "vars" not in found.themes and "styled" in found.themes
    assert any("vars.toml: variables.evaltui-bar-empty" in p and "nonsense" in p for p in found.problems), found.problems

    async def scenario() -> tuple[str, list[str], bool]:
        app = scripted_app(tmp_path, Clock(), theme="vars")
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            feed(app, planned())
            await pilot.pause(0.3)
            return app.theme, [n.message for n in app._notifications], app.is_running

    theme, notes, running = asyncio.run(scenario())
    assert running and theme == "evaltui-dark"
    assert any("vars.toml: variables.evaltui-bar-empty" in n for n in notes)


class _EngineOwned(dict):  # type: ignore[type-arg]
    """The runner's live pairs, which the engine's thread may grow at any moment: iterating them
    from the UI's thread can raise "dictionary changed size during iteration"."""

    def items(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("dictionary changed size during iteration")

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("dictionary changed size during iteration")


def test_the_leaderboard_is_built_from_the_apps_own_state(tmp_path: Path) -> None:
    from evaltui.ui.widgets.board import LeaderboardTable

    async def scenario() -> None:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(200, 50)) as pilot:
            app.runner.state.pairs = _EngineOwned()
            feed(app, planned() + [ev.DatasetScored("beta", "gsm", "accuracy", 80.25)])
            await pilot.pause()
            assert app.is_running and app._exception is None
            board = app.query_one(LeaderboardTable)
            assert [str(c) for c in board.get_row("gsm")][2] == "80.25"

    asyncio.run(scenario())


def test_resizing_keeps_the_highlighted_dataset(tmp_path: Path) -> None:
    from ui_script import alpha_gsm_failed, running

    from evaltui.ui.widgets.progress import ProgressTable

    clock = Clock()

    async def scenario() -> None:
        app = scripted_app(tmp_path, clock)
        async with app.run_test(size=(200, 50)) as pilot:
            feed(app, planned() + running(clock) + alpha_gsm_failed())
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("beta\tgsm"))
            await pilot.pause()
            assert app.run_screen.highlighted() == ("beta", "gsm")
            width = table._bar_width
            await pilot.resize_terminal(100, 40)
            await pilot.pause(0.3)
            assert table._bar_width != width  # the rows were rebuilt at the new width
            assert app.run_screen.highlighted() == ("beta", "gsm")
            assert not app.run_screen.action_applies("retry")  # `r` would not retry alpha/gsm, the first (failed) row
            app.fold_pending()
            await pilot.pause()
            assert app.run_screen.highlighted() == ("beta", "gsm")

    asyncio.run(scenario())


def test_the_theme_memory_follows_t_back_and_remembers_an_asked_theme(tmp_path: Path) -> None:
    from evaltui.ui.themes import remember_theme, remembered_theme

    async def open_and_press(theme: str | None, presses: int) -> str:
        app = scripted_app(tmp_path, Clock(), theme=theme)
        async with app.run_test() as pilot:
            for _ in range(presses):
                await pilot.press("t")
                await pilot.pause()
            return app.theme

    # asked for by name (as `--theme` does) and used: remembered without pressing anything
    assert asyncio.run(open_and_press("evaltui-light", 0)) == "evaltui-light"
    assert remembered_theme() == "evaltui-light"

    # opened on the remembered dark theme, t to light, t t back round to dark: dark is remembered
    remember_theme("evaltui-dark")
    assert asyncio.run(open_and_press(None, 1)) == "evaltui-light"
    assert remembered_theme() == "evaltui-light"
    remember_theme("evaltui-dark")
    assert asyncio.run(open_and_press(None, 3)) == "evaltui-dark"
    assert remembered_theme() == "evaltui-dark"
    # and a session started on light that steps back to the default keeps that choice
    remember_theme("evaltui-light")
    assert asyncio.run(open_and_press(None, 2)) == "evaltui-dark"
    assert remembered_theme() == "evaltui-dark"


def test_quitting_just_after_the_run_ended_exits_with_the_runs_code(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from ui_script import finished, running

    from evaltui.ui.screens.modals import ConfirmQuit

    clock = Clock()

    async def scenario(answer_after_the_end: bool) -> int | None:
        app = scripted_app(tmp_path, clock)
        # the engine's job: RunFinished is out, the future completes a moment later
        job: Future[int] = Future()
        app.engine.jobs.append(job)
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + running(clock))
            if answer_after_the_end:
                await pilot.press("q")  # asked while the run goes on ...
                await pilot.pause()
                assert isinstance(app.screen, ConfirmQuit)
            feed(app, finished())
            await pilot.pause()
            assert app.engine.busy
            await pilot.press("y" if answer_after_the_end else "q")  # ... answered once it ended
            for _ in range(20):
                if app._exit:
                    break
                await pilot.pause(0.1)
            assert not isinstance(app.screen, ConfirmQuit)
            job.set_result(0)
        assert app.exit_code == app.return_value  # what the command line returns
        return app.return_value

    assert asyncio.run(scenario(False)) == 0
    assert asyncio.run(scenario(True)) == 0


def test_a_second_q_while_stopping_leaves_at_once(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from ui_script import running

    from evaltui.ui.screens.modals import ConfirmQuit

    clock = Clock()

    async def scenario() -> tuple[int | None, int]:
        app = scripted_app(tmp_path, clock)
        job: Future[int] = Future()  # an engine job slow to stop (a scoring thread, say)
        app.engine.jobs.append(job)
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + running(clock))
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("q")  # q twice answers the question with yes: stopping
            await pilot.pause(0.5)
            assert app._quitting and not app._exit and not isinstance(app.screen, ConfirmQuit)
            await pilot.press("q")  # still stopping: q again leaves now
            for _ in range(20):
                if app._exit:
                    break
                await pilot.pause(0.1)
            assert app._exit
            job.set_result(130)
        return app.return_value, app.exit_code

    assert asyncio.run(scenario()) == (130, 130)


def _failed(model: str, dataset: str) -> list[ev.Event]:
    err = ev.SampleError("http", 500, "upstream down", 3)
    out: list[ev.Event] = [ev.DatasetStarted(model, dataset, 100, 100)]
    out += [ev.SampleFinished(model, dataset, 0, i) for i in range(98)]
    out += [ev.SampleFailed(model, dataset, 0, i, err) for i in (98, 99)]
    out.append(ev.ShardStatusChanged(model, dataset, 0, 1, "fail", 100, 98, 2, "2 samples failed"))
    out.append(ev.DatasetInferred(model, dataset, "fail", 98, 2, "", "2 samples failed"))
    return out


def test_a_retry_ending_frees_only_its_own_datasets(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from evaltui.ui.widgets.progress import ProgressTable

    clock = Clock()

    async def scenario() -> None:
        app = scripted_app(tmp_path, clock)
        jobs: list[Future[int]] = []

        def retry(pairs):  # type: ignore[no-untyped-def]  # the engine's retry, held open by the test
            job: Future[int] = Future()
            jobs.append(job)
            app.engine.jobs.append(job)
            return job

        app.engine.retry = retry  # type: ignore[method-assign]
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + _failed("alpha", "gsm") + _failed("beta", "gsm"))
            table = app.query_one(ProgressTable)
            for pair in (("alpha", "gsm"), ("beta", "gsm")):
                table.move_cursor(row=table.get_row_index("\t".join(pair)))
                await pilot.pause()
                assert app.run_screen.action_applies("retry")
                await pilot.press("r")
                await pilot.pause()
            assert len(jobs) == 2 and not app.run_screen.action_applies("retry_all")  # both being retried
            jobs[0].set_result(1)  # alpha/gsm's retry ended; beta/gsm's still runs
            app.fold_pending()
            await pilot.pause()
            assert app.run_screen.retryable() == [("alpha", "gsm")]  # still failed: offered again
            assert not app.run_screen.action_applies("retry")  # the cursor is on beta/gsm: not twice at once
            jobs[1].set_result(1)

    asyncio.run(scenario())


def test_the_final_leaderboard_shows_every_row_at_80x24(tmp_path: Path) -> None:
    from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan
    from evaltui.scoring.leaderboard import build_leaderboard
    from evaltui.ui.app import EvalApp
    from evaltui.ui.widgets.board import LeaderboardTable

    names = ["d1", "d2", "d3", "d4", "d5"]
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic(4))
    plan = write_plan(
        tmp_path,
        models=[{"abbr": m, "type": "lightllm", "url": "http://127.0.0.1:9/generate"} for m in ("alpha", "beta")],
        datasets=[gsm_dataset(d, data) for d in names],
    )
    clock = Clock()
    app = EvalApp(Runner(load_plan(plan), work_dir=tmp_path / "out"), theme="evaltui-dark", start=False, clock=clock.monotonic, wall_clock=clock.wall)
    scores = {(m, d): 50.0 + i for i, (m, d) in enumerate((m, d) for m in ("alpha", "beta") for d in names)}

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            events: list[ev.Event] = [ev.RunStarted("/tmp/out", ("alpha", "beta"), tuple(names), "run")]
            events += [ev.DatasetPlanned(m, d, 4, 1) for m, d in scores]
            feed(app, events)
            await pilot.pause()
            board = app.query_one(LeaderboardTable)
            assert board.outer_size.height < board.row_count + 3  # while running, progress has the room
            events = [ev.DatasetScored(m, d, "accuracy", s) for (m, d), s in scores.items()]
            rows = [(d, "v1", "accuracy", "gen") for d in names]
            events.append(ev.RunFinished(0, False, {}, build_leaderboard(rows, ["alpha", "beta"], scores), 1.0))
            feed(app, events)
            await pilot.pause(0.3)
            assert board.row_count == len(names) + 1  # and the Average row
            assert board.outer_size.height == board.row_count + 3  # header and border: nothing cut
            assert board.scroll_offset.y == 0 and board.max_scroll_y == 0

    asyncio.run(scenario())


def test_quit_asks_when_a_retry_was_asked_for_after_the_run_ended(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from evaltui.ui.screens.modals import ConfirmQuit
    from evaltui.ui.widgets.progress import ProgressTable

    async def scenario() -> None:
        app = scripted_app(tmp_path, Clock())
        run: Future[int] = Future()
        app.engine.jobs.append(run)
        retry: Future[int] = Future()

        def start_retry(pairs):  # type: ignore[no-untyped-def]  # queued: RetryStarted not out yet
            app.engine.jobs.append(retry)
            return retry

        app.engine.retry = start_retry  # type: ignore[method-assign]
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + _failed("alpha", "gsm"))
            feed(app, [ev.RunFinished(1, False)])
            run.set_result(1)
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("alpha\tgsm"))
            await pilot.pause()
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuit) and not app._exit  # the retry would be cut short
            await pilot.press("n")
            retry.set_result(0)

    asyncio.run(scenario())
