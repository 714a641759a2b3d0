"""Judging as a user watches it (issue 27): judged / answered per dataset on the one event stream,
in the progress row and the headless lines; the judge in the strip like any model; its reasoning
beside the grade in the details screen.

The judge is the project's simulator grading by a rule (sim/answers.py `judge_reply`), as in
tests/test_judges.py, whose plan and rows these reuse; a slow judge (its `latency`, one worker)
keeps the judging on screen long enough to be seen under way.
"""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path
from typing import Any

from planmaker import of_type, run_plan
from test_judges import ROWS, _plan, _right, _tested
from test_ui_app import until

from evaltui.engine.disk.runlog import EventLines
from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.engine.stream.state import RunState
from evaltui.headless import follow_headless
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig

N = len(ROWS)


def _slow_judge(sim_factory: Any) -> Any:
    """A judge answering one request at a time, each after 0.25 s: ~3 s of judging for 12 answers."""
    return sim_factory(SimConfig(models={"grader": ModelProfile(latency=0.25)}))


# ---------------------------------------------------------------------------- the fold


def test_pair_judged_folds_into_the_pairs_counts_and_replays() -> None:
    s = RunState()
    s.apply(ev.DatasetPlanned("m", "qa", 10, 1))
    s.apply(ev.DatasetInferred("m", "qa", PairStatus.DONE, 10, 0))
    s.apply(ev.DatasetScoring("m", "qa"))
    d = s.apply(ev.PairJudged("m", "qa", "grader", 3, 10))
    p = s.pairs[("m", "qa")]
    assert d.pairs == {("m", "qa")} and not d.statuses  # the row repaints, nothing else
    assert (p.judge, p.judged, p.to_judge, p.judge_failed, p.judging) == ("grader", 3, 10, 0, True)
    assert p.judged_text() == "judged 3/10"
    s.apply(ev.PairJudged("m", "qa", "grader", 9, 10, 1, ended=True))
    assert not p.judging and p.judged_text() == "judged 9/10, 1 no grade"
    # a late subscriber is told the judging too
    t = RunState()
    for e in s.replay():
        t.apply(e)
    q = t.pairs[("m", "qa")]
    assert (q.judge, q.judged, q.to_judge, q.judge_failed, q.judging) == ("grader", 9, 10, 1, False)
    # planned or retried again: the judging counts anew
    s.apply(ev.RetryStarted((("m", "qa"),)))
    assert (p.judge, p.judged, p.to_judge) == ("", 0, 0)
    # the run log says it once, when it ends
    lines = EventLines()
    assert lines(ev.PairJudged("m", "qa", "grader", 3, 10)) is None
    assert lines(ev.PairJudged("m", "qa", "grader", 10, 10, 0, True)) == "m/qa: judged 10/10 by grader"


# ---------------------------------------------------------------------------- the engine


def test_judging_is_said_coalesced_from_none_to_every_verdict(tmp_path: Path, sim_factory: Any) -> None:
    rows = 60
    tested, judge = _tested(sim_factory), sim_factory(SimConfig())
    plan = _plan(tmp_path, tested.url, judge.url)
    from planmaker import write_jsonl

    write_jsonl(tmp_path / "qa.jsonl", [{"question": f"Item {i}: which code does it carry?", "answer": str(100 + 7 * i)} for i in range(rows)])
    code, events, _ = run_plan(plan)
    assert code == 0 and judge.stats.requests_total == rows
    said = of_type(events, ev.PairJudged)
    assert said[0].judged == 0 and said[0].answered <= rows and not said[0].ended  # judged as the answers come
    assert said[-1] == ev.PairJudged("m", "qa", "grader", rows, rows, 0, True)
    assert [e.ended for e in said].count(True) == 1
    assert len(said) < rows // 4  # about one a second, never one per verdict
    assert all(a != b for a, b in zip(said, said[1:], strict=False))  # said only when it moved
    assert all(e.judged <= e.answered for e in said) and [e.judged for e in said] == sorted(e.judged for e in said)
    # the judge's load, as any model's: its verdicts counted, its latency profiled
    load = [e for e in of_type(events, ev.ModelLoad) if e.model == "grader"]
    assert load and load[-1].samples == rows and load[-1].max_workers == 8 and load[-1].profile is not None
    # a re-run with every verdict kept says so at once, asking the judge nothing
    (tmp_path / "out" / "results" / "m" / "qa.json").unlink()
    judge.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and judge.stats.requests_total == 0
    assert of_type(events, ev.PairJudged) == [ev.PairJudged("m", "qa", "grader", rows, rows, 0, True)]


