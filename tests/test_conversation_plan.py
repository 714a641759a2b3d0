"""The plan keys of conversations — messages, turns, steps, shuffle, tools — accepted where they
mean something, and each mistake one line naming its field (the bad-plan corpus has more:
tests/bad_plans/conversation_*.toml)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from evaltui.plan import PlanError, load_plan

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
ROWS = [
    {"question": f"Q{i}?", "answer": "B", "options": ["x", "y", "z"], "turns": [f"t{i}a", f"t{i}b"], "tools": TOOLS, "shot_q": "1+1?", "shot_a": "2"}
    for i in range(3)
]
CHAT = {"abbr": "chat", "type": "openai-chat", "url": "http://127.0.0.1:9/v1", "model": "m"}
COMPLETIONS = {"abbr": "base", "type": "openai-completions", "url": "http://127.0.0.1:9/v1", "model": "m"}


def load(tmp_path: Path, models: list[dict[str, Any]] | None = None, rows: list[dict[str, Any]] = ROWS, **dataset: Any) -> Any:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = {"abbr": "d", "path": "d.jsonl", "target": "{answer}", **dataset}
    plan = {"models": models or [CHAT], "datasets": [ds]}
    (tmp_path / "p.toml").write_text(tomli_w.dumps(plan), encoding="utf-8")
    return load_plan(tmp_path / "p.toml")


def problems(tmp_path: Path, **kw: Any) -> list[str]:
    with pytest.raises(PlanError) as e:
        load(tmp_path, **kw)
    return e.value.problems


@pytest.mark.parametrize(
    "dataset",
    [
        {"messages": [{"role": "system", "content": "Grade."}, {"role": "user", "content": "{shot_q}"}, {"role": "assistant", "content": "{shot_a}"},
                      {"role": "user", "content": "{question}"}]},
        {"turns": "turns", "system": "Be brief."},
        {"turns": "turns", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "{shot_q}"}, {"role": "assistant", "content": "{shot_a}"}]},
        {"prompt": "{question}", "steps": ["multiple_choice", "chain_of_thought", "generate", "self_critique"], "choices": ["{options[*]}"], "shuffle": True,
         "evaluator": {"type": "choice"}},
        {"prompt": "{question}", "steps": ["chain_of_thought", "generate", "self_critique", "self_critique"]},
        {"prompt": "{question}", "tools": "tools", "evaluator": {"type": "tool_call_match"}},
    ],
)
def test_conversation_datasets_are_accepted(tmp_path: Path, dataset: dict[str, Any]) -> None:
    plan = load(tmp_path, **dataset)
    assert plan.datasets[0].prompt == dataset.get("prompt", "")


def test_a_plan_without_the_keys_keeps_its_fingerprint(tmp_path: Path) -> None:
    """The keys added for conversations are left out of a dataset's fingerprint at their defaults."""
    dumped = load(tmp_path, prompt="{question}").datasets[0].versioned_dump()
    assert not {"messages", "turns", "steps", "shuffle", "tools"} & dumped.keys()


