"""lm-eval's generate-until entries, request for request and verdict for verdict against the reference.

The fixtures (tests/fixtures/benchmarks/lm_eval/<entry>.json) hold what lm-evaluation-harness
0.4.13 itself rendered for the first 20 documents — the completions request (prompt, stop,
max_tokens, temperature) and the single-turn chat one — and what it scored on a set of replies.
Here evaltui runs the same entry, limit 20, against a loopback server that records each body
it is sent (the real client path), and scores the same replies with its evaluator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchkit import models_at, recorder, reference, shared
from planmaker import run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.plan import load_plan
from evaltui.scoring import score

GEN_ENTRIES = ["gsm8k", "gsm8k_cot"]


def _local_path(fixture: dict[str, Any]) -> Path:
    """The shared copy the reference read (its eval split's file)."""
    files = fixture["data"]["local"]
    return shared(files[fixture["data"]["eval_split"]])


def _task(fixture: dict[str, Any]) -> dict[str, Any]:
    (task,) = fixture["tasks"].values()
    return task  # type: ignore[no-any-return]


@pytest.mark.parametrize("entry", GEN_ENTRIES)
def test_the_requests_evaltui_sends_are_the_references(tmp_path: Path, entry: str) -> None:
    fixture = reference("lm_eval", entry)
    task = _task(fixture)
    items = task["items"]
    with recorder() as srv:
        dataset = {"abbr": entry, "benchmark": entry, "path": str(_local_path(fixture)), "limit": len(items)}
        plan = write_plan(tmp_path, models=models_at(srv, "openai-completions", "openai-chat"), datasets=[dataset])
        code, _, _ = run_plan(plan)
        assert code == 0
        completions, chats = srv.sent("/v1/completions"), srv.sent("/chat/completions")
    assert len(completions) == len(chats) == len(items) == 20
    for item, sent, chat in zip(items, completions, chats, strict=True):
        want = item["completions_payload"]
        assert sent["prompt"] == item["prompt"], f"doc {item['doc_id']}"
        assert (sent["stop"], sent["max_tokens"], sent["temperature"]) == (want["stop"], want["max_tokens"], want["temperature"])
        single = item["chat_single_turn"]
        assert chat["messages"] == single["messages"], f"doc {item['doc_id']}"
        assert (chat["stop"], chat["max_tokens"], chat["temperature"]) == (single["stop"], single["max_tokens"], single["temperature"])


@pytest.mark.parametrize("entry", GEN_ENTRIES)
def test_evaltui_scores_the_references_replies_as_the_reference_does(tmp_path: Path, entry: str) -> None:
    fixture = reference("lm_eval", entry)
    task = _task(fixture)
    plan_path = write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-chat", "url": "sim://", "model": "m"}],
                           datasets=[{"abbr": entry, "benchmark": entry, "path": str(_local_path(fixture)), "limit": 20}])
    plan = load_plan(plan_path)
    ds = plan.datasets[0]
    golds = [render_sample(ds, i, r).target for i, r in enumerate(load_records(plan, ds))]
    verdicts = task["verdicts"]
    predictions = [{"index": v["doc_id"], "prediction": v["reply"], "gold": golds[v["doc_id"]]} for v in verdicts]
    details = score(ds.evaluator, predictions)["details"]
    assert len(details) == len(verdicts) > 10
    for v, d in zip(verdicts, details, strict=True):
        names = list(v["filters"])
        for name, got in v["filters"].items():
            assert d["scores"][f"exact_match,{name}"] == got["metrics"]["exact_match"], (v["note"], name, v["reply"])
        assert d["extracted"] == v["filters"][names[0]]["extracted"], v["note"]
        assert golds[v["doc_id"]] == _target_text(task, v["doc_id"])


def _target_text(task: dict[str, Any], doc_id: int) -> str:
    item = next(i for i in task["items"] if i["doc_id"] == doc_id)
    return str(item["target"])


def test_a_lightllm_model_gets_the_entrys_settings_in_lightllms_words(tmp_path: Path) -> None:
    """stop → stop_sequences, temperature 0 → do_sample false (LightLLM refuses a temperature of 0)."""
    fixture = reference("lm_eval", "gsm8k_cot")
    items = _task(fixture)["items"]
    with recorder() as srv:
        dataset = {"abbr": "g", "benchmark": "gsm8k_cot", "path": str(_local_path(fixture)), "limit": 3}
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "lightllm"), datasets=[dataset]))
        assert code == 0
        sent = srv.sent("/generate")
    assert [b["inputs"] for b in sent] == [i["prompt"] for i in items[:3]]
    assert sent[0]["parameters"] == {"do_sample": False, "ignore_eos": False, "max_new_tokens": 256, "stop_sequences": ["Q:", "</s>", "<|im_end|>"]}
