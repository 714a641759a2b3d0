"""A plan of many datasets: a tick's work on the progress pane is that of the rows whose pair
changed, not of every row (the app's thread shares the interpreter with the engine's, so work
that grows with the plan's size slows the run itself)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan
from ui_script import Clock

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.ui import app as app_module
from evaltui.ui.widgets import board as board_module
from evaltui.ui.widgets import progress
from evaltui.ui.widgets.board import LeaderboardTable
from evaltui.ui.widgets.chart import ScoreChart
from evaltui.ui.widgets.progress import ProgressTable

DATASETS = 40
RUNNING = 10  # the first ten run; the rest are done


def many_datasets_app(tmp_path: Path, clock: Clock) -> app_module.EvalApp:
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic(4))
    plan = write_plan(
        tmp_path,
        models=[{"abbr": "alpha", "type": "lightllm", "url": "http://127.0.0.1:9/generate", "max_workers": 16}],
        datasets=[gsm_dataset(f"d{i:02}", data) for i in range(DATASETS)],
    )
    runner = Runner(load_plan(plan), work_dir=tmp_path / "out")
    return app_module.EvalApp(runner, theme="evaltui-dark", start=False, clock=clock.monotonic, wall_clock=clock.wall)


def feed(app: app_module.EvalApp, events: list[ev.Event]) -> None:
    for e in events:
        app.run_screen.sink(e)
    app.fold_pending()


def spy_repaints(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[set[str]]:
    """The rows each `module.repaint_rows` call repainted (by key), the call still made."""
    repainted: list[set[str]] = []
    real = module.repaint_rows

    def spy(table: Any, rows: Any) -> None:
        repainted.append({str(row.value) for row in rows})
        real(table, rows)

    monkeypatch.setattr(module, "repaint_rows", spy)
    return repainted


def planned(names: list[str]) -> list[ev.Event]:
    """A run of model alpha over these datasets, each of 4 samples, planned."""
    return [ev.RunStarted("/tmp/out", ("alpha",), tuple(names), "many"), *(ev.DatasetPlanned("alpha", d, 4, 1) for d in names)]


def test_a_tick_repaints_only_the_rows_whose_pair_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    repainted = spy_repaints(monkeypatch, progress)
    computed: list[str] = []
    real_cells = ProgressTable._pair_cells

    def spy_cells(self: ProgressTable, p: Any, now: float) -> Any:
        computed.append(p.dataset)
        return real_cells(self, p, now)

    monkeypatch.setattr(ProgressTable, "_pair_cells", spy_cells)

    async def scenario() -> None:
        app = many_datasets_app(tmp_path, clock)
        async with app.run_test(size=(160, 60)) as pilot:
            names = [f"d{i:02}" for i in range(DATASETS)]
            events = planned(names)
            events += [ev.DatasetStarted("alpha", d, 4, 4) for d in names]
            events += [ev.SampleFinished("alpha", d, 0, 0) for d in names]
            events += [ev.DatasetInferred("alpha", d, ev.PairStatus.DONE, 4, 0) for d in names[RUNNING:]]
            feed(app, events)
            await pilot.pause()
            table = app.query_one(ProgressTable)
            assert "1/4" in table.shown_line("alpha", "d03")

            # one sample of one running pair, no time passed: that row only, computed and repainted
            repainted.clear()
            computed.clear()
            feed(app, [ev.SampleFinished("alpha", "d03", 0, 1)])
            assert computed == ["d03"]
            assert repainted == [{"alpha\td03"}]
            assert "2/4" in table.shown_line("alpha", "d03")  # and the screen shows it, not a stale line
            assert "1/4" in table.shown_line("alpha", "d04")

            # a second later: the running rows' rates and ETAs move, the done rows are not looked at
            repainted.clear()
            computed.clear()
            clock.now += 1.5
            app.fold_pending()
            assert sorted(computed) == names[:RUNNING]
            assert set().union(*repainted) <= {f"alpha\t{d}" for d in names[:RUNNING]}

            # a pair that finished leaves the running ones: later seconds do not compute its row
            feed(app, [ev.DatasetInferred("alpha", "d03", ev.PairStatus.DONE, 4, 0)])
            computed.clear()
            clock.now += 1.5
            app.fold_pending()
            assert sorted(computed) == [d for d in names[:RUNNING] if d != "d03"]

    asyncio.run(scenario())


def test_a_score_repaints_its_leaderboard_row_and_the_average_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A score that comes in changes its dataset's row and the Average in place: no other row is
    made again or repainted, and the table then reads as one built from scratch would."""
    clock = Clock()
    repainted = spy_repaints(monkeypatch, board_module)
    drawn: list[str] = []
    real_dataset = ScoreChart._dataset

    def spy_dataset(self: ScoreChart, name: str, marks: Any) -> Any:
        drawn.append(name)
        return real_dataset(self, name, marks)

    monkeypatch.setattr(ScoreChart, "_dataset", spy_dataset)

    async def scenario() -> None:
        app = many_datasets_app(tmp_path, clock)
        async with app.run_test(size=(160, 60)) as pilot:
            names = [f"d{i:02}" for i in range(DATASETS)]
            events = planned(names)
            for d in names[:RUNNING]:
                events += [ev.DatasetInferred("alpha", d, ev.PairStatus.DONE, 4, 0), ev.DatasetScored("alpha", d, "accuracy", 50.0)]
            feed(app, events)
            await pilot.pause()
            board = app.query_one(LeaderboardTable)
            assert str(board.get_cell("d03", "alpha")).strip() == "50.00"

            repainted.clear()
            drawn.clear()
            feed(app, [ev.DatasetInferred("alpha", "d20", ev.PairStatus.DONE, 4, 0), ev.DatasetScored("alpha", "d20", "accuracy", 75.0)])
            assert set().union(*repainted) == {"d20", "Average"}
            assert drawn == ["d20"]  # the chart draws the new score's dataset only
            assert str(board.get_cell("d20", "alpha")).strip() == "75.00"
            average = f"{(50.0 * RUNNING + 75.0) / (RUNNING + 1):.2f}"
            assert str(board.get_cell("Average", "alpha")).strip().startswith(average)
            await pilot.pause()
            shown = [board.render_line(y).text for y in range(board.size.height)]

            fresh = LeaderboardTable()  # the same board shown from scratch reads the same
            fresh.look, fresh._width = board.look, board._width
            rows = {key: [str(c) for c in cells] for key, cells in board._rows.items()}
            fresh.show(app.run_screen.leaderboard())
            assert {key: [str(c) for c in cells] for key, cells in fresh._rows.items()} == rows
            assert any("75.00" in line for line in shown)

    asyncio.run(scenario())


