"""The real GSM8K, HumanEval and MMLU files from ../shared/datasets through the whole engine."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, SHARED_DATASETS, requires_shared
from planmaker import chat, lightllm, of_type, run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.sim import AnswerKey, ModelProfile, SimConfig, answers_correctly

pytestmark = requires_shared

GSM8K = SHARED_DATASETS / "gsm8k" / "test.jsonl"
MMLU_VAL = SHARED_DATASETS / "mmlu" / "data" / "val"


def test_sample_configs_for_real_servers_are_valid(monkeypatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "not-a-real-key")
    lightllm_plan = load_plan(REPO / "sample_configs" / "lightllm_humaneval.toml")
    assert lightllm_plan.models[0].url == "http://localhost:1030/generate"
    assert len(load_records(lightllm_plan, lightllm_plan.datasets[0])) == 164
    vllm_plan = load_plan(REPO / "sample_configs" / "vllm_gsm8k_mmlu.toml")
    assert [d.abbr for d in vllm_plan.datasets][:2] == ["gsm8k", "mmlu-abstract_algebra"]
    assert "not-a-real-key" not in json.dumps(vllm_plan.snapshot())


def test_gsm8k_with_a_model_that_knows_a_known_subset(tmp_path: Path, sim_factory) -> None:
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    assert len(rows) == 1319
    key = AnswerKey()
    known = [i for i in range(len(rows)) if i % 3 == 0]
    for i in known:  # the model answers these with the gold solution, and "I don't know." otherwise
        key.add_gen(f"Question: {rows[i]['question']}\nAnswer:", rows[i]["answer"])
    sim = sim_factory(SimConfig(answer_key=key))
    plan = write_plan(
        tmp_path,
        models=[chat("gsm-reader", sim.url, max_workers=32)],
        datasets=[{"abbr": "gsm8k", "path": str(GSM8K), "prompt": "Question: {question}\nAnswer:", "target": "{answer}", "evaluator": {"type": "gsm8k"}}],
    )
    code, events, _ = run_plan(plan)
    assert code == 0
    (scored,) = of_type(events, ev.DatasetScored)
    assert scored.score == round(100 * len(known) / 1319, 2) == 33.36


def test_mmlu_val_choice_scores_the_known_accuracy(tmp_path: Path, sim_factory) -> None:
    files = ["abstract_algebra_val.csv", "anatomy_val.csv", "high_school_physics_val.csv"]
    prompt = "{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:"
    datasets = [
        {"abbr": f.removesuffix("_val.csv"), "path": str(MMLU_VAL / f), "columns": ["question", "A", "B", "C", "D", "answer"],
         "prompt": prompt, "target": "{answer}", "evaluator": {"type": "choice"}}
        for f in files
    ]
    plan_path = write_plan(tmp_path, models=[lightllm("mmlu-sim", "http://127.0.0.1:1")], datasets=datasets)
    plan = load_plan(plan_path)
    key = AnswerKey()
    prompts: dict[str, list[str]] = {}
    for ds in plan.datasets:
        samples = [render_sample(ds, i, r) for i, r in enumerate(load_records(plan, ds))]
        prompts[ds.abbr] = [s.prompt for s in samples]
        for s in samples:
            key.add_gen(s.prompt, s.target)  # wrong answers are the next letter: always a different option
    sim = sim_factory(SimConfig(answer_key=key, models={"mmlu-sim": ModelProfile(accuracy=0.6)}))
    plan_path = write_plan(tmp_path, models=[lightllm("mmlu-sim", sim.url, max_workers=16)], datasets=datasets)
    code, events, _ = run_plan(plan_path)
    assert code == 0
    for e in of_type(events, ev.DatasetScored):
        ps = prompts[e.dataset]
        assert e.score == round(100 * sum(answers_correctly("mmlu-sim", p, 0.6) for p in ps) / len(ps), 2)
