"""The conversation model on its own: Inspect's solver templates as Inspect renders them, a
shuffled multiple choice mapped back, each request of a script built from the answers before
it, a conversation as one text, and tool calls read and compared."""

from __future__ import annotations

import json

import pytest

from evaltui.conversation import CRITIQUE, Conversation, Message, Script, Turn, as_text, assistant, turns_of, user
from evaltui.conversation.solvers import (
    answer_character,
    chain_of_thought,
    critique_prompt,
    multiple_choice_prompt,
    parse_answer,
    revision_prompt,
    shuffled_order,
    unshuffled,
)
from evaltui.conversation.text import user_texts
from evaltui.conversation.tools import NotToolCalls, answer_of, parse_calls
from evaltui.scoring.text_match import judge_tool_calls


def test_multiple_choice_renders_as_inspects_single_answer_template() -> None:
    text = multiple_choice_prompt("What is 2 + 2?", ["3", "4", "5"])
    assert text == (
        "Answer the following multiple choice question. The entire content of your response should be of the following format: "
        "'ANSWER: $LETTER' (without quotes) where LETTER is one of A,B,C.\n\nWhat is 2 + 2?\n\nA) 3\nB) 4\nC) 5"
    )


def test_chain_of_thought_wraps_the_question_in_inspects_template_with_its_newlines() -> None:
    assert chain_of_thought("Q?") == (
        "\nQ?\n\nBefore answering, reason in a step-by-step manner as to get the right answer. Provide your answer at the end on its own line "
        'in the form "ANSWER: $ANSWER" (without quotes) where $ANSWER is the answer to the question.\n'
    )


def test_the_critique_and_revision_templates_are_inspects() -> None:
    assert critique_prompt("Q?", "A!").endswith("[BEGIN DATA]\n***\n[Question]: Q?\n***\n[Answer]: A!\n***\n[END DATA]\n\nCritique: ")
    assert critique_prompt("Q?", "A!").startswith("\nGiven the following question and answer, please critique the answer. A good answer comprehensively")
    revision = revision_prompt("Q?", "A!", "Too short.")
    assert "[Question]: Q?\n***\n[Answer]: A!\n***\n[Critique]: Too short.\n***\n[END DATA]\n\nIf the original answer is already correct" in revision
    assert revision.startswith("\nGiven the following question, initial answer and critique please generate an improved answer to the question:\n")


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("ANSWER: B", "B"),
        ("Let me think.\nIt is 4.\nANSWER: C.", "C"),
        ("answer: b", "B"),
        ("ANSWER: A\nno wait\nANSWER: D", "D"),
        ("So the final ANSWER: C. Done", "C"),
        ("ANSWER: C, I am sure", None),  # Inspect reads "C, I AM SURE": two tokens
        ("ANSWER: A,B", None),
        ("The answer is B", None),
        ("ANSWER: E", None),  # four options: E is none of them
        ("", None),
    ],
)
def test_the_answer_letter_is_read_as_inspects_parse_answers_reads_it(reply: str, letter: str | None) -> None:
    assert parse_answer(reply, 4) == letter


def test_a_shuffle_is_a_fixed_permutation_of_each_sample_and_varies_between_samples() -> None:
    orders = [shuffled_order(i, 4) for i in range(50)]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert orders == [shuffled_order(i, 4) for i in range(50)]  # the same draw every time (a resume, an epoch)
    assert len(set(orders)) > 10


def test_an_answer_to_shuffled_options_maps_back_to_the_records_letter() -> None:
    for index in range(40):
        order = shuffled_order(index, 4)
        for right in range(4):  # the option the record says is right, by its place in the record
            shown = order.index(right)  # where the model saw it
            assert unshuffled(f"I reason...\nANSWER: {answer_character(shown)}", order) == f"ANSWER: {answer_character(right)}"
    assert unshuffled("B", (2, 0, 1, 3)) == ""  # no ANSWER: line: a bare letter would be the shuffled one


def test_each_turn_carries_the_conversation_so_far() -> None:
    script = Script((Message("system", "S"), user("q1")), ("q2", "q3"))
    assert len(script) == 3 and script.kinds == ("turn", "turn", "turn")
    assert script.request(0, []).conversation.chat_messages() == [{"role": "system", "content": "S"}, {"role": "user", "content": "q1"}]
    third = script.request(2, ["a1", "a2"]).conversation
    assert [m.as_dict() for m in third.messages] == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}, {"role": "user", "content": "q3"},
    ]
    assert script.prediction(["a1", "a2", "a3"]) == "a3"
    with pytest.raises(IndexError):
        script.request(3, ["a1", "a2", "a3"])


