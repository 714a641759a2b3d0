"""A model's url changed between runs (RELIABILITY.md §11, issue 23): a `sim://` url's options
are the model itself, so its pairs start over; a real server's url changed keeps the answers,
says so in one line as the run starts, and the results record which urls answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.stream import events as ev
from evaltui.sim import ModelProfile, SimConfig, answers_correctly

pytestmark = pytest.mark.reliability


def test_a_sim_url_with_other_options_starts_the_pair_over(tmp_path: Path) -> None:
    """`sim://?accuracy=0.9` then `0.8`: the second run kept `accuracy = 93.00` from the first."""
    rows = arithmetic(100)
    data = write_jsonl(tmp_path / "d.jsonl", rows)

    def run_at(accuracy: float) -> tuple[float | None, list[ev.Event]]:
        model = {"abbr": "m", "type": "lightllm", "url": f"sim://?accuracy={accuracy}", "max_workers": 8}
        code, events, _ = run_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", data)]))
        assert code == 0
        return next(e.score for e in of_type(events, ev.DatasetScored)), events

    high, _ = run_at(0.9)
    low, events = run_at(0.8)
    assert high is not None and low is not None and low < high
    notices = [n.message for n in of_type(events, ev.Notice)]
    assert any("starting it over" in n for n in notices), notices


def test_a_real_url_that_changed_keeps_the_answers_says_so_and_results_record_the_urls(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    old, new = (sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=1.0)})) for _ in range(2))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    datasets = [gsm_dataset("d", data)]
    from evaltui.plan import load_plan, select

    first = write_plan(tmp_path, models=[lightllm("m", old.url)], datasets=datasets)
    code, _, _ = run_plan(select(load_plan(first), None, None, list(range(20))))  # half of it, at the old url
    assert code == 0
    plan = write_plan(tmp_path, models=[lightllm("m", new.url)], datasets=datasets)
    code, events, runner = run_plan(plan)
    assert code == 0
    moved = [n for n in of_type(events, ev.Notice) if "its url is not the one that answered earlier runs" in n.message]
    assert len(moved) == 1 and f"{new.url}/m/generate" in moved[0].message and "answers are kept" in moved[0].message
    assert new.stats.requests_total == 20  # the 20 answered at the old url were kept
    result = json.loads(runner.workdir.result_file("m", "d").read_text())
    assert result["urls"] == [f"{old.url}/m/generate", f"{new.url}/m/generate"]
    assert result["accuracy"] == 100.0 == 100.0 * sum(answers_correctly("m", r["question"], 1.0) for r in rows) / len(rows)
