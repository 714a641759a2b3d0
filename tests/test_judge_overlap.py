"""Judging overlaps inference (issue 27): each answer goes to the judge once it is checkpointed.

Proved without timing: one simulator serves the tested model (slowed by its latency) and the
judge, and its log is in the order replies were served, so for each grading request it tells
how many of the tested model's answers had been served before it. The judge grades by a rule
(sim/answers.py), so every score is known; the judgments file says each unit was judged once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from planmaker import chat, key_for, run_plan, write_jsonl, write_plan

from evaltui.engine.judge import feed
from evaltui.engine.stream import events as ev
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig, answers_correctly

ROWS = [{"question": f"Item {i}: which code does it carry?", "answer": str(100 + 7 * i)} for i in range(24)]
SLOW = 0.05  # s a tested answer takes: the judge, answering at once, is asked while the model still answers


def _qa(tmp: Path, rows: list[dict[str, Any]], evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"abbr": "qa", "path": str(write_jsonl(tmp / "qa.jsonl", rows)), "prompt": "{question}", "target": "{answer}", "evaluator": evaluator}


def _served_before(log: Any, tested: str, judge: str = "grader") -> list[int]:
    """For each request the judge answered, how many answers of `tested` had been served before it."""
    served, counts = 0, []
    for record in log:
        if record.model == tested:
            served += 1
        elif record.model == judge:
            counts.append(served)
    return counts


def _verdicts(root: Path, model: str = "m", dataset: str = "qa") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "judgments" / model / f"{dataset}.jsonl").read_text().splitlines() if line.strip()]


def test_answers_are_judged_while_the_model_still_answers_and_each_once(tmp_path: Path, sim_factory: Any) -> None:
    rows = [dict(r) for r in ROWS]
    rows[5]["question"] += " (details)" * 120  # the judge refuses this one's grading prompt (400)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5, latency=SLOW)}, faults=Faults(max_prompt_chars=1700)))
    models = [chat("m", sim.url, max_workers=2), {**chat("grader", sim.url), "role": "judge"}]
    plan = write_plan(tmp_path, models=models, datasets=[_qa(tmp_path, rows, {"type": "model_graded_fact", "judge": "grader"})])
    code, _, runner = run_plan(plan)
    assert code == 0  # the judge's refusal fails one sample, not the pair
    served = _served_before(sim.stats.log, "m")
    assert len(served) == len(rows)  # one grading request per answer: the refused one not asked again at the end
    assert min(served) < len(rows) // 2  # grading began while most answers were still to come…
    assert sum(n < len(rows) for n in served) >= len(rows) // 2  # …and most were graded before the last one
    result = json.loads(runner.workdir.result_file("m", "qa").read_text())
    right = [answers_correctly("m", r["question"], 0.5) for r in rows]
    right[5] = False
    assert result["details"][5]["error"] == "judge" and "400" in result["details"][5]["why"]
    assert [d["correct"] for d in result["details"]] == right
    assert result["accuracy"] == round(100 * sum(right) / len(rows), 2)
    verdicts = _verdicts(runner.workdir.root)
    assert sorted(v["index"] for v in verdicts) == list(range(len(rows)))  # each unit judged once


@pytest.mark.reliability
def test_a_slow_judge_never_holds_back_the_model_it_grades(tmp_path: Path, sim_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The feed is bounded and never waits: with room for 2 answers and a judge far slower than the
    model, the model answers on; what the queue had no room for is judged at the end, once each.
    (A feed that waited would let m's 2 workers put at most ~4 answers ahead of the judge, one at
    a time: m's 16th answer only after 10 or more verdicts.)"""
    monkeypatch.setattr(feed, "FEED_SIZE", 2)
    rows = ROWS[:16]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.5), "grader": ModelProfile(latency=0.15)}))
    models = [chat("m", sim.url, max_workers=2), {**chat("grader", sim.url, max_workers=1), "role": "judge"}]
    plan = write_plan(tmp_path, models=models, datasets=[_qa(tmp_path, rows, {"type": "model_graded_fact", "judge": "grader"})])
    code, events, runner = run_plan(plan)
    assert code == 0
    log = list(sim.stats.log)
    last_answer = max(n for n, r in enumerate(log) if r.model == "m")
    assert sum(r.model == "grader" for r in log[:last_answer]) <= 5  # a feed that waited would have held m for 10 verdicts or more
    at_the_end = [e.message for e in events if isinstance(e, ev.Notice) and "answers sent to the judge" in e.message]
    assert len(at_the_end) == 1 and 0 < int(at_the_end[0].split(": ")[1].split()[0]) < len(rows)  # some as they came, the rest at the end
    assert sum(r.model == "grader" for r in log) == len(rows)
    assert sorted(v["index"] for v in _verdicts(runner.workdir.root)) == list(range(len(rows)))
    right = [answers_correctly("m", r["question"], 0.5) for r in rows]
    assert json.loads(runner.workdir.result_file("m", "qa").read_text())["accuracy"] == round(100 * sum(right) / len(rows), 2)