def test_self_critique_is_a_critique_of_its_own_then_a_revision_of_the_conversation() -> None:
    script = Script((user("MC prompt"),), (CRITIQUE,), question="the question", tools=({"type": "function"},))
    assert len(script) == 3 and script.kinds == ("turn", "critique", "revision")
    critique = script.request(1, ["ANSWER: A"])
    assert critique.kind == "critique" and critique.conversation == Conversation((user(critique_prompt("the question", "ANSWER: A")),))
    revision = script.request(2, ["ANSWER: A", "Looks wrong."]).conversation
    assert revision.messages == (user("MC prompt"), assistant("ANSWER: A"), user(revision_prompt("the question", "ANSWER: A", "Looks wrong.")))
    assert revision.tools == ({"type": "function"},)


def test_a_question_alone_is_sent_to_a_completions_model_as_a_prompt_always_was() -> None:
    assert as_text(Conversation((Message("system", "Sys"), user("Q?"))), "\n---\n") == "Sys\n---\nQ?"
    assert as_text(Conversation((user("Q?"),))) == "Q?"


def test_a_longer_conversation_is_a_transcript_ending_where_the_answer_starts() -> None:
    conversation = Conversation((Message("system", "Sys"), user("q1"), assistant("a1"), user("q2")))
    text = as_text(conversation)
    assert text == "Sys\n\nUser: q1\n\nAssistant: a1\n\nUser: q2\n\nAssistant:"
    assert user_texts(text) == ["q1", "q2"]
    assert user_texts("Q?") == []


def test_a_replys_tool_calls_become_a_json_answer_with_parsed_arguments() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris", "days": 2}'}},
             {"id": "c2", "type": "function", "function": {"name": "time", "arguments": ""}}]
    answer = answer_of(calls)
    assert json.loads(answer) == [{"name": "weather", "arguments": {"city": "Paris", "days": 2}}, {"name": "time", "arguments": {}}]


def test_references_are_read_in_every_way_a_plan_can_write_them() -> None:
    want = [{"name": "f", "arguments": {"x": 1}}]
    assert parse_calls('[{"name": "f", "arguments": {"x": 1}}]') == want
    assert parse_calls('{"name": "f", "arguments": {"x": 1}}') == want  # one call
    assert parse_calls("[{'name': 'f', 'arguments': {'x': 1}}]") == want  # a record's list through str.format
    assert parse_calls('[{"type": "function", "function": {"name": "f", "arguments": "{\\"x\\": 1}"}}]') == want  # OpenAI's shape
    for bad in ("I would call f", "[1, 2]", '[{"arguments": {}}]', "42"):
        with pytest.raises(NotToolCalls):
            parse_calls(bad)


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ('[{"name":"b","arguments":{"y":[1,2]}},{"name":"a","arguments":{"x":1}}]', True),  # order-free
        ('[{"name":"a","arguments":{"x":1.0}},{"name":"b","arguments":{"y":[1,2]}}]', True),  # 1.0 is 1
        ('[{"name":"a","arguments":{"x":2}},{"name":"b","arguments":{"y":[1,2]}}]', False),  # an argument differs
        ('[{"name":"a","arguments":{"x":1}},{"name":"c","arguments":{"y":[1,2]}}]', False),  # a name differs
        ('[{"name":"a","arguments":{"x":1}}]', False),  # a call missing
        ('[{"name":"a","arguments":{"x":1}},{"name":"a","arguments":{"x":1}},{"name":"b","arguments":{"y":[1,2]}}]', False),  # one twice
        ('[{"name":"a","arguments":{"x":1}},{"name":"b","arguments":{"y":[2,1]}}]', False),  # a list's order is its value
        ("I'd look that up for you.", False),
    ],
)
def test_tool_call_match_compares_names_and_arguments_in_any_order(answer: str, right: bool) -> None:
    gold = "[{'name': 'a', 'arguments': {'x': 1}}, {'name': 'b', 'arguments': {'y': [1, 2]}}]"
    verdict = judge_tool_calls(answer, gold)
    assert verdict.correct is right
    assert (verdict.extracted is None) == answer.startswith("I'd")


def test_turns_are_read_back_from_an_entry_and_from_each_epoch() -> None:
    one = [{"kind": "turn", "prompt": "q1", "answer": "a1"}, {"kind": "turn", "prompt": "q2", "answer": "a2"}]
    two = [{"kind": "turn", "prompt": "q1", "answer": "b1"}, {"kind": "turn", "prompt": "q2", "answer": "b2"}]
    assert turns_of({"turns": one}) == [Turn("turn", "q1", "a1"), Turn("turn", "q2", "a2")]
    joined = {"turns": one, "epoch_turns": [one, two]}
    assert [t.answer for t in turns_of(joined, 1)] == ["b1", "b2"]
    assert turns_of(joined, 2) == [] and turns_of({"prediction": "x"}) == []
    assert turns_of({"turns": [{"kind": "turn", "prompt": 3, "answer": "a"}, "junk"]}) == []  # what is not a turn is left out