@pytest.mark.parametrize(
    ("dataset", "line"),
    [
        ({"prompt": "{question}", "turns": "turns"}, "datasets[0].turns: the turns are the user's messages: leave out prompt"),
        ({"messages": [{"role": "user", "content": "{question}"}], "system": "S"}, "datasets[0].system: with messages, the system message is one of them"),
        ({"messages": []}, "datasets[0].messages: lists no message"),
        ({"messages": [{"role": "user", "content": "{question}"}, {"role": "assistant", "content": "{answer}"}]},
         "datasets[0].messages[1].role: the last message is the one the model answers: a user message (got 'assistant')"),
        ({"messages": [{"role": "user", "content": "{question}"}, {"role": "system", "content": "S"}, {"role": "user", "content": "{question}"}]},
         "datasets[0].messages[1].role: a system message comes first"),
        ({"messages": [{"role": "user", "content": "{question}"}], "turns": "turns"},
         "datasets[0].messages[0].role: with turns, the messages come before the first turn: end them with no user message"),
        ({"messages": [{"role": "tool", "content": "{question}"}]}, "datasets[0].messages[0].role: must be one of 'system', 'user' or 'assistant' (got 'tool')"),
        ({"messages": [{"role": "user", "content": "{question"}]}, "datasets[0].messages[0].content: invalid template"),
        ({"turns": "turns", "steps": ["generate"]}, "datasets[0].steps: shape and send one question"),
        ({"prompt": "{question}", "steps": ["chain_of_thought"]}, 'datasets[0].steps: no step sends the question: add "generate"'),
        ({"prompt": "{question}", "steps": ["generate", "chain_of_thought"]}, "datasets[0].steps[1]: chain_of_thought shapes the question, so it comes before generate"),
        ({"prompt": "{question}", "steps": ["generate", "generate"]}, "datasets[0].steps[1]: generate is listed twice"),
        ({"prompt": "{question}", "shuffle": True}, "datasets[0].shuffle: only used by the multiple_choice step"),
        ({"prompt": "{question}", "steps": ["generate"], "mode": "ppl", "choices": ["a", "b"], "evaluator": {"type": "ppl"}, "models": [COMPLETIONS]},
         "datasets[0].steps: only for mode = 'gen'"),
        ({"prompt": "{question}", "choices": ["{options[*]}"]}, "datasets[0].choices: only used when mode = 'ppl' or 'loglikelihood', or by the multiple_choice step"),
        ({"prompt": "{question}", "tools": "the tools"}, "datasets[0].tools: names a record field"),
        ({"prompt": "{question}", "tools": "question"}, "datasets[0].tools: record 0: 'question' is not a list of tool definitions (objects); got a str"),
        ({"turns": "nothing"}, "datasets[0].turns: record 0: 'nothing' is not a non-empty list of texts (the user turns); got no such field"),
        ({"turns": "options", "rows": [{"answer": "B", "options": [1, 2]}]}, "datasets[0].turns: record 0: 'options' is not a non-empty list of texts (the user turns); got a list of int"),
        ({"prompt": "{question}", "steps": ["multiple_choice", "generate"], "choices": ["{nope[*]}"]}, "datasets[0].choices[0]: record 0 has no field 'nope'"),
    ],
)
def test_each_mistake_is_one_line_naming_its_field(tmp_path: Path, dataset: dict[str, Any], line: str) -> None:
    rows = dataset.pop("rows", ROWS)
    found = problems(tmp_path, rows=rows, **dataset)
    assert len(found) == 1 and found[0].startswith(f"p.toml: {line}"), found


def test_tools_need_every_model_to_be_a_chat_type(tmp_path: Path) -> None:
    found = problems(tmp_path, models=[CHAT, COMPLETIONS], prompt="{question}", tools="tools")
    assert found == ["p.toml: datasets[0].tools: only the chat types (lightllm-chat, openai-chat) send tools; models base (openai-completions) take one text"]


def test_a_conversation_dataset_without_any_question_still_says_prompt_is_missing(tmp_path: Path) -> None:
    assert problems(tmp_path) == ["p.toml: datasets[0].prompt: required field is missing"]


def test_the_readme_documents_each_key_in_the_plan_reference_and_its_section() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    reference = readme.split("## The plan file", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    for key in ("messages", "turns", "steps", "shuffle", "tools"):
        assert f"# {key} = " in reference, key
    assert "tool_call_match" in reference
    section = readme.split("### Conversations", 1)[1].split("\n### ", 1)[0]
    for key in ("messages", "turns", "steps", "tools"):
        assert f"**`{key}`**" in section, key
    assert "shuffle = true" in section and "turns_of(entry, epoch)" in section


def test_tools_are_refused_with_a_model_that_streams(tmp_path: Path) -> None:
    found = problems(tmp_path, models=[{**CHAT, "stream": True}], prompt="{question}", tools="tools")
    assert found == ["p.toml: datasets[0].tools: a streamed reply's tool calls are not read; models chat stream (set stream = false on them for this plan)"]
