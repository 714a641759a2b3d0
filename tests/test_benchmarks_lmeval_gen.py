"""lm-eval's generate-until entries, request for request and verdict for verdict against the reference.

The fixtures (tests/fixtures/benchmarks/lm_eval/<entry>.json) hold what lm-evaluation-harness
0.4.13 itself rendered for the first 20 documents of each of its tasks (each part of a grouped
entry) — the completions request (prompt, stop, max_tokens, temperature) and the single-turn chat
one — and what it scored on a set of replies. Here evaltui runs the same entry, limit 20, against
a loopback server that records each body it is sent (the real client path), and scores the same
replies with its evaluator.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchkit import Task, dataset_table, models_at, recorder, reference, tasks_of
from planmaker import run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.plan import load_plan
from evaltui.scoring import score

GEN_ENTRIES = ["gsm8k", "gsm8k_cot", "mmlu_generative", "mmlu_generative_5shot", "bbh_cot_fewshot"]  # (fixture files)
CODE_ENTRIES = ["humaneval", "mbpp"]  # (verdicts: tests/test_benchmarks_code.py)
OTHER_ENTRIES = ["minerva_math500", "ifeval"]  # (verdicts below)


def _tables(entry: str) -> list[tuple[Task, dict]]:
    fixture = reference("lm_eval", entry)
    return [(task, dataset_table(fixture, task)) for task in tasks_of(fixture)]


@pytest.mark.parametrize("entry", GEN_ENTRIES + CODE_ENTRIES + OTHER_ENTRIES)
def test_the_requests_evaltui_sends_are_the_references(tmp_path: Path, entry: str) -> None:
    tables = _tables(entry)
    with recorder() as srv:
        plan = write_plan(tmp_path, models=models_at(srv, "openai-completions", "openai-chat"), datasets=[t for _, t in tables])
        code, _, _ = run_plan(plan)
        assert code == 0
        completions, chats = srv.sent("/v1/completions"), srv.sent("/chat/completions")
    items = [(task.name, item) for task, _ in tables for item in task.items]
    assert len(completions) == len(chats) == len(items) >= 20
    for (name, item), sent, chat in zip(items, completions, chats, strict=True):
        where = f"{name} doc {item['doc_id']}"
        want = item["completions_payload"]
        assert sent["prompt"] == item["prompt"], where
        assert (sent["stop"], sent["max_tokens"], sent["temperature"]) == (want["stop"], want["max_tokens"], want["temperature"]), where
        single = item.get("chat_single_turn") or item["chat"]  # (an entry without examples: one and the same)
        assert chat["messages"] == single["messages"], where
        assert (chat["stop"], chat["max_tokens"], chat["temperature"]) == (single["stop"], single["max_tokens"], single["temperature"]), where


@pytest.mark.parametrize("entry", [*GEN_ENTRIES, "minerva_math500", "mbpp"])
def test_fewshot_as_multiturn_sends_the_references_turns_to_a_chat_model(tmp_path: Path, entry: str) -> None:
    """lm-eval's flag (its default with --apply_chat_template): the description a system message,
    each example a user and an assistant turn, then the question — the fixture's `chat` bodies."""
    tables = _tables(entry)
    with recorder() as srv:
        datasets = [{**t, "fewshot_as_multiturn": True} for _, t in tables]
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "openai-chat"), datasets=datasets))
        assert code == 0
        chats = srv.sent("/chat/completions")
    items = [(task.name, item) for task, _ in tables for item in task.items]
    assert len(chats) == len(items) >= 20
    turns = 0
    for (name, item), chat in zip(items, chats, strict=True):
        want = item["chat"]
        assert chat["messages"] == want["messages"], f"{name} doc {item['doc_id']}"
        assert (chat["stop"], chat["max_tokens"], chat["temperature"]) == (want["stop"], want["max_tokens"], want["temperature"])
        turns += sum(m["role"] == "assistant" for m in chat["messages"])
    assert turns >= 3 * len(items) or entry == "mmlu_generative"  # (lm-eval's mmlu_generative is 0-shot: one user message)


@pytest.mark.parametrize("entry", GEN_ENTRIES)
def test_evaltui_scores_the_references_replies_as_the_reference_does(tmp_path: Path, entry: str) -> None:
    checked = 0
    for task, table in _tables(entry):
        plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-chat", "url": "sim://", "model": "m"}], datasets=[table]))
        ds = plan.datasets[0]
        golds = [render_sample(ds, i, r).target for i, r in enumerate(load_records(plan, ds))]
        assert golds == [str(i["target"]) if not isinstance(i["target"], int) else golds[n] for n, i in enumerate(task.items)]
        predictions = [{"index": v["doc_id"], "prediction": v["reply"], "gold": golds[v["doc_id"]]} for v in task.verdicts]
        details = score(ds.evaluator, predictions)["details"]
        for v, d in zip(task.verdicts, details, strict=True):
            names = list(v["filters"])
            for name, got in v["filters"].items():
                assert d["scores"][f"exact_match,{name}"] == got["metrics"]["exact_match"], (task.name, v["note"], name, v["reply"])
            assert d["extracted"] == v["filters"][names[0]]["extracted"], (task.name, v["note"])
            checked += 1
    assert checked > 10


