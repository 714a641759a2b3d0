"""lm-eval's multiple-choice entries (log-likelihood): the (context, continuation) requests and the
metrics, against what lm-evaluation-harness 0.4.13 itself rendered and scored.

evaltui runs each entry, limit 20, against a loopback server that records what it is sent: over
`openai-completions` a request per choice, `context + continuation` with echo and logprobs as
lm-eval's local-completions sends it; over `lightllm` the context alone, then each choice. The
metrics (acc, acc_norm, TruthfulQA's mc2) are evaltui's evaluator on the reference's own made-up
log-prob vectors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchkit import Task, dataset_table, models_at, recorder, reference, tasks_of
from planmaker import run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.plan import load_plan
from evaltui.scoring import score

LL_ENTRIES = ["mmlu", "arc_challenge", "hellaswag", "truthfulqa_mc1", "truthfulqa_mc2", "gpqa_diamond"]
# lm-eval's local-completions body for one (context, continuation), but for the seed it adds (1234)
LL_BODY = {"temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": True}


def _tables(entry: str) -> list[tuple[Task, dict[str, Any]]]:
    fixture = reference("lm_eval", entry)
    return [(task, dataset_table(fixture, task)) for task in tasks_of(fixture)]


@pytest.mark.parametrize("entry", LL_ENTRIES)
def test_the_loglikelihood_requests_are_the_references(tmp_path: Path, entry: str) -> None:
    tables = _tables(entry)
    with recorder() as srv:
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "openai-completions", "lightllm"), datasets=[t for _, t in tables]))
        assert code == 0
        completions, lightllm = srv.sent("/v1/completions"), srv.sent("/generate")
    pairs = [(task.name, item, c) for task, _ in tables for item in task.items for c in item["continuations"]]
    assert len(completions) == len(pairs) >= 4 * len(tables)
    for (name, item, continuation), sent in zip(pairs, completions, strict=True):
        assert sent["prompt"] == item["context"] + continuation, f"{name} doc {item['doc_id']}"
        assert {k: sent[k] for k in LL_BODY} == LL_BODY
    # LightLLM: the context alone (its token count), then context + each continuation
    expected: list[str] = []
    for task, _ in tables:
        for item in task.items:
            expected += [item["context"].rstrip()] + [item["context"] + c for c in item["continuations"]]
    assert [b["inputs"] for b in lightllm] == expected
    assert {b["parameters"]["max_new_tokens"] for b in lightllm} == {1}


@pytest.mark.parametrize("entry", LL_ENTRIES)
def test_evaltui_computes_the_references_metrics_from_the_same_logprobs(tmp_path: Path, entry: str) -> None:
    checked = 0
    for task, table in _tables(entry):
        plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-completions", "url": "sim://"}], datasets=[table]))
        ds = plan.datasets[0]
        samples = [render_sample(ds, i, r) for i, r in enumerate(load_records(plan, ds))]
        for item, s in zip(task.items, samples, strict=True):
            assert list(s.choices) == item["continuations"]
        entries = [{"index": v["doc_id"], "prediction": "", "gold": samples[v["doc_id"]].target, "ll": v["logprobs"],
                    "choices": list(samples[v["doc_id"]].choices)} for v in task.verdicts]
        details = score(ds.evaluator, entries)["details"]
        for v, d in zip(task.verdicts, details, strict=True):
            want = v["filters"]["none"]["metrics"]
            # (mc2 is a sum of exps: equal to the last bits but for numpy's exp and libm's)
            assert {k: d["scores"][k] for k in want if k in d["scores"]} == pytest.approx({k: want[k] for k in want if k in d["scores"]}, rel=1e-12), (
                task.name, v["note"])
            assert set(d["scores"]) <= set(want), (task.name, v["note"])
            checked += 1
    assert checked >= 4


def test_gpqa_shuffles_the_answers_as_a_fresh_lm_eval_run_does(tmp_path: Path) -> None:
    """lm-eval's process_docs shuffles with Python's random as simple_evaluate seeds it: evaltui's
    records hold each question's answers in the order lm-eval's own (fresh) run used, every time."""
    fixture = reference("lm_eval", "gpqa_diamond")
    (task,) = tasks_of(fixture)
    plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-completions", "url": "sim://"}],
                                datasets=[dataset_table(fixture, task)]))
    ds = plan.datasets[0]
    fields = ("Question", "choice1", "choice2", "choice3", "choice4", "answer")
    records = load_records(plan, ds)
    assert [{k: r[k] for k in fields} for r in records] == [{k: i["doc"][k] for k in fields} for i in task.items]
    assert [[r[f"choice{k}"] for k in range(1, 5)] for r in records] == fixture["choice_shuffle"]["replay"]["orders"]
    assert load_records(plan, ds) == records
    for item, s in zip(task.items, (render_sample(ds, i, r) for i, r in enumerate(records)), strict=True):
        assert (s.prompt, list(s.choices), s.target) == (item["context"], item["continuations"], item["target"])