@pytest.mark.parametrize("baseline", ["model-answered-first", "model-answered-after", "file"])
def test_pairwise_waits_for_the_baselines_answer_and_never_deadlocks(tmp_path: Path, sim_factory: Any, baseline: str) -> None:
    """A unit is judged against the baseline's answer to the same sample: with the baseline's
    answers in (a model answered first, or a file), as it is answered; with them not yet in
    (models run one at a time, the baseline after), at the end — never blocking inference, every
    pair judged once in both orders."""
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=0.5, latency=SLOW), "b": ModelProfile(accuracy=1.0)}))
    tested = [chat("m", sim.url, max_workers=2)] + ([] if baseline == "file" else [chat("b", sim.url)])
    models = [*(tested[::-1] if baseline == "model-answered-first" else tested), {**chat("grader", sim.url), "role": "judge"}]
    against = {"baseline_file": str(write_jsonl(tmp_path / "base.jsonl", [{"index": i, "answer": r["answer"]} for i, r in enumerate(ROWS)]))}
    ds = _qa(tmp_path, ROWS, {"type": "pairwise", "judge": "grader", **(against if baseline == "file" else {"baseline": "b"})})
    code, _, runner = run_plan(write_plan(tmp_path, models=models, datasets=[ds]))
    assert code == 0
    served = _served_before(sim.stats.log, "m")
    assert len(served) == 2 * len(ROWS)
    if baseline == "model-answered-after":
        assert min(served) == len(ROWS)  # every unit waited for the baseline's answers
    else:
        assert min(served) < len(ROWS) // 2  # judged while m still answered
    wrong = [not answers_correctly("m", r["question"], 0.5) for r in ROWS]
    values = [1.0 if w else 0.5 for w in wrong]  # tests/test_pairwise.py: the larger number wins, equal ones go to A
    result = json.loads(runner.workdir.result_file("m", "qa").read_text())
    assert [d["scores"]["win_rate"] for d in result["details"]] == values
    assert result["win_rate"] == round(100 * sum(values) / len(ROWS), 2)
    verdicts = _verdicts(runner.workdir.root)
    assert sorted((v["index"], v["turn"]) for v in verdicts) == [(i, t) for i in range(len(ROWS)) for t in (0, 1)]


