"""The interactive session of a model with two replicas, one of which dies: the strip says how
many are up, and `enter` on the model's heading row shows each replica's state and counters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from planmaker import arithmetic, gsm_dataset, key_for, write_jsonl, write_plan
from test_ui_app import until, until_run_ends

from evaltui.engine.run.runner import Runner
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig
from evaltui.ui.app import EvalApp
from evaltui.ui.screens.fleet import FleetScreen
from evaltui.ui.widgets.progress import ProgressTable


def test_enter_on_a_model_shows_its_replicas_and_the_strip_how_many_are_up(tmp_path: Path, sim_factory: Any) -> None:
    rows = arithmetic(80)
    dying = sim_factory(SimConfig(answer_key=key_for(rows), die_after=10, default=ModelProfile(latency=0.01)))
    other = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=0.01)))
    model = {"abbr": "m", "type": "lightllm", "url": [f"{dying.url}/m/generate", f"{other.url}/m/generate"],
             "max_workers": 4, "retry": 4, "backoff": 0.0, "timeout": 10.0, "concurrency": "adaptive"}
    plan = write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    runner = Runner(load_plan(plan))

    async def scenario() -> None:
        from textual.widgets import DataTable

        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: "m" in app.run_screen.state.replicas and app.run_screen.state.replicas["m"][f"{dying.url}/m/generate"].state != "up", "the ejection")
            await until_run_ends(pilot, app, settle=1.2)  # the strip repaints once a second
            strip = app.run_screen.strip.render().plain
            assert "1/2 up" in strip and "m 0/" in strip
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("m"))
            await pilot.pause()
            assert table.highlighted_model() == "m"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), "the breakdown")
            replicas = app.screen.query_one("#fleet-replicas", DataTable)
            cells = [[str(c) for c in replicas.get_row_at(i)] for i in range(replicas.row_count)]
            assert [c[0] for c in cells] == [f"{dying.url}/m/generate", f"{other.url}/m/generate"]
            assert cells[0][1] in ("ejected", "probing") and cells[1][1] == "up"
            assert int(cells[1][5]) == 0 and int(cells[0][5]) >= 1  # errors
            limits = app.screen.query_one("#fleet-limits").render().plain
            assert "adaptive" in limits
            # the run has ended: no rate, nothing in flight, no limit "now"
            assert all(c[2] == "0" and c[4] == "–" for c in cells) and "now" not in limits
            assert "the run has ended" in app.screen.query_one("#fleet-title").render().plain
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, FleetScreen)

    asyncio.run(scenario())


def test_a_models_breakdown_at_80_columns_scrolls_to_its_errors_and_why(tmp_path: Path) -> None:
    """On a model's row at 80 columns the `errors` and `why` columns were cut, and → did nothing."""
    from planmaker import write_plan
    from textual.widgets import DataTable
    from ui_script import Clock, feed

    from evaltui.engine.stream import events as ev

    urls = ["http://gpu-node-0001.cluster.example.org:8000/generate", "http://gpu-node-0002.cluster.example.org:8000/generate"]
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": urls, "max_workers": 8}],
                      datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(4)))])
    clock = Clock()
    app = EvalApp(Runner(load_plan(plan), work_dir=tmp_path / "out"), theme="evaltui-dark", start=False, clock=clock.monotonic, wall_clock=clock.wall)
    loads = tuple(ev.ReplicaLoad(u, "up", 2, 4, 10, 0) for u in urls)
    why = "Cannot connect to host gpu-node-0001.cluster.example.org:8000 ssl:default [Connect call failed]"

    async def scenario() -> tuple[list[str], float, float, int]:
        async with app.run_test(size=(80, 24)) as pilot:
            feed(app, [ev.RunStarted("/tmp/out", ("m",), ("d",), "t"), ev.DatasetPlanned("m", "d", 4, 1), ev.ModelLoad("m", 4, 8, 0, 10, 8, loads),
                       ev.ReplicaStateChanged("m", urls[0], "ejected", why, 2.0, 1)])
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("m"))
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), "the breakdown")
            replicas = app.screen.query_one("#fleet-replicas", DataTable)
            replicas.focus()
            await pilot.pause()
            before = replicas.scroll_x
            for _ in range(12):
                await pilot.press("right")
            await pilot.pause(1.5)  # past its repaint of each second: scrolled, it stays so
            return [str(c) for c in replicas.get_row_at(0)], before, replicas.scroll_x, replicas.region.right

    cells, before, after, right = asyncio.run(scenario())
    assert cells[1] == "ejected" and cells[-1] == why
    assert right <= 80 and after > before  # as wide as the screen, and → brings the errors and why into sight
