"""A session that tells you where you stand (issue 24): the leaderboard's own cursor and
details, why a dataset failed and what would change it (its details, a notification, the
terminal after the session), the details screen at 80 columns, the border's count of rows out of
sight from the first frame, the score chart and the throughput sparkline."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from planmaker import arithmetic, gsm_dataset, key_for, lightllm, write_jsonl, write_plan
from test_ui_80x24 import screen_lines
from test_ui_app import until
from test_ui_sizes import DATASETS, FAILED, WHY, mid_run, sizes_app, the_end
from ui_script import Clock, feed, planned, scripted_app

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.sim import SimConfig
from evaltui.sim.config import Faults
from evaltui.ui.screens.details import DetailsScreen
from evaltui.ui.screens.fleet import FleetScreen


def test_the_leaderboard_has_a_cursor_and_enter_opens_its_own_cells_details(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> tuple[tuple[str, str], str, str | None]:
        app = sizes_app(tmp_path, clock)
        app.runner.pair_details = lambda m, d: (_ for _ in ()).throw(OSError("not read in this test"))  # type: ignore[method-assign]
        async with app.run_test(size=(120, 40)) as pilot:
            feed(app, mid_run(clock) + the_end())
            await pilot.pause()
            screen, board = app.run_screen, app.run_screen.board
            assert screen.progress.has_focus and screen.highlighted() == ("sim-strong", DATASETS[0])
            await pilot.press("tab")  # to the leaderboard
            await pilot.pause()
            assert board.has_focus and board.show_cursor
            await pilot.press("down", "right")  # the second dataset, the second model in rank
            await pilot.pause()
            pair = screen.highlighted()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen), "the details")
            opened = (app.screen.model, app.screen.dataset)
            reason = app.screen.query_one("#details-reason").render().plain if app.screen.reason else ""
            await pilot.press("escape")
            await pilot.pause()
            await pilot.press("down", "down", "down", "enter")  # the Average row: that model's breakdown
            await pilot.pause()
            model = app.screen.model.abbr if isinstance(app.screen, FleetScreen) else None
            assert pair == opened
            return opened, reason, model

    opened, reason, model = asyncio.run(scenario())
    assert opened == FAILED, opened  # ranked: sim-strong, llama-3-70b-instruct, sim-weak
    assert reason == WHY
    assert model == "llama-3-70b-instruct"


def test_a_failed_dataset_says_why_in_a_notification_and_on_the_terminal_after(tmp_path: Path) -> None:
    from evaltui.ui.launch import closing

    clock = Clock()

    async def scenario() -> tuple[list[str], str]:
        app = sizes_app(tmp_path, clock)
        said: list[str] = []
        shown = app.notify
        app.notify = lambda message, **kw: (said.append(message), shown(message, **kw))[1]  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, mid_run(clock) + the_end())
            await pilot.pause()
        return said, closing(app.run_screen)

    said, after = asyncio.run(scenario())
    toast = f"{FAILED[0]}/{FAILED[1]} failed: fail_on_error = 0.185 would score the others; 37 of the dataset's 200 samples failed"
    assert any(s.startswith(toast) for s in said), said  # what to change first: a toast is one line
    lines = after.splitlines()
    assert f"{FAILED[0]}/{FAILED[1]} fail: {WHY}" in lines
    assert "work dir: /home/user/outputs/sizes" in lines and "summary: /home/user/outputs/sizes/summary/summary.txt" in lines
    board = [line.split() for line in lines if line.startswith(("mmlu-", "Average"))]
    assert board == [[DATASETS[0], "abc123", "accuracy", "gen", "91.50", "±3.87", "56.50", "±6.87", "77.75", "±5.76"],
                     ["Average", "-", "naive_average", "-", "90.77", "±1.96", "45.62", "±3.13", "-"]]  # the scripted scores carry their intervals


def test_leaving_a_real_run_prints_the_leaderboard_the_work_dir_and_why_it_failed(tmp_path: Path, sim_factory: Any) -> None:
    """End to end through `run_app`, as `evaltui PLAN` on a terminal runs it: a dataset of which
    a quarter of the prompts are too long for the server fails, and the terminal is told why."""
    from evaltui.ui.launch import run_app
    from evaltui.ui.themes import load_themes

    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 4 == 0 else "")) for i, r in enumerate(arithmetic(20))]
    sim = sim_factory(SimConfig(answer_key=key_for(rows, arithmetic(4)), faults=Faults(max_prompt_chars=120)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)],
                      datasets=[gsm_dataset("long", write_jsonl(tmp_path / "long.jsonl", rows)), gsm_dataset("short", write_jsonl(tmp_path / "s.jsonl", arithmetic(4)))])
    out = io.StringIO()
    code = run_app(Runner(load_plan(plan)), theme="evaltui-dark", themes=load_themes(), out=out, headless=True)
    said = out.getvalue().splitlines()
    assert code == 1
    assert any(line.startswith("m/long fail: 5 of the dataset's 20 samples failed") and line.endswith("fail_on_error = 0.25 would score the others") for line in said), said
    assert any(line.split()[:1] == ["short"] and line.split()[-2:] == ["100.00", "±0.00"] for line in said), said
    assert any(line.startswith("work dir: ") and Path(line.split(": ", 1)[1], "plan.toml").is_file() for line in said), said
    summary = next(line for line in said if line.startswith("summary: "))
    assert all(Path(p).is_file() for p in summary.split()[1:])


def test_the_details_screen_scrolls_sideways_at_80_columns_and_shows_the_extracted_gold(tmp_path: Path, sim_factory: Any) -> None:
    from textual.widgets import DataTable

    from evaltui.engine.run.runner import Runner as _Runner
    from evaltui.ui.app import EvalApp

    rows = [dict(r, answer=f"Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day, a long worked solution {'x' * 80}. #### {r['answer'].split('#### ')[-1]}") for r in arithmetic(3)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))  # it answers with the whole worked solution
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])

    async def scenario() -> tuple[list[str], float, float]:
        app = EvalApp(_Runner(load_plan(plan)), theme="evaltui-dark")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.run_screen.state.finished is not None and not app.engine.busy, "the run to end")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen) and app.screen.query_one("#details-body").display, "the details")
            table = app.screen.query_one("#details-predictions", DataTable)
            table.focus()
            await pilot.pause()
            cells = [str(c) for c in table.get_row_at(0)]
            before = table.scroll_x
            await pilot.press("right", "right", "right")
            await pilot.pause(0.5)
            assert table.region.right <= 80
            return cells, before, table.scroll_x

    cells, before, after = asyncio.run(scenario())
    gold = arithmetic(3)[0]["answer"].split("#### ")[-1]
    assert cells[2:4] == [gold, gold], cells  # the answer the evaluator took, beside the gold's number (not its first 60 characters)
    assert after > before  # → scrolls to the whole prediction


def test_the_border_says_nothing_is_out_of_sight_from_the_first_frame(tmp_path: Path) -> None:
    """At the demo's start the border said `↓ 7 more` for a moment over ten rows all in sight."""

    async def scenario() -> list[str]:
        app = scripted_app(tmp_path, Clock())
        seen = []
        async with app.run_test(size=(120, 40)) as pilot:
            for e in planned():
                feed(app, [e])
                seen.append(app.run_screen.progress.border_subtitle)
                await pilot.pause()
                seen.append(app.run_screen.progress.border_subtitle)
        return seen

    assert set(asyncio.run(scenario())) <= {"", None}


