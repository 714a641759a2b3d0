"""OpenCompass 0.5.4's entries against OpenCompass's own rendering and scoring (its fixtures):
what its LightllmAPI sends (the LightLLM guide's model: `{"inputs", "parameters"}` with the
model's generation_kwargs, no stops), and its post-processors' and evaluators' verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchkit import models_at, recorder, reference, shared
from planmaker import run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.plan import load_plan
from evaltui.scoring import score

MMLU_PREFIX = "lukaemon_mmlu_"


def _tables(entry: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the fixture's dataset, the plan's table that asks evaltui for the same) for each of its datasets."""
    fixture = reference("opencompass", entry)
    out = []
    for abbr, data in fixture["datasets"].items():
        table: dict[str, Any] = {"abbr": abbr[:60], "benchmark": entry, "limit": len(data["items"])}
        if entry == "mmlu_gen":
            table.update(path=str(shared("mmlu")), split="validation", subsets=[abbr.removeprefix(MMLU_PREFIX)])
        elif entry == "gsm8k_gen":
            table["path"] = str(shared("gsm8k"))
        else:
            table["path"] = str(shared("humaneval", "HumanEval.jsonl.gz"))
        out.append((data, table))
    return out


@pytest.mark.parametrize("entry", ["gsm8k_gen", "mmlu_gen", "humaneval_gen"])
def test_a_lightllm_model_is_sent_what_opencompass_sends(tmp_path: Path, entry: str) -> None:
    tables = _tables(entry)
    with recorder() as srv:
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "lightllm"), datasets=[t for _, t in tables]))
        assert code == 0
        sent = srv.sent("/generate")
    items = [item for data, _ in tables for item in data["items"]]
    assert len(sent) == len(items) > 0
    for item, body in zip(items, sent, strict=True):
        assert body == {"inputs": item["origin_prompt"], **item["lightllm_payload"]}, item["index"]


@pytest.mark.parametrize("entry", ["gsm8k_gen", "mmlu_gen", "humaneval_gen"])
def test_a_chat_model_is_sent_what_opencompass_openai_model_sends(tmp_path: Path, entry: str) -> None:
    """OpenCompass's OpenAI model: each HUMAN round a user message, each BOT round an assistant
    one (gsm8k_gen's four examples; fewshot_as_multiturn), its max_tokens and temperature (0.7,
    its default) as the dataset sets them, no stop sequences."""
    tables = _tables(entry)
    first = tables[0][0]["items"][0]["openai_payload"]
    settings = {"fewshot_as_multiturn": True, "max_tokens": first["max_tokens"], "temperature": first["temperature"]}
    with recorder() as srv:
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "openai-chat"), datasets=[{**t, **settings} for _, t in tables]))
        assert code == 0
        sent = srv.sent("/chat/completions")
    items = [item for data, _ in tables for item in data["items"]]
    assert len(sent) == len(items) > 0
    for item, body in zip(items, sent, strict=True):
        want = item["openai_payload"]
        assert body["messages"] == want["messages"], item["index"]
        assert (body["max_tokens"], body["temperature"], body.get("stop")) == (want["max_tokens"], want["temperature"], want["stop"]), item["index"]
    assert len(sent[0]["messages"]) == (9 if entry == "gsm8k_gen" else 1)


@pytest.mark.parametrize("entry", ["gsm8k_gen", "mmlu_gen"])
def test_opencompass_verdicts_are_evaltuis(tmp_path: Path, entry: str) -> None:
    checked = 0
    for data, table in _tables(entry):
        plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "sim://"}], datasets=[table]))
        ds = plan.datasets[0]
        golds = [render_sample(ds, i, r).target for i, r in enumerate(load_records(plan, ds))]
        entries = [{"index": int(v["index"]), "prediction": v["reply"], "gold": golds[int(v["index"])]} for v in data["verdicts"]]
        for v, d in zip(data["verdicts"], score(ds.evaluator, entries)["details"], strict=True):
            assert (d["extracted"], d["correct"]) == (v["extracted"], v["correct"]), v["note"]
            checked += 1
    assert checked >= 8


def test_mmlu_gen_is_the_unweighted_mean_of_its_subjects(tmp_path: Path) -> None:
    """OpenCompass's summary averages the subjects' accuracies (lm-eval weights them by size)."""
    fixture = reference("opencompass", "mmlu_gen")
    assert "plain (unweighted) mean of the 57 subject scores" in fixture["aggregate"]["rule"]
    subjects = ["anatomy", "astronomy", "virology"]
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=0.5&latency=0"}],
                      datasets=[{"abbr": "mmlu", "benchmark": "mmlu_gen", "path": str(shared("mmlu")), "split": "validation", "subsets": subjects}])
    code, _, runner = run_plan(plan)
    assert code == 0
    result = json.loads(runner.workdir.result_file("m", "mmlu").read_text())
    parts = result["parts"]
    assert [parts[s]["samples"] for s in subjects] == [14, 16, 18]
    assert result["accuracy"] == round(sum(parts[s]["accuracy"] for s in subjects) / 3, 2)
    weighted = sum(parts[s]["accuracy"] * parts[s]["samples"] for s in subjects) / 48
    assert abs(result["accuracy"] - weighted) > 0.01 or len({parts[s]["accuracy"] for s in subjects}) == 1
