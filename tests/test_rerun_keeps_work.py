"""Re-runs keep what is still valid and set aside (never delete) what is not."""

from __future__ import annotations

from pathlib import Path

from planmaker import arithmetic, gsm_dataset, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine import events as ev
from evaltui.sim import AnswerKey, SimConfig


def setup(tmp_path: Path, sim_factory, n: int = 20):  # type: ignore[no-untyped-def]
    rows = arithmetic(n)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key))
    return rows, sim, write_jsonl(tmp_path / "data" / "d.jsonl", rows)


def test_a_fixed_judge_scores_earlier_results_again_without_inferring(tmp_path: Path, sim_factory, monkeypatch) -> None:
    from evaltui.engine.versions import JUDGE_REVISIONS

    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    monkeypatch.setitem(JUDGE_REVISIONS, "gsm8k", JUDGE_REVISIONS["gsm8k"] + 1)
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert [e.score for e in of_type(events, ev.DatasetScored)] == [100.0]