def test_the_strip_draws_the_last_minutes_of_throughput_where_there_is_room(tmp_path: Path) -> None:
    async def scenario(width: int) -> tuple[bool, list[float], str]:
        clock = Clock()
        app = scripted_app(tmp_path / str(width), clock)
        async with app.run_test(size=(width, 30)) as pilot:
            feed(app, planned() + [ev.DatasetStarted("alpha", "gsm", 100, 100), ev.Heartbeat(clock.wall())])
            for second in range(4):
                clock.now += 1.0
                feed(app, [ev.SampleFinished("alpha", "gsm", 0, 10 * second + i) for i in range(5 * (second + 1))])
                await pilot.pause()
            rate = app.run_screen.rate
            return rate.display and rate.region.width >= 12, list(rate.data or []), screen_lines(app)[1]

    shown, data, _ = asyncio.run(scenario(160))
    assert shown and data[-3:] == [10.0, 15.0, 20.0], data  # samples each second, the newest last
    for width in (60, 80):
        _, _, words = asyncio.run(scenario(width))
        assert "in flight alpha 0/16  beta 0/8 " in words, words  # beside the strip's words, never over them


def test_the_score_chart_draws_a_bar_per_model_and_an_interval_when_one_is_known(tmp_path: Path) -> None:
    from rich.console import Console

    from evaltui.ui.widgets.chart import Mark

    async def scenario() -> str:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(120, 40)) as pilot:
            chart = app.run_screen.chart
            chart.show([("gsm", [Mark("alpha", 80.0, 70.0, 90.0), Mark("beta", 40.0)]), ("mmlu", [Mark("alpha", None), Mark("beta", None)])])
            await pilot.pause()
            console = Console(width=60, record=True, color_system=None)
            console.print(chart.picture)
            return console.export_text()

    lines = asyncio.run(scenario()).splitlines()
    assert lines[0] == "gsm" and "mmlu" not in lines  # a dataset none scored is left out
    alpha, interval, beta = lines[1:4]
    assert alpha.split()[0] == "alpha" and alpha.rstrip().endswith("80.00") and "█" in alpha
    assert interval.rstrip().endswith("±10.00") and "█" in interval  # the interval: a bar from 70 to 90
    assert interval.index("█") > alpha.index("█")  # it starts at 70, not at 0
    assert beta.split()[0] == "beta" and beta.count("█") < alpha.count("█")


def test_a_dataset_name_too_long_for_its_column_is_shortened_in_the_middle(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        clock = Clock()
        app = sizes_app(tmp_path, clock)
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, mid_run(clock))
            await pilot.pause()
            return screen_lines(app)

    lines = asyncio.run(scenario())
    shown = [line for line in lines if "bbh-logi" in line]
    assert shown and all("…" in line and "x1" in line for line in shown), shown  # both ends of the name
