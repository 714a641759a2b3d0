"""The interactive session driven as a user would (Textual's Pilot), over a real engine run on the
simulator: failures shown, `r` re-runs only the failed samples, quit mid-run keeps the work."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, of_type, write_jsonl, write_plan
from textual.pilot import Pilot

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.state import RunState
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig
from evaltui.sim.config import Faults
from evaltui.ui.app import EvalApp
from evaltui.ui.widgets.panes import FailuresLog
from evaltui.ui.widgets.progress import ProgressTable

WAIT = 60.0  # seconds: the most any step may take on a loaded machine


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.1)


async def until_run_ends(pilot: Pilot[Any], app: EvalApp, settle: float = 0.3) -> None:
    """Until the run reported its end and the engine let go; then `settle` s for the panes."""
    await until(pilot, lambda: app.run_screen.state.finished is not None and not app.engine.busy, "the run to end")
    if settle:
        await pilot.pause(settle)


def move_to(app: EvalApp, pair: tuple[str, str]) -> None:
    table = app.query_one(ProgressTable)
    table.move_cursor(row=table.get_row_index(f"{pair[0]}\t{pair[1]}"))


def footer_keys(app: EvalApp) -> set[str]:
    return {b.key for _, b, enabled, _ in app.screen.active_bindings.values() if b.show and enabled}


def test_failed_dataset_shown_then_retried_with_r(tmp_path: Path, sim_factory: Any) -> None:
    # Every fourth question is too long for the server (a 422, never retried): "long" fails,
    # "short" does not. Then the server is fixed and `r` re-runs just those samples.
    sim = sim_factory(SimConfig(faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 4 == 0 else "")) for i, r in enumerate(arithmetic(24))]
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url)],
        datasets=[gsm_dataset("long", write_jsonl(tmp_path / "long.jsonl", rows)), gsm_dataset("short", write_jsonl(tmp_path / "short.jsonl", arithmetic(10)))],
    )
    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=events.append)

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(200, 50)) as pilot:
            await until_run_ends(pilot, app)
            long = app.run_screen.state.pairs[("m", "long")]
            assert long.status == ev.PairStatus.FAIL and long.failed == 6
            table = app.query_one(ProgressTable)
            assert "fail" in str(table.get_cell("m\tlong", "status"))
            lines = app.query_one(FailuresLog).lines
            assert len(lines) == 6 and all(line.startswith("m/long #") and " 400: prompt is too long" in line for line in lines)

            move_to(app, ("m", "short"))
            await pilot.pause()
            assert app.run_screen.state.pairs[("m", "short")].status == ev.PairStatus.SCORED
            assert "r" not in footer_keys(app)
            await pilot.press("r")
            await pilot.pause(0.3)
            assert not of_type(events, ev.RetryStarted), "r on a dataset that did not fail must do nothing"

            move_to(app, ("m", "long"))
            await pilot.pause()
            assert "r" in footer_keys(app)
            sim.config.faults = Faults()  # the server is fixed
            before = len(events)
            await pilot.press("r")
            await until(pilot, lambda: app.run_screen.state.pairs[("m", "long")].status == ev.PairStatus.SCORED and not app.engine.busy, "the retry to score")
            await pilot.pause(0.3)
            rerun = sorted(e.sample_index for e in of_type(events[before:], ev.SampleFinished))
            assert rerun == [0, 4, 8, 12, 16, 20]  # only the failed samples went out again
            assert app.query_one(FailuresLog).lines == []
            assert "scored" in str(table.get_cell("m\tlong", "status"))
            assert app.exit_code == 0
            assert "r" not in footer_keys(app)

    asyncio.run(scenario())


def test_enter_shows_failed_samples_and_predictions(tmp_path: Path, sim_factory: Any) -> None:
    sim = sim_factory(SimConfig(faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" [pad]" * 30 if i == 2 else "")) for i, r in enumerate(arithmetic(6))]
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    runner = Runner(load_plan(plan))

    async def scenario() -> None:
        from textual.widgets import DataTable

        from evaltui.ui.screens.details import DetailsScreen

        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until_run_ends(pilot, app, settle=0.0)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen) and app.screen.query_one("#details-body").display, "the details")
            failures = app.screen.query_one("#details-failures", DataTable)
            assert failures.row_count == 1
            assert [str(c) for c in failures.get_row_at(0)][:3] == ["2", "http", "400"]
            predictions = app.screen.query_one("#details-predictions", DataTable)
            assert predictions.row_count == 5
            records = app.screen.query_one("#details-records", DataTable)  # the per-sample log of those six
            assert records.row_count == 6
            rows = {str(records.get_row_at(k)[0]): [str(c) for c in records.get_row_at(k)] for k in range(6)}
            assert rows["2"][3].startswith("400 http ")
            assert rows["0"][3].startswith("200 ok ")
            assert "r" not in footer_keys(app)  # the retry key belongs to the main screen
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, DetailsScreen)

    asyncio.run(scenario())


def test_quit_mid_run_asks_keeps_work_and_a_rerun_resumes(tmp_path: Path) -> None:
    N = 2000
    plan = write_plan(
        tmp_path,
        # 2,000 samples at 8 in flight last at least 12.5 s: the run is surely still going when the
        # user changes their mind, however slow the machine is today
        models=[{"abbr": "m", "type": "lightllm", "url": "sim://?latency=0.05", "max_workers": 8}],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(N)))],
    )
    runner = Runner(load_plan(plan))

    async def scenario() -> EvalApp:
        from evaltui.ui.screens.modals import ConfirmQuit

        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.run_screen.state.totals()[0] >= 20, "some samples to finish")
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), "the quit question")
            await pilot.press("n")  # changed my mind: the run goes on
            await pilot.pause(0.3)
            assert app.engine.busy and not app._exit
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), "the quit question again")
            await pilot.press("y")
            await until(pilot, lambda: app._exit, "the app to leave")
        return app

    app = asyncio.run(scenario())
    assert app.exit_code == 130 and app.return_value == 130
    done_before = app.run_screen.state.totals()[0]
    assert 20 <= done_before < N

    from planmaker import run_plan

    # the re-run: the same work dir, datasets and model settings, against a quicker server
    # (neither the URL nor max_workers shapes a prediction, so the work is kept)
    rerun = write_plan(
        tmp_path,
        models=[{"abbr": "m", "type": "lightllm", "url": "sim://?latency=0", "max_workers": 32}],
        datasets=[gsm_dataset("d", tmp_path / "d.jsonl")],
        name="rerun.toml",
    )
    code, events, _ = run_plan(rerun)
    assert code == 0
    planned = of_type(events, ev.DatasetPlanned)[0]
    assert planned.completed >= done_before  # nothing finished was lost
    assert len(of_type(events, ev.SampleFinished)) == N - planned.completed  # nothing done twice


def test_r_while_the_run_goes_on_joins_it(tmp_path: Path, sim_factory: Any) -> None:
    from evaltui.sim.config import ModelProfile

    sim = sim_factory(SimConfig(default=ModelProfile(latency=0.02), faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 4 == 0 else "")) for i, r in enumerate(arithmetic(12))]
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=4)],
        datasets=[gsm_dataset("long", write_jsonl(tmp_path / "long.jsonl", rows)), gsm_dataset("big", write_jsonl(tmp_path / "big.jsonl", arithmetic(400, "B")))],
    )
    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=events.append)

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.run_screen.state.pairs.get(("m", "long")) is not None and app.run_screen.state.pairs[("m", "long")].status == ev.PairStatus.FAIL, "long to fail")
            move_to(app, ("m", "long"))
            await pilot.pause()
            sim.config.faults = Faults()
            await pilot.press("r")
            await until_run_ends(pilot, app, settle=0.0)
            assert app.run_screen.state.pairs[("m", "long")].status == ev.PairStatus.SCORED
            assert app.run_screen.state.pairs[("m", "big")].status == ev.PairStatus.SCORED
            assert app.exit_code == 0

    asyncio.run(scenario())
    kinds = [type(e) for e in events]
    assert kinds.count(ev.RunFinished) == 1 and kinds.index(ev.RetryStarted) < kinds.index(ev.RunFinished)  # one run, joined
    retried = kinds.index(ev.RetryStarted)
    assert sorted(e.sample_index for e in of_type(events[retried:], ev.SampleFinished) if e.dataset == "long") == [0, 4, 8]


def test_R_retries_every_failed_dataset_and_only_their_failed_samples(tmp_path: Path, sim_factory: Any) -> None:
    # Every third question of "one" and "two" is too long for the server (a 400, never retried);
    # "fine" has none. The server is fixed, then `R` re-runs just those samples of both.
    sim = sim_factory(SimConfig(faults=Faults(max_prompt_chars=120)))

    def padded(prefix: str) -> Path:
        rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 3 == 0 else "")) for i, r in enumerate(arithmetic(9, prefix))]
        return write_jsonl(tmp_path / f"{prefix}.jsonl", rows)

    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url)],
        datasets=[gsm_dataset("one", padded("A")), gsm_dataset("two", padded("B")), gsm_dataset("fine", write_jsonl(tmp_path / "fine.jsonl", arithmetic(5)))],
    )
    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=events.append)

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(200, 50)) as pilot:
            await until_run_ends(pilot, app)
            assert sorted(app.run_screen.state.failed_pairs()) == [("m", "one"), ("m", "two")]
            assert "R" in footer_keys(app)
            sim.config.faults = Faults()  # the server is fixed
            before = len(events)
            await pilot.press("R")
            await until(
                pilot,
                lambda: all(app.run_screen.state.pairs[("m", d)].status == ev.PairStatus.SCORED for d in ("one", "two")) and not app.engine.busy,
                "both retries to score",
            )
            await pilot.pause(0.3)
            resent = sorted((e.dataset, e.sample_index) for e in of_type(events[before:], ev.SampleFinished))
            assert resent == [(d, i) for d in ("one", "two") for i in (0, 3, 6)]  # only the failed samples, of both
            assert app.query_one(FailuresLog).lines == []
            assert app.exit_code == 0 and "R" not in footer_keys(app)

    asyncio.run(scenario())


def test_question_mark_shows_the_keys(tmp_path: Path) -> None:
    from textual.widgets import Static
    from ui_script import Clock, feed, planned, scripted_app

    from evaltui.ui.screens.modals import HelpScreen

    async def scenario() -> None:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(120, 40)) as pilot:
            feed(app, planned())
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            text = "\n".join(str(s.render()) for s in app.screen.query(Static))
            for key, what in (("enter", "details"), ("r", "retry the highlighted"), ("R", "retry every failed"), ("t", "next theme"), ("q", "quit"), ("?", "this help")):
                assert any(line.strip().startswith(key) and what in line for line in text.splitlines()), (key, text)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)

    asyncio.run(scenario())


def test_r_again_on_a_dataset_whose_retry_failed_while_the_run_goes_on(tmp_path: Path, sim_factory: Any) -> None:
    # Seen in tmux: `r` on a failed dataset of a model that had finished while another model still
    # ran; its retry failed again, and `r` was not offered on it again until the whole run ended.
    from evaltui.sim.config import ModelProfile

    # a answers at once, b takes 30 ms: b's 4,000 samples at 4 in flight last 30 s at least, so
    # the run surely goes on while a's failed dataset is retried twice
    sim = sim_factory(SimConfig(models={"b": ModelProfile(latency=0.03)}, faults=Faults(max_prompt_chars=120)))
    rows = [dict(r, question=r["question"] + (" pad" * 40 if i % 4 == 0 else "")) for i, r in enumerate(arithmetic(12))]
    plan = write_plan(
        tmp_path,
        models=[lightllm("a", sim.url, max_workers=16), lightllm("b", sim.url, max_workers=4)],
        datasets=[gsm_dataset("long", write_jsonl(tmp_path / "long.jsonl", rows)), gsm_dataset("big", write_jsonl(tmp_path / "big.jsonl", arithmetic(4000, "B")))],
        run={"max_num_workers": 2},
    )
    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=events.append)
    long, big = ("a", "long"), ("b", "big")

    async def scenario() -> None:
        from evaltui.ui.screens.modals import ConfirmQuit

        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 30)) as pilot:
            def a_done() -> bool:
                pairs = app.run_screen.state.pairs
                return all(k in pairs for k in (long, ("a", "big"))) and pairs[long].status == ev.PairStatus.FAIL and pairs[("a", "big")].status == ev.PairStatus.SCORED

            await until(pilot, a_done, "model a to be done, its long dataset failed")
            move_to(app, long)
            await pilot.pause()
            await pilot.press("r")  # the server still refuses those prompts: it fails again
            await until(pilot, lambda: len(of_type(events, ev.RetryStarted)) == 1 and app.run_screen.state.pairs[long].status == ev.PairStatus.FAIL, "the retry to fail")
            await pilot.pause(0.3)
            assert app.run_screen.state.pairs[big].status == ev.PairStatus.RUNNING, "the test needs the run to go on"
            assert "r" in footer_keys(app), "r must be offered again on the failed dataset"
            sim.config.faults = Faults()  # the server is fixed
            await pilot.press("r")
            await until(pilot, lambda: app.run_screen.state.pairs[long].status == ev.PairStatus.SCORED, "the second retry to score")
            assert app.run_screen.state.pairs[big].status == ev.PairStatus.RUNNING and not of_type(events, ev.RunFinished)  # one run, joined twice
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), "the quit question")
            await pilot.press("y")
            await until(pilot, lambda: app._exit, "the app to leave")

    asyncio.run(scenario())


@pytest.mark.parametrize("shards", [1, 2])
def test_datasets_the_watcher_gave_up_on_are_scored_with_r(tmp_path: Path, sim_factory: Any, monkeypatch: pytest.MonkeyPatch, shards: int) -> None:
    # The heartbeat stops (a laptop asleep longer than heartbeat_timeout, a stalled disk): the
    # watch-scorer takes inference for gone and skips the datasets it was waiting for — "d"
    # running (in one or two shards), "e" still queued. They ended "done" or "skipped" with no
    # key to score them; now both end "skipped", and `r` / `R` score them.
    from evaltui.engine.disk.workdir import WorkDir

    sim = sim_factory(SimConfig(default=ModelProfile(latency=0.05)))  # 2 × 30 samples, 2 at a time: ~1.5 s
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=2)],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(30)), shards=shards),
                  gsm_dataset("e", write_jsonl(tmp_path / "e.jsonl", arithmetic(30)))],
        run={"heartbeat_interval": 0.1, "heartbeat_timeout": 0.3, "watch_interval": 0.1},
    )
    beating = {"on": False}
    real_beat = WorkDir.beat
    monkeypatch.setattr(WorkDir, "beat", lambda self: real_beat(self) if beating["on"] else None)
    # A scorer that cannot know whether inference is alive goes by the heartbeat (the one inside a
    # run knows, and since issue 23 never skips for a stale heartbeat): its skips are what r and R score.
    from evaltui.engine.run.scorer import Scorer

    real_init = Scorer.__init__

    def blind(self: Scorer, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **{**kwargs, "inferring": None})

    monkeypatch.setattr(Scorer, "__init__", blind)
    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=events.append)

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(200, 50), notifications=True) as pilot:
            await until_run_ends(pilot, app)
            assert of_type(events, ev.ScoringSkipped) and "heartbeat stale" in of_type(events, ev.ScoringSkipped)[0].reason
            for d in ("d", "e"):
                assert app.run_screen.state.pairs[("m", d)].status == ev.PairStatus.SKIPPED, d
                assert app.run_screen.state.pairs[("m", d)].completed == 30  # its inference went on and finished
            late = RunState()  # a late subscriber's state says the same
            for e in app.run_screen.state.replay():
                late.apply(e)
            assert late.pairs[("m", "d")].status == ev.PairStatus.SKIPPED
            move_to(app, ("m", "d"))
            await pilot.pause()
            assert {"r", "R"} <= footer_keys(app)
            beating["on"] = True  # awake again
            requests = sim.stats.requests_total
            await pilot.press("r")
            await pilot.pause()
            assert "scoring m/d" in [n.message for n in app._notifications]
            await until(pilot, lambda: app.run_screen.state.pairs[("m", "d")].status == ev.PairStatus.SCORED, "d to be scored")
            await pilot.press("R")
            await until(pilot, lambda: app.run_screen.state.pairs[("m", "e")].status == ev.PairStatus.SCORED, "e to be scored")
            assert app.run_screen.state.pairs[("m", "d")].score is not None and app.run_screen.state.pairs[("m", "e")].score is not None
            assert sim.stats.requests_total == requests  # their answers were kept: only scored

    asyncio.run(scenario())