class _NoWalk(dict):  # type: ignore[type-arg]
    """The fold's shard counters, refusing to be walked: a dataset's start must touch its own only."""

    def __iter__(self) -> Any:
        raise AssertionError("the shard fold walked every shard's counters")


def test_a_dataset_starting_forgets_its_own_shard_counts_without_a_walk_over_all() -> None:
    fold = progress.ShardFold()
    fold.shards = _NoWalk()
    for d in ("a", "b"):
        fold.apply(ev.DatasetPlanned("m", d, 4, 2))
        for s in (0, 1):
            fold.apply(ev.ShardStatusChanged("m", d, s, 2, ev.PairStatus.RUNNING, 2, 0, 0))
    fold.apply(ev.SampleFinished("m", "a", 1, 3))
    fold.apply(ev.SampleFailed("m", "b", 0, 0, ev.SampleError("http", 500, "boom", 1)))
    assert fold.shards[("m", "a", 1)].completed == 1 and fold.shards[("m", "b", 0)].failed == 1
    fold.apply(ev.DatasetStarted("m", "a", 4, 4))  # a re-run of a: its counts come again with its statuses
    assert ("m", "a", 0) not in fold.shards and ("m", "a", 1) not in fold.shards
    assert fold.shards[("m", "b", 0)].failed == 1 and fold.shards[("m", "b", 1)].status == ev.PairStatus.RUNNING
    fold.apply(ev.SampleFinished("m", "a", 0, 0))  # counted afresh after the start
    assert fold.shards[("m", "a", 0)].completed == 1
    fold.apply(ev.DatasetPlanned("m", "a", 4, 2))
    assert ("m", "a", 0) not in fold.shards


