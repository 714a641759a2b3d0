"""Conversations through the whole engine against the simulator on 127.0.0.1, which keeps every
request's body (SimConfig.record_bodies): what each turn and step sent, in order, and what was
scored."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from planmaker import chat, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.conversation.solvers import answer_character, chain_of_thought, critique_prompt, shuffled_order
from evaltui.engine.disk.predictions import read_predictions
from evaltui.engine.stream import events as ev
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig
from evaltui.sim.thread import SimThread

MT_BENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mt_bench" / "question.jsonl"


def sim(key: AnswerKey | None = None, **kw: Any) -> SimThread:
    return SimThread(SimConfig(answer_key=key or AnswerKey(), record_bodies=True, **kw))


def bodies(server: SimThread) -> list[dict[str, Any]]:
    return [r.body for r in server.server.stats.log if r.body is not None]


def predictions(runner: Any, model: str, dataset: str) -> list[dict[str, Any]]:
    found = read_predictions(runner.workdir.root / "predictions" / model / f"{dataset}.json")
    assert found is not None
    return found


def score(events: list[ev.Event]) -> float:
    return float(of_type(events, ev.DatasetScored)[0].score)


def test_the_turn_2_request_carries_turn_1s_question_and_answer_in_order(tmp_path: Path) -> None:
    key = AnswerKey()
    for i in range(4):
        key.add_gen(f"first {i}?", f"answer one {i}")
        key.add_gen(f"second {i}?", f"answer two {i}")
    rows = [{"turns": [f"first {i}?", f"second {i}?"], "ref": f"answer two {i}"} for i in range(4)]
    ds = {"abbr": "mt", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "turns": "turns", "system": "Be brief.", "target": "{ref}"}
    with sim(key) as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[ds]))
        sent = bodies(server)
    assert code == 0 and score(events) == 100.0
    assert len(sent) == 8
    for i in range(4):
        second = next(b["messages"] for b in sent if b["messages"][-1]["content"] == f"second {i}?")
        assert second == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"first {i}?"},
            {"role": "assistant", "content": f"answer one {i}"},
            {"role": "user", "content": f"second {i}?"},
        ]
    entry = predictions(runner, "m", "mt")[2]
    assert entry["prediction"] == "answer two 2"  # what the evaluator scored: the last turn's answer
    assert entry["turns"] == [{"kind": "turn", "prompt": "first 2?", "answer": "answer one 2"}, {"kind": "turn", "prompt": "second 2?", "answer": "answer two 2"}]


def test_a_completions_model_gets_the_conversation_as_one_transcript(tmp_path: Path) -> None:
    key = AnswerKey()
    key.add_gen("Sys\nfirst?", "one")
    rows = [{"turns": ["first?", "second?"], "ref": "one"}]
    ds = {"abbr": "mt", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "turns": "turns", "system": "Sys", "system_join": "\n", "target": "{ref}"}
    with sim(key) as server:
        code, _, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", server.url)], datasets=[ds]))
        sent = [b["inputs"] for b in bodies(server)]
    assert code == 0
    # the first turn as a prompt always went; the second a transcript
    assert sent == ["Sys\nfirst?", "Sys\nUser: first?\n\nAssistant: one\n\nUser: second?\n\nAssistant:"]


def test_message_templates_are_filled_from_each_record_in_order(tmp_path: Path) -> None:
    rows = [{"q": "2+2?", "a": "4", "shot_q": "1+1?", "shot_a": "2"}]
    messages = [{"role": "system", "content": "You are a careful grader."}, {"role": "user", "content": "{shot_q}"},
                {"role": "assistant", "content": "{shot_a}"}, {"role": "user", "content": "{q}"}]
    ds = {"abbr": "fs", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "messages": messages, "target": "{a}"}
    key = AnswerKey()
    key.add_gen("2+2?", "4")
    with sim(key) as server:
        code, events, _ = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[ds]))
        sent = bodies(server)
    assert code == 0 and score(events) == 100.0
    assert [b["messages"] for b in sent] == [[{"role": "system", "content": "You are a careful grader."}, {"role": "user", "content": "1+1?"},
                                              {"role": "assistant", "content": "2"}, {"role": "user", "content": "2+2?"}]]


def mcq_rows(n: int) -> list[dict[str, Any]]:
    return [{"question": f"Which is number {i % 4}?", "options": [f"{i}-zero", f"{i}-one", f"{i}-two", f"{i}-three"], "answer": "ABCD"[i % 4]} for i in range(n)]


def test_shuffled_options_map_back_to_the_records_letter_and_self_critique_sends_three_requests(tmp_path: Path) -> None:
    """The simulator knows the right option's letter as shown (the answer key the runner writes
    for the bundled simulator does the same: engine/run/simproc.py), so a right answer names a
    shuffled letter: the prediction must name the record's."""
    rows = mcq_rows(12)
    steps = ["multiple_choice", "chain_of_thought", "generate", "self_critique"]
    ds = {"abbr": "mc", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "prompt": "{question}", "target": "{answer}", "steps": steps,
          "choices": ["{options[*]}"], "shuffle": True, "evaluator": {"type": "choice"}}
    key = AnswerKey()
    shown_letters = []
    for i, row in enumerate(rows):
        order = shuffled_order(i, 4)
        shown = [row["options"][j] for j in order]
        right = "ABCD".index(row["answer"])
        shown_letters.append(answer_character(order.index(right)))
        from evaltui.conversation.solvers import multiple_choice_prompt

        key.add_gen(chain_of_thought(multiple_choice_prompt(row["question"], shown)), f"Thinking.\nANSWER: {shown_letters[-1]}")
    assert sum(s != r["answer"] for s, r in zip(shown_letters, rows, strict=True)) >= 6  # most answers name a letter the record does not
    with sim(key) as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[ds]))
        sent = bodies(server)
    assert code == 0 and score(events) == 100.0
    assert len(sent) == 3 * len(rows)  # the answer, the critique, the revision
    entries = predictions(runner, "m", "mc")
    for i, (entry, row) in enumerate(zip(entries, rows, strict=True)):
        assert entry["prediction"] == f"ANSWER: {row['answer']}"
        assert [t["kind"] for t in entry["turns"]] == ["turn", "critique", "revision"]
        assert entry["turns"][0]["answer"] == f"Thinking.\nANSWER: {shown_letters[i]}"  # what the model said, as it said it
        critique = next(b for b in sent if b["messages"][0]["content"] == critique_prompt(row["question"], entry["turns"][0]["answer"]))
        assert len(critique["messages"]) == 1  # a request of its own: the question (Inspect's input_text) and the answer
        revision = next(b for b in sent if len(b["messages"]) == 3 and b["messages"][0]["content"] == entry["turns"][0]["prompt"])
        assert [m["role"] for m in revision["messages"]] == ["user", "assistant", "user"]
        assert revision["messages"][1]["content"] == entry["turns"][0]["answer"]
        assert entry["turns"][1]["answer"] in revision["messages"][2]["content"]  # the critique played back