def test_a_conversation_is_judged_after_its_last_turn(tmp_path: Path, sim_factory: Any) -> None:
    """mt_bench: both turns of a (sample, epoch) are judged once its last request is answered —
    its checkpoint line, whose turns are read as the predictions keep that epoch's."""
    rows = [{"question_id": 100 + i, "category": "writing", "turns": [f"Item {i}: which code?", f"Item {i}: and twice that?"]} for i in range(8)]
    key = AnswerKey()
    for i, r in enumerate(rows):
        for question, answer in zip(r["turns"], (str(100 + 7 * i), str(2 * (100 + 7 * i))), strict=True):
            key.add_gen(question, answer)
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.5, latency=SLOW)}))
    ds = {"abbr": "mtb", "path": str(write_jsonl(tmp_path / "q.jsonl", rows)), "turns": "turns", "target": "", "epochs": 2,
          "evaluator": {"type": "mt_bench", "judge": "grader"}}
    models = [chat("m", sim.url, max_workers=2), {**chat("grader", sim.url), "role": "judge"}]
    code, events, runner = run_plan(write_plan(tmp_path, models=models, datasets=[ds]))
    assert code == 0
    log = list(sim.stats.log)
    last_turn = {i: max(n for n, r in enumerate(log) if r.model == "m" and r.prompt == f"Item {i}: and twice that?") for i in range(len(rows))}
    answered = {i: min(n for n, r in enumerate(log) if r.model == "m" and r.prompt == f"Item {i}: and twice that?") for i in range(len(rows))}
    graded = [(n, i) for n, r in enumerate(log) if r.model == "grader" for i in range(len(rows)) if f"Item {i}: which code?" in r.prompt]
    assert len(graded) == 2 * 2 * len(rows)  # both turns of each conversation, each epoch, once
    assert sorted((v["index"], v["epoch"], v["turn"]) for v in _verdicts(runner.workdir.root, "m", "mtb")) == [
        (i, e, t) for i in range(len(rows)) for e in (0, 1) for t in (0, 1)]
    assert all(n > answered[i] for n, i in graded)  # none before a conversation's last request was answered
    assert min(n for n, _ in graded) < max(last_turn.values())  # judged while other conversations still went on
    assert not [e for e in events if isinstance(e, ev.Notice) and "sent to the judge" in e.message]  # every epoch's, as it came
    result = json.loads(runner.workdir.result_file("m", "mtb").read_text())
    def rating(question: str, right: str) -> int:  # sim/answers.py: 1 + the judged answer's last number modulo 10
        return 1 + int(right if answers_correctly("m", question, 0.5) else str(int(right) + 1)) % 10
    expected = [[rating(r["turns"][0], str(100 + 7 * i)), rating(r["turns"][1], str(2 * (100 + 7 * i)))] for i, r in enumerate(rows)]
    assert [[e["ratings"] for e in d["epochs"]] for d in result["details"]] == [[r, r] for r in expected]  # the simulator answers each epoch alike
    assert result["score"] == round(sum(map(sum, expected)) / (2 * len(rows)), 2)


@pytest.mark.reliability
def test_a_kill_while_judging_overlaps_inference_resumes_exactly(tmp_path: Path, sim_factory: Any) -> None:
    """Killed with verdicts on disk and the tested model still answering: the re-run answers only
    what was not answered and asks the judge only what was not judged, and the score is exact."""
    tested = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=0.5, latency=0.2)}))
    judge = sim_factory(SimConfig(default=ModelProfile(latency=0.05)))
    models = [chat("m", tested.url, max_workers=2), {**chat("grader", judge.url), "role": "judge"}]
    plan = write_plan(tmp_path, models=models, datasets=[_qa(tmp_path, ROWS, {"type": "model_graded_fact", "judge": "grader"})])
    root = tmp_path / "out"
    verdicts, predictions = root / "judgments" / "m" / "qa.jsonl", root / "predictions" / "m" / "qa.json"
    child = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not verdicts.exists() or verdicts.read_text().count("\n") < 4):
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert not predictions.exists()  # inference had not ended: the verdicts were given while it ran
    kept = [v for v in (json.loads(line) for line in verdicts.read_text().splitlines() if line.strip()) if "grade" in v]
    assert 4 <= len(kept) < len(ROWS)
    answered = sum(1 for line in (root / "predictions" / "m" / "tmp_qa.jsonl").read_text().splitlines() if '"prediction"' in line)
    tested.reset_stats()
    judge.reset_stats()
    code, _, runner = run_plan(plan)
    assert code == 0
    assert tested.stats.requests_total == len(ROWS) - answered  # only what was not answered
    assert judge.stats.requests_total == len(ROWS) - len(kept)  # only what was not judged
    graded = [v["index"] for v in _verdicts(root) if "grade" in v]
    assert sorted(graded) == list(range(len(ROWS)))  # each unit judged once over both runs
    right = [answers_correctly("m", r["question"], 0.5) for r in ROWS]
    assert json.loads(runner.workdir.result_file("m", "qa").read_text())["accuracy"] == round(100 * sum(right) / len(ROWS), 2)
