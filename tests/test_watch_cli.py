"""`evaltui watch` as a user meets it: the Textual view (driven by Textual's Pilot) over a headless
run in another process, its keys in watch mode, and `--no-ui` printing a headless run's lines."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan
from test_ui_80x24 import screen_lines
from test_ui_app import footer_keys, move_to, until
from watchkit import REPO, fixture_copy, start_writer, tree, watch_plan

from evaltui.cli import main
from evaltui.engine.follow.follower import Follower, open_view
from evaltui.engine.run.runner import Runner
from evaltui.engine.stream.events import PairStatus
from evaltui.headless import run_headless
from evaltui.plan import load_plan
from evaltui.sim import SimConfig
from evaltui.sim.config import Faults, ModelProfile
from evaltui.ui.app import EvalApp
from evaltui.ui.widgets.progress import ProgressTable


def test_the_view_follows_a_run_in_another_process_then_shows_its_leaderboard(tmp_path: Path, sim_factory: Any) -> None:
    rows = arithmetic(60, prefix="D0-") + arithmetic(60, prefix="D1-")
    sim = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=0.04)))
    plan = watch_plan(tmp_path, sim.url)
    work = tmp_path / "out"
    work.mkdir()
    follower = Follower(open_view(work), interval=0.1)

    async def scenario() -> None:
        app = EvalApp(follower, theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            writer = start_writer(plan, tmp_path / "writer.log")
            try:
                table = app.query_one(ProgressTable)
                shown: set[str] = set()

                def moving() -> bool:
                    pair = app.run_screen.state.pairs.get(("m", "d0"))
                    if pair is not None and pair.status == PairStatus.RUNNING:
                        shown.add(table.shown_line("m", "d0").split("/60")[0].split()[-1])
                    return len({s for s in shown if s not in ("0", "60")}) >= 2

                await until(pilot, moving, "d0's progress to move on screen")
                await until(pilot, lambda: app.run_screen.state.finished is not None, "the run to end")
                await pilot.pause(0.3)
                board = app.run_screen.board
                assert [str(board.get_cell(key, "m")).strip() for key in ("d0", "d1", "Average")] == ["100.00 ±0.00"] * 3  # each with its interval (issue 24)
                assert "scored" in table.shown_line("m", "d1")
                assert app.title.startswith("watch · ")
                assert await asyncio.to_thread(writer.wait, 60) == 0
                await pilot.press("q")  # nothing to interrupt: it leaves at once
                await pilot.pause(0.3)
                assert not app.is_running
            finally:
                if writer.poll() is None:
                    writer.kill()
                    writer.wait(timeout=30)
        assert app.return_code == 0

    asyncio.run(scenario())


def test_r_in_watch_mode_says_how_to_retry_in_one_line_once(tmp_path: Path, sim_factory: Any) -> None:
    """At 80×24: one toast on the bottom row (over the footer, no pane's data), and pressing r
    again replaces it rather than stacking another over the panes."""
    sim = sim_factory(SimConfig(faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 3 == 0 else "")) for i, r in enumerate(arithmetic(9))]
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("long", write_jsonl(tmp_path / "d.jsonl", rows))])
    code, _, runner = run_plan(plan)
    assert code == 1
    before = tree(runner.workdir.root)

    async def scenario() -> None:
        app = EvalApp(Follower(open_view(runner.workdir.root), interval=0.1), theme="evaltui-dark")
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await until(pilot, lambda: app.run_screen.state.finished is not None, "the followed run's end")
            move_to(app, ("m", "long"))
            app.clear_notifications()
            await pilot.pause(0.3)
            assert {"r", "R"} <= footer_keys(app)
            quiet = screen_lines(app)
            for _ in range(3):
                await pilot.press("r")
                await pilot.pause(0.3)
            said = [n.message for n in app._notifications]
            assert said == ["retry: `evaltui PLAN.toml` resumes the run, rerunning what failed"], said  # it has ended
            lines = screen_lines(app)
            assert lines[:-1] == quiet[:-1] and "retry: `evaltui PLAN.toml` resumes the run" in lines[-1]
            assert app.run_screen.state.pairs[("m", "long")].status == PairStatus.FAIL  # nothing was retried
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(scenario())
    assert tree(runner.workdir.root) == before


def test_a_killed_runs_unfinished_dataset_reads_stopped_and_r_says_how_to_resume(tmp_path: Path, sim_factory: Any) -> None:
    """A status left `running` that no process holds (a kill -9): the dataset reads `stopped`
    (not pending), the strip `■ stopped` with the run's own elapsed time, and `r`/`R` on it say
    that `evaltui PLAN.toml` resumes it, as they do on a failed one."""
    import json

    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    code, _, runner = run_plan(plan)
    assert code == 0
    wd = runner.workdir
    status = wd.status_file("m", "d")
    status.write_text(json.dumps({**json.loads(status.read_text()), "status": "running", "completed": 3}))  # as a kill -9 leaves it
    wd.result_file("m", "d").unlink()

    async def scenario() -> None:
        app = EvalApp(Follower(open_view(wd.root), interval=0.1), theme="evaltui-dark")
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await until(pilot, lambda: app.run_screen.state.finished is not None, "the followed run's end")
            assert app.run_screen.state.pairs[("m", "d")].status == PairStatus.STOPPED
            assert "stopped" in app.query_one(ProgressTable).shown_line("m", "d")
            assert screen_lines(app)[0].strip().startswith("■ stopped: heartbeat ")
            move_to(app, ("m", "d"))
            app.clear_notifications()
            await pilot.pause(0.3)
            assert {"r", "R"} <= footer_keys(app)
            for key in ("r", "R"):
                await pilot.press(key)
                await pilot.pause(0.3)
            said = [n.message for n in app._notifications]
            assert said == ["resume: `evaltui PLAN.toml` resumes the run, running what is unfinished and rerunning what failed"], said
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(scenario())


def test_the_title_follows_the_plan_and_is_cut_visibly_at_80_columns(tmp_path: Path, sim_factory: Any) -> None:
    """Started before the run, the watcher takes the plan's title once the run writes it; at 80
    columns a long one ends with an ellipsis where the progress pane's border has no more room."""
    rows = arithmetic(4)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    title = "Llama-3-8B-Instruct against GSM8K, MMLU and HumanEval: the nightly runs"
    assert len(title) == 71
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", write_jsonl(tmp_path / "d.jsonl", rows))])
    plan.write_text(plan.read_text(encoding="utf-8").replace('title = "test"', f'title = "{title}"'), encoding="utf-8")
    work = tmp_path / "out"
    work.mkdir()

    async def scenario() -> None:
        app = EvalApp(Follower(open_view(work), interval=0.1), theme="evaltui-dark")
        async with app.run_test(size=(80, 24)) as pilot:
            assert app.title == "watch · evaltui out"
            code, _, _ = await asyncio.to_thread(run_plan, plan)
            assert code == 0
            await until(pilot, lambda: app.run_screen.state.finished is not None and app.run_screen.state.title == title, "the run's end")
            await pilot.pause(0.3)
            assert app.title == f"watch · {title}"
            border = next(line for line in screen_lines(app) if line.startswith("╭─ progress"))
            assert f"progress · watch · {title[:40]}" in border and border.rstrip().endswith("… ─╮"), border

    asyncio.run(scenario())


def test_watching_the_load_it_cannot_know_is_not_shown_as_zero(tmp_path: Path, sim_factory: Any) -> None:
    """A work dir holds no requests in flight, retries or replica states: the strip and a model's
    breakdown say "–", not "0 in flight" and "up" (a killed run's replicas are not up)."""
    from textual.widgets import DataTable

    from evaltui.ui.screens.fleet import FleetScreen

    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=16)], datasets=[gsm_dataset("a", write_jsonl(tmp_path / "d.jsonl", rows))])
    code, _, runner = run_plan(plan)
    assert code == 0

    async def scenario() -> None:
        app = EvalApp(Follower(open_view(runner.workdir.root), interval=0.1), theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.run_screen.state.finished is not None, "the followed run's end")
            await pilot.pause(1.2)  # the strip repaints once a second
            strip = app.run_screen.strip.render().plain
            assert "retries –" in strip and "in flight m –/16" in strip, strip
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("m"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), "the breakdown")
            replicas = app.screen.query_one("#fleet-replicas", DataTable)
            cells = [str(c) for c in replicas.get_row_at(0)]
            assert cells[1:3] == ["–", "–"] and cells[3] == "16", cells  # state and in flight unknown; the limit is the plan's
            assert "not recorded" in app.screen.query_one("#fleet-limits").render().plain

    asyncio.run(scenario())