# ---------------------------------------------------------------------------- headless


def test_headless_prints_the_judged_count_with_its_progress_lines(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _tested(sim_factory), _slow_judge(sim_factory)
    plan = _plan(tmp_path, tested.url, judge.url, judge={"max_workers": 1})
    plan.write_text(plan.read_text().replace("log_interval = 60.0", "log_interval = 0.3", 1))
    runner = Runner(load_plan(plan))
    out = io.StringIO()
    assert follow_headless(runner, runner.plan.run.log_interval, out=out) == 0
    printed = out.getvalue()
    under_way = [int(m.group(1)) for m in re.finditer(rf"progress: .*\| m/qa judged (\d+)/{N} by grader", printed)]
    assert under_way and any(0 < k < N for k in under_way), printed  # counted as it goes
    assert under_way == sorted(under_way)
    assert f"m/qa: judged {N}/{N} by grader\n" in printed


# ---------------------------------------------------------------------------- the TUI


def test_the_row_shows_judged_counts_the_strip_the_judge_and_the_details_its_reasoning(tmp_path: Path, sim_factory: Any) -> None:
    tested, judge = _tested(sim_factory), _slow_judge(sim_factory)
    runner = Runner(load_plan(_plan(tmp_path, tested.url, judge.url, judge={"max_workers": 1})))
    right = _right()

    async def scenario() -> None:
        from textual.widgets import DataTable, Static

        from evaltui.ui.app import EvalApp
        from evaltui.ui.screens.details import DetailsScreen
        from evaltui.ui.widgets.panes import EngineStrip
        from evaltui.ui.widgets.progress import ProgressTable

        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            table, strip = app.query_one(ProgressTable), app.query_one(EngineStrip)
            rows: list[str] = []  # the row while judged counts under way were on it
            loads: list[str] = []  # the strip while it showed the judge at work

            def watch() -> bool:
                line = table.shown_line("m", "qa") if ("m", "qa") in app.run_screen.state.pairs else ""
                found = re.search(rf"judged (\d+)/{N}", line)
                if found and 0 < int(found.group(1)) < N and "judging" in line:
                    rows.append(line)
                if "grader 1/1" in str(strip.render()):  # its one request in flight, against its max_workers
                    loads.append(str(strip.render()))
                return app.run_screen.state.finished is not None and not app.engine.busy

            await until(pilot, watch, "the run to end")
            assert rows, "the row never showed the judging under way"
            assert loads, "the strip never showed the judge's request in flight"
            await pilot.pause(0.3)
            assert app.run_screen.state.pairs[("m", "qa")].judged == N
            assert "scored" in table.shown_line("m", "qa") and "judged" not in table.shown_line("m", "qa")

            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen) and app.screen.query_one("#details-body").display, "the details")
            heading = str(app.screen.query_one("#details-reasoning-heading", Static).render())
            assert "The judge's reasoning (grader)" in heading

            def reasoning() -> str:
                return str(app.screen.query_one("#details-reasoning", Static).render())

            grade = "C" if right[0] else "I"
            assert reasoning().startswith(f"sample 0 · grade {grade}") and reasoning().rstrip().endswith(f"GRADE: {grade}")
            assert "The criterion is '100'" in reasoning()  # the judge's own words, not just its grade
            predictions = app.screen.query_one("#details-predictions", DataTable)
            predictions.focus()
            await pilot.press("down")
            await pilot.pause()
            grade = "C" if right[1] else "I"
            assert reasoning().startswith(f"sample 1 · grade {grade}") and "The criterion is '107'" in reasoning()

    asyncio.run(scenario())
