"""`evaltui watch` of a judged run: the judged counts read from its verdicts files (judgments/),
said as the live run says them (PairJudged), under way and at the end.

The runs are real: the tested model and the judge are the project's simulator over 127.0.0.1,
with test_judges.py's plan and rows (the judge grading by a rule); the live one runs in another
process (`evaltui PLAN --no-ui`), as cron would start it, a slow judge keeping its judging under
way long enough to be followed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from planmaker import of_type, run_plan
from test_judges import ROWS, _plan, _tested
from watchkit import follow_to_end, start_writer, tree, wait_for

from evaltui.cli import main
from evaltui.engine.follow.judged import VerdictCount
from evaltui.engine.stream import events as ev
from evaltui.sim import ModelProfile, SimConfig

N = len(ROWS)


def test_a_finished_judged_run_is_watched_with_its_judged_counts(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    tested, judge = _tested(sim_factory), sim_factory(SimConfig())
    code, _, runner = run_plan(_plan(tmp_path, tested.url, judge.url))
    assert code == 0 and judge.stats.requests_total == N
    root = runner.workdir.root
    before = tree(root)

    code, events, follower = follow_to_end(root)
    assert code == 0
    assert of_type(events, ev.PairJudged) == [ev.PairJudged("m", "qa", "grader", N, N, 0, True)]  # once: it did not move
    p = follower.state.pairs[("m", "qa")]
    assert (p.judge, p.judged, p.to_judge, p.judge_failed, p.judging) == ("grader", N, N, 0, False)
    assert p.judged_text() == f"judged {N}/{N}"

    assert main(["watch", str(root), "--no-ui"]) == 0
    assert f"m/qa: judged {N}/{N} by grader\n" in capsys.readouterr().out  # the line a headless run prints
    assert tree(root) == before  # watching wrote nothing


def test_a_judged_run_in_another_process_is_followed_judging(tmp_path: Path, sim_factory: Any) -> None:
    tested = _tested(sim_factory)
    judge = sim_factory(SimConfig(models={"grader": ModelProfile(latency=0.25)}))  # one verdict at a time, ~3 s in all
    plan = _plan(tmp_path, tested.url, judge.url, judge={"max_workers": 1})
    root = tmp_path / "out"
    root.mkdir()
    writer = start_writer(plan, tmp_path / "writer.log")
    try:
        code, events, follower = follow_to_end(root)
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0, (tmp_path / "writer.log").read_text()
    assert code == 0 and judge.stats.requests_total == N
    said = of_type(events, ev.PairJudged)
    assert said[-1] == ev.PairJudged("m", "qa", "grader", N, N, 0, True)
    assert [e.ended for e in said].count(True) == 1
    under_way = [e.judged for e in said if not e.ended]
    assert any(0 < k < N for k in under_way), said  # counted as the verdicts came, not only at the end
    assert under_way == sorted(under_way) and all(e.judged <= e.answered <= N for e in said)
    assert all(a != b for a, b in zip(said, said[1:], strict=False))  # said only when it moved
    p = follower.state.pairs[("m", "qa")]
    assert (p.judged, p.to_judge, p.judging) == (N, N, False)


def test_the_verdicts_count_is_the_newest_judgings_latest_verdict_per_unit(tmp_path: Path) -> None:
    """What the watcher makes of a verdicts file as it grows: lines of an earlier judging (another
    fingerprint) no longer count, a later failure does not undo a grade of the same answer, a
    re-answered unit counts by its newest verdict, a torn line is skipped, a file set aside is
    counted again from its start."""
    path = tmp_path / "judgments" / "m" / "qa.jsonl"
    path.parent.mkdir(parents=True)

    def line(index: int, fingerprint: str, answer: str, grade: bool, turn: int = 0) -> str:
        verdict = {"grade": "C", "value": 1.0} if grade else {"error": "no grade in the judge's reply"}
        return json.dumps({"index": index, "epoch": 0, "turn": turn, "fingerprint": fingerprint, "answer": answer, **verdict}) + "\n"

    count = VerdictCount(path)
    assert count.counts() == (0, 0)  # no file yet
    path.write_text(line(0, "old", "a", True) + line(1, "old", "a", True))
    assert count.counts() == (2, 0)
    with path.open("a") as f:
        f.write(line(0, "new", "a", True) + line(1, "new", "a", False) + line(0, "new", "a", False) + line(2, "new", "a", True, turn=1))
    assert count.counts() == (2, 1)  # the new judging's: 0 stays graded, 1 failed, 2's turn graded
    with path.open("a") as f:
        f.write(line(1, "new", "a", True) + line(2, "new", "b", False, turn=1) + '{"index": 3, "epo')
    assert count.counts() == (2, 1)  # 1 graded now; 2 re-answered and failed; the torn line waits
    with path.open("a") as f:
        f.write('ch": 0}\n')  # its end: a line without a fingerprint, not a verdict
    assert count.counts() == (2, 1)
    path.rename(tmp_path / "aside.jsonl")
    path.write_text(line(5, "new", "a", True))
    assert count.counts() == (1, 0)


def _slow_judged_plan(tmp_path: Path, sim_factory: Any, **run: Any) -> Path:
    tested = _tested(sim_factory)
    judge = sim_factory(SimConfig(models={"grader": ModelProfile(latency=0.25)}))  # one verdict at a time, ~3 s in all
    plan = _plan(tmp_path, tested.url, judge.url, judge={"max_workers": 1})
    for key, value in run.items():
        plan.write_text(plan.read_text().replace(f"{key} = 60.0", f"{key} = {value}", 1))
    return plan


def test_watch_no_ui_prints_the_judged_count_in_its_progress_lines(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """While the judge works after the answers are in (the pair done, not yet scored), the
    watcher's progress line says how far, as a headless run's does."""
    plan = _slow_judged_plan(tmp_path, sim_factory, log_interval=0.3)
    assert "log_interval = 0.3" in plan.read_text()
    root = tmp_path / "out"
    root.mkdir()
    writer = start_writer(plan, tmp_path / "writer.log")
    try:
        wait_for(lambda: (root / "plan.toml").exists())  # (the watcher's interval between lines is the plan's)
        assert main(["watch", str(root), "--no-ui"]) == 0
    finally:
        writer.wait(timeout=60)
    printed = capsys.readouterr().out
    under_way = [int(m.group(1)) for m in re.finditer(rf"progress: .*\| m/qa(?: \d+/{N})? \(?judged (\d+)/{N} by grader", printed)]
    assert any(0 < k < N for k in under_way), printed
    assert under_way == sorted(under_way)
    assert f"m/qa: judged {N}/{N} by grader\n" in printed


def test_a_run_killed_while_judging_is_watched_with_what_its_judge_gave(tmp_path: Path, sim_factory: Any) -> None:
    plan = _slow_judged_plan(tmp_path, sim_factory)
    root = tmp_path / "out"
    writer = start_writer(plan, tmp_path / "writer.log")
    verdicts = root / "judgments" / "m" / "qa.jsonl"
    try:
        wait_for(lambda: verdicts.exists() and verdicts.read_bytes().count(b"\n") >= 2)
    finally:
        writer.kill()
        writer.wait(timeout=60)
    given = sum(1 for line in verdicts.read_bytes().splitlines() if b'"grade"' in line)
    assert 2 <= given < N
    code, events, follower = follow_to_end(root)
    assert code == 1
    said = of_type(events, ev.PairJudged)
    assert said[-1] == ev.PairJudged("m", "qa", "grader", given, N, 0, True)  # its judging over with the run
    assert not follower.state.pairs[("m", "qa")].judging