def test_no_ui_prints_the_lines_of_a_headless_run_and_its_table(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = arithmetic(12)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data), gsm_dataset("b", data, shards=2)])
    out = io.StringIO()
    assert run_headless(Runner(load_plan(plan)), out=out) == 0
    ran = out.getvalue()

    assert main(["watch", str(tmp_path / "out"), "--no-ui"]) == 0
    watched = capsys.readouterr().out

    def said(text: str) -> list[str]:
        return [line.split("] ", 1)[1] for line in text.splitlines() if line.startswith("[") and ("inference done" in line or "scored," in line)]

    assert sorted(said(watched)) == sorted(said(ran)) and len(said(ran)) == 4  # the same words (the order is the run's)
    table = lambda text: text[text.index("dataset  "):text.index("Average")]  # noqa: E731
    assert table(watched) == table(ran)
    assert "watching evaltui work dir: no run is using it now" in watched
    assert "summary: " + str(tmp_path / "out" / "summary") in watched


def test_the_watch_command_line(tmp_path: Path) -> None:
    root = fixture_copy("failed", tmp_path)
    run = lambda *args: subprocess.run([sys.executable, "-m", "evaltui", "watch", *args], capture_output=True, text=True, timeout=60, cwd=REPO)  # noqa: E731
    r = run("--help")
    assert r.returncode == 0 and "never writes to the work dir" in r.stdout and "--no-ui" in r.stdout
    r = run(str(root), "--no-ui")
    assert r.returncode == 1  # a dataset failed: not everything was scored
    assert "qwen-7b/gsm8k: inference FAILED: 1 of 4 done, 3 missing" in r.stdout and "qwen-7b/humaneval: scoring FAILED" in r.stdout
    assert "humaneval  8e312c   humaneval_pass@1  gen         -" in r.stdout
    r = run(str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stderr == f"evaltui watch: {tmp_path / 'nope'}: no such folder\n"
    assert "evaltui watch --help" in subprocess.run([sys.executable, "-m", "evaltui", "--help"], capture_output=True, text=True, timeout=60, cwd=REPO).stdout


def _long_ago(root: Path) -> None:
    then = time.time() - 600
    for path in [root, *root.rglob("*")]:
        os.utime(path, (then, then))


def test_no_ui_refuses_a_folder_nothing_will_make_a_work_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable plan.toml, or an OpenCompass folder with only configs/, that nothing has
    written for heartbeat_timeout: one line and exit 2, not a wait for ever."""
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "plan.toml").write_text("title = 3\n")
    configs = tmp_path / "20250101_120000"
    (configs / "configs").mkdir(parents=True)
    (configs / "configs" / "20250101_120000.py").write_text("models = []\n")
    for root, said in ((torn, "title: expected a string"), (configs, "no infer_status/, predictions/ or results/")):
        _long_ago(root)
        assert main(["watch", str(root), "--no-ui"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith(f"evaltui watch: nothing to follow in {root}") and said in err, err
        assert "nothing has written there for 10m" in err


def test_a_folder_being_written_or_empty_is_waited_for(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh = tmp_path / "20250101_120000"
    (fresh / "configs").mkdir(parents=True)  # OpenCompass has just begun
    for root in (empty, fresh):
        assert Follower(open_view(root), until_over=True).unusable() is None


def test_a_folder_left_unusable_by_its_writer_ends_the_wait(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    (root / "plan.toml").write_text("title = 3\n")  # being written, say: waited for
    follower = Follower(open_view(root), until_over=True, interval=0.01, idle_interval=0.01)
    events: list[Any] = []
    follower.subscribe(events.append)
    follower.look()
    assert follower.unusable() is None
    _long_ago(root)  # and then nothing more came
    assert anyio.run(follower.run) == 2
    assert events[-1].level == "error" and events[-1].message.startswith(f"nothing to follow in {root}")
def test_watch_reads_a_reducers_metrics_and_shows_every_pass_at_k_row(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A finished run of several epochs whose reducers name their metrics (accuracy_at_least_3,
    pass@1/pass@3/pass@5): watch reads them as the run wrote them, scored, with every row filled."""
    from watchkit import follow_to_end, of

    from evaltui.engine.stream import events as ev

    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    model = lightllm("m", sim.url, generation_kwargs={"do_sample": True, "seed": 1, "max_new_tokens": 32})
    datasets = [
        gsm_dataset("least", data, epochs=5, evaluator={"type": "gsm8k", "reducer": "at_least_k", "k": 3}),
        gsm_dataset("passk", data, epochs=5, evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 3, 5]}),
    ]
    code, events, runner = run_plan(write_plan(tmp_path, models=[model], datasets=datasets))
    assert code == 0
    ran = {(e.dataset, e.metric): (e.score, e.extra) for e in events if isinstance(e, ev.DatasetScored)}

    _, watched, follower = follow_to_end(runner.workdir.root)
    said = {(e.dataset, e.metric): (e.score, e.extra) for e in of(watched, ev.DatasetScored)}
    assert said == ran and set(said) == {("least", "accuracy_at_least_3"), ("passk", "pass@1")}
    assert len(said[("passk", "pass@1")][1]) == 2  # pass@3, pass@5
    assert follower.epochs == {"least": 5, "passk": 5}  # what its lines count units by, as the run's do
    board = of(watched, ev.RunFinished)[0].leaderboard
    assert board.rows() == of(events, ev.RunFinished)[0].leaderboard.rows()

    assert main(["watch", str(runner.workdir.root), "--no-ui"]) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out
    for metric in ("accuracy_at_least_3", "pass@3", "pass@5"):
        (line,) = [row for row in out.splitlines() if f"  {metric}  " in row]
        assert line.split()[-1] != "-", line