def test_tool_calls_are_sent_parsed_and_matched(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    rows = [{"q": f"Weather in city {i}?", "tools": tools, "calls": [{"name": "weather", "arguments": {"city": f"C{i}", "days": i}}]} for i in range(6)]
    ds = {"abbr": "tc", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "prompt": "{q}", "target": "{calls}", "tools": "tools",
          "evaluator": {"type": "tool_call_match"}}
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["q"], json.dumps(r["calls"]))
    with sim(key, models={"wrong": ModelProfile(accuracy=0.0)}) as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url), chat("wrong", server.url)], datasets=[ds]))
        sent = bodies(server)
    assert code == 0
    assert all(b["tools"] == tools for b in sent)
    scores = {e.model: e.score for e in of_type(events, ev.DatasetScored)}
    assert scores == {"m": 100.0, "wrong": 0.0}  # a wrong reply: the days argument off by one (the simulator's wrong answer)
    entry = predictions(runner, "m", "tc")[3]
    assert json.loads(entry["prediction"]) == [{"name": "weather", "arguments": {"city": "C3", "days": 3}}]
    assert json.loads(predictions(runner, "wrong", "tc")[3]["prediction"]) == [{"name": "weather", "arguments": {"city": "C3", "days": 4}}]


def test_each_turn_has_retry_on_error_of_its_own(tmp_path: Path) -> None:
    """Every request fails once (the simulator's fail_first counts per last user message), with
    no request retries: each turn needs its second try. Counted over the whole conversation the
    second turn's retry would be its third try, past retry_on_error = 1."""
    key = AnswerKey()
    key.add_gen("first?", "one")
    key.add_gen("second?", "two")
    rows = [{"turns": ["first?", "second?"], "ref": "two"}]
    ds = {"abbr": "mt", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "turns": "turns", "target": "{ref}", "retry_on_error": 1}
    with sim(key, faults=Faults(fail_first=1)) as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url, retry=0)], datasets=[ds]))
        sent = [b["messages"][-1]["content"] for b in bodies(server)]
    assert code == 0 and score(events) == 100.0
    assert sent == ["first?", "first?", "second?", "second?"]
    assert [e.attempt for e in of_type(events, ev.SampleRetried)] == [2, 2]


@pytest.mark.skipif(not MT_BENCH.exists(), reason=f"MT-Bench's questions are not here ({MT_BENCH}); CI's clean clone has no shared datasets")
def test_mt_bench_end_to_end_against_the_simulator(tmp_path: Path) -> None:
    ds = {"abbr": "mt_bench", "path": str(MT_BENCH), "turns": "turns", "target": "", "epochs": 2}
    with sim() as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[ds]))
        sent = bodies(server)
    assert code == 0
    questions = [json.loads(line) for line in MT_BENCH.read_text(encoding="utf-8").splitlines()]
    assert len(questions) == 80 and len(sent) == 80 * 2 * 2  # two turns, two epochs
    seconds = Counter(json.dumps(b["messages"]) for b in sent if len(b["messages"]) == 3)
    for q in questions:
        second = [{"role": "user", "content": q["turns"][0]}, {"role": "assistant", "content": "I don't know."}, {"role": "user", "content": q["turns"][1]}]
        assert seconds[json.dumps(second)] == 2  # each epoch's second turn, after its first
    entries = predictions(runner, "m", "mt_bench")
    assert [len(e["epoch_turns"]) for e in entries] == [2] * 80
    assert entries[5]["epoch_turns"][1][1]["prompt"] == questions[5]["turns"][1]