def test_a_large_plan_shows_scores_on_the_leaderboard_spaced_out_and_all_of_them_at_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above SCORES_MANY pairs a leaderboard repaint that took long is followed by the next only
    later (its cost is the ranking and average over every dataset); the scores that came meanwhile
    are not lost: the run's end shows them all. (Here 40 pairs count as many, and every paint as slow.)"""
    from evaltui.ui.screens import run as run_screen

    monkeypatch.setattr(run_screen, "SCORES_MANY", 10)
    monkeypatch.setattr(run_screen, "SCORES_FREE", 0.0)
    monkeypatch.setattr(run_screen, "SCORES_SPACING", 1e9)
    clock = Clock()

    async def scenario() -> None:
        app = many_datasets_app(tmp_path, clock)
        async with app.run_test(size=(160, 60)) as pilot:
            names = [f"d{i:02}" for i in range(DATASETS)]
            feed(app, planned(names) + [ev.DatasetInferred("alpha", "d00", ev.PairStatus.DONE, 4, 0), ev.DatasetScored("alpha", "d00", "accuracy", 50.0)])
            board, table = app.query_one(LeaderboardTable), app.query_one(ProgressTable)
            assert str(board.get_cell("d00", "alpha")).strip() == "50.00"
            feed(app, [ev.DatasetInferred("alpha", "d01", ev.PairStatus.DONE, 4, 0), ev.DatasetScored("alpha", "d01", "accuracy", 75.0)])
            await pilot.pause()
            assert str(board.get_cell("d01", "alpha")).strip() == "-"  # its turn has not come
            assert "75.00" in table.shown_line("alpha", "d01")  # the progress row says it at once
            feed(app, [ev.RunFinished(0, False)])
            assert str(board.get_cell("d01", "alpha")).strip() == "75.00"
            assert str(board.get_cell("Average", "alpha")).strip().startswith("62.50")

    asyncio.run(scenario())


def test_the_retry_keys_follow_the_pairs_that_changed_not_a_walk_over_every_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`R` applies once a dataset failed and no longer once it is planned again; the footer asks
    every tick that statuses change, from the pairs that changed (RunState.failed_pairs, a walk
    over every pair, is not asked)."""
    from evaltui.engine.stream.state import RunState

    def walk(self: RunState) -> list[Any]:
        raise AssertionError("the footer walked every pair")

    clock = Clock()

    async def scenario() -> None:
        app = many_datasets_app(tmp_path, clock)
        async with app.run_test(size=(160, 60)) as pilot:
            names = [f"d{i:02}" for i in range(DATASETS)]
            feed(app, planned(names))
            await pilot.pause()
            monkeypatch.setattr(RunState, "failed_pairs", walk)
            screen = app.run_screen
            assert not screen.action_applies("retry_all")
            feed(app, [ev.DatasetInferred("alpha", "d05", ev.PairStatus.FAIL, 0, 4, error="4 of 4 failed")])
            assert screen.action_applies("retry_all")
            feed(app, [ev.DatasetPlanned("alpha", "d05", 4, 1)])
            assert not screen.action_applies("retry_all")

    asyncio.run(scenario())


def test_the_fold_counts_rows_planned_after_the_pane_stopped_growing(tmp_path: Path) -> None:
    """`↓ N more` under the progress pane counts every row below it, also those planned once the
    pane had its full height (the layout no longer changes then: 10,000 datasets said `↓ 10 more`)."""
    clock = Clock()

    async def scenario() -> None:
        app = many_datasets_app(tmp_path, clock)
        async with app.run_test(size=(160, 24)) as pilot:
            names = [f"d{i:02}" for i in range(DATASETS)]
            feed(app, planned(names[:20]))
            await pilot.pause()
            table = app.query_one(ProgressTable)
            shown = table.planned_rows
            assert shown is not None and 0 < shown < 20
            assert table.border_subtitle == f"↓ {table.row_count - shown} more"
            feed(app, [ev.DatasetPlanned("alpha", d, 4, 1) for d in names[20:]])
            await pilot.pause()
            assert table.row_count == DATASETS + 1  # the model's heading row, and a row a dataset
            assert table.border_subtitle == f"↓ {DATASETS + 1 - shown} more"

    asyncio.run(scenario())
