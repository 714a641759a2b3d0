"""`evaltui watch` as a user meets it: the Textual view (driven by Textual's Pilot) over a headless
run in another process, its keys in watch mode, and `--no-ui` printing a headless run's lines."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan
from test_ui_app import footer_keys, move_to, until
from watchkit import REPO, fixture_copy, start_writer, tree, watch_plan

from evaltui.cli import main
from evaltui.engine.events import PairStatus
from evaltui.engine.follow import Follower, open_view
from evaltui.engine.runner import Runner
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
                    pair = app.state.pairs.get(("m", "d0"))
                    if pair is not None and pair.status == PairStatus.RUNNING:
                        shown.add(table.shown_line("m", "d0").split("/60")[0].split()[-1])
                    return len({s for s in shown if s not in ("0", "60")}) >= 2

                await until(pilot, moving, "d0's progress to move on screen")
                await until(pilot, lambda: app.state.finished is not None, "the run to end")
                await pilot.pause(0.3)
                board = app.board
                assert [str(board.get_cell(key, "m")).strip() for key in ("d0", "d1", "Average")] == ["100.00", "100.00", "100.00"]
                assert "scored" in table.shown_line("m", "d1")
                assert app.title.startswith("watching: ")
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


def test_r_in_watch_mode_says_that_retry_needs_the_plan(tmp_path: Path, sim_factory: Any) -> None:
    sim = sim_factory(SimConfig(faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 3 == 0 else "")) for i, r in enumerate(arithmetic(9))]
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("long", write_jsonl(tmp_path / "d.jsonl", rows))])
    code, _, runner = run_plan(plan)
    assert code == 1
    before = tree(runner.workdir.root)

    async def scenario() -> None:
        app = EvalApp(Follower(open_view(runner.workdir.root), interval=0.1), theme="evaltui-dark")
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await until(pilot, lambda: app.state.finished is not None, "the followed run's end")
            move_to(app, ("m", "long"))
            await pilot.pause()
            assert {"r", "R"} <= footer_keys(app)
            await pilot.press("r")
            await pilot.pause()
            said = [n.message for n in app._notifications]
            assert any(m.startswith("retry needs the plan: `evaltui PLAN.toml` resumes the run") for m in said), said
            assert app.state.pairs[("m", "long")].status == PairStatus.FAIL  # nothing was retried
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(scenario())
    assert tree(runner.workdir.root) == before


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
    assert "qwen-7b/gsm8k: inference FAILED" in r.stdout and "qwen-7b/humaneval: scoring FAILED" in r.stdout
    assert "humaneval  8e312c   humaneval_pass@1  gen         -" in r.stdout
    r = run(str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stderr == f"evaltui watch: {tmp_path / 'nope'}: no such folder\n"
    assert "evaltui watch --help" in subprocess.run([sys.executable, "-m", "evaltui", "--help"], capture_output=True, text=True, timeout=60, cwd=REPO).stdout


def test_watch_reads_a_reducers_metrics_and_shows_every_pass_at_k_row(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A finished run of several epochs whose reducers name their metrics (accuracy_at_least_3,
    pass@1/pass@3/pass@5): watch reads them as the run wrote them, scored, with every row filled."""
    from watchkit import follow_to_end, of

    from evaltui.engine import events as ev

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