def test_a_lightllm_model_gets_the_entrys_settings_in_lightllms_words(tmp_path: Path) -> None:
    """stop → stop_sequences, temperature 0 → do_sample false (LightLLM refuses a temperature of 0)."""
    ((task, table),) = _tables("gsm8k_cot")
    with recorder() as srv:
        code, _, _ = run_plan(write_plan(tmp_path, models=models_at(srv, "lightllm"), datasets=[{**table, "limit": 3}]))
        assert code == 0
        sent = srv.sent("/generate")
    assert [b["inputs"] for b in sent] == [i["prompt"] for i in task.items[:3]]
    assert sent[0]["parameters"] == {"do_sample": False, "ignore_eos": False, "max_new_tokens": 256, "stop_sequences": ["Q:", "</s>", "<|im_end|>"]}


def test_minerva_math500s_math_verify_verdicts_are_evaltuis(tmp_path: Path) -> None:
    """lm-eval's math_verify metric: math-verify on the whole reply against the whole solution. (Its
    exact_match — Minerva's normalisation and sympy's LaTeX parser — is not reproduced: README.)"""
    ((task, table),) = _tables("minerva_math500")
    plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-chat", "url": "sim://", "model": "m"}], datasets=[table]))
    ds = plan.datasets[0]
    golds = [render_sample(ds, i, r).target for i, r in enumerate(load_records(plan, ds))]
    entries = [{"index": v["doc_id"], "prediction": v["reply"], "gold": golds[v["doc_id"]]} for v in task.verdicts]
    details = score(ds.evaluator, entries)["details"]
    assert len(details) == len(task.verdicts) > 20
    for v, d in zip(task.verdicts, details, strict=True):
        assert d["correct"] == bool(v["filters"]["none"]["metrics"]["math_verify"]), (v["note"], v["reply"])


def test_ifevals_verdicts_are_evaltuis(tmp_path: Path) -> None:
    """Google's instruction checkers as lm-eval runs them, strict and loose, prompt- and instruction-level."""
    ((task, table),) = _tables("ifeval")
    plan = load_plan(write_plan(tmp_path, models=[{"abbr": "m", "type": "openai-chat", "url": "sim://", "model": "m"}], datasets=[table]))
    ds = plan.datasets[0]
    golds = [render_sample(ds, i, r).target for i, r in enumerate(load_records(plan, ds))]
    entries = [{"index": int(v["doc_id"]), "prediction": v["reply"], "gold": golds[int(v["doc_id"])]} for v in task.verdicts]
    details = score(ds.evaluator, entries)["details"]
    assert len(details) == len(task.verdicts) >= 20
    for v, d in zip(task.verdicts, details, strict=True):
        want = v["filters"]["none"]["metrics"]
        got = d["scores"]
        for level in ("strict", "loose"):
            assert got[f"prompt_level_{level}_acc"] == float(want[f"prompt_level_{level}_acc"]), (v["note"], level)
            followed = want[f"inst_level_{level}_acc"]
            assert got[f"inst_level_{level}_acc"] == [float(sum(followed)), float(len(followed))], (v["note"], level)


def test_an_ifeval_argument_drawn_at_random_is_drawn_the_same_in_every_run() -> None:
    """IFEval key 1122 asks for the letter '#', which the checker refuses and replaces by a random
    letter (lm-eval draws it from the global `random`: 4 of the 52 letters make this reply follow).
    evaltui draws from a generator seeded by the record, so whatever used `random` before — another
    test, another evaluator — the verdict is one."""
    import random

    from evaltui.scoring.ifeval import follows

    record = {
        "prompt": "Write a tweet in all lowercase letters with the letter # appearing at least 4 times.",
        "instruction_id_list": ["keywords:letter_frequency"],
        "kwargs": [{"letter": "#", "let_frequency": 4, "let_relation": "at least"}],
    }
    reply = "new drop tonight #playboy #style #night #vibes"
    verdicts = set()
    for state in range(60):
        random.seed(state)
        verdicts.add(tuple(map(tuple, follows(record, reply))))
    assert len(verdicts) == 1
