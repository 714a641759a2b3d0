"""A conversation dataset's keys checked against each other: `messages`, `turns`, `steps`,
`shuffle` and `tools` (each problem `field: message`, relative to the dataset's table).

What the keys mean is README's "Conversations"; what the records must hold for them (a turns
field that is a list of texts, tools that are a list of objects) is checked with the data, in
templates.field_checks.
"""

from __future__ import annotations

from evaltui.backends import BACKENDS
from evaltui.backends.openai import OpenAIChatBackend
from evaltui.plan.schema import DatasetConfig, Plan

#: The steps that shape the question before it is sent (after which they mean nothing).
SHAPING = ("multiple_choice", "chain_of_thought")


def check_conversation(plan: Plan, ds: DatasetConfig) -> list[str]:
    return _check_opening(ds) + _check_steps(ds) + _check_tools(plan, ds) + _check_fields(ds)


def _check_opening(ds: DatasetConfig) -> list[str]:
    """prompt or messages (not both), the system message in one place, messages in a sendable order."""
    problems: list[str] = []
    if ds.messages is not None and ds.prompt:
        problems.append("messages: give either prompt (with system) or messages, not both")
    if ds.turns is not None and ds.prompt:
        problems.append("turns: the turns are the user's messages: leave out prompt (a system message goes in system or messages)")
    if ds.messages is not None and ds.system:
        problems.append('system: with messages, the system message is one of them: { role = "system", content = "…" } first')
    if ds.messages is None:
        return problems
    if not ds.messages:
        return [*problems, "messages: lists no message"]
    for k, m in enumerate(ds.messages):
        if m.role == "system" and k > 0:
            problems.append(f"messages[{k}].role: a system message comes first")
    last = ds.messages[-1]
    if ds.turns is None and last.role != "user":
        problems.append(f"messages[{len(ds.messages) - 1}].role: the last message is the one the model answers: a user message (got {last.role!r})")
    if ds.turns is not None and last.role == "user":
        problems.append(f"messages[{len(ds.messages) - 1}].role: with turns, the messages come before the first turn: end them with no user message")
    return problems


def _check_steps(ds: DatasetConfig) -> list[str]:
    """Each step where it means something: shaping before generate, one generate, critiques after it."""
    problems: list[str] = []
    if ds.shuffle and "multiple_choice" not in (ds.steps or ()):
        problems.append('shuffle: only used by the multiple_choice step (steps = ["multiple_choice", "generate"])')
    if ds.steps is None:
        return problems
    if ds.turns is not None:
        return [*problems, "steps: shape and send one question; a dataset with turns sends each turn as it is (leave one of them out)"]
    if ds.mode != "gen":
        return [*problems, f"steps: only for mode = 'gen' (got {ds.mode!r})"]
    if "generate" not in ds.steps:
        return [*problems, 'steps: no step sends the question: add "generate" (after multiple_choice and chain_of_thought, before self_critique)']
    sent = ds.steps.index("generate")
    for j, step in enumerate(ds.steps):
        if step in SHAPING and j > sent:
            problems.append(f"steps[{j}]: {step} shapes the question, so it comes before generate")
        elif step == "self_critique" and j < sent:
            problems.append(f"steps[{j}]: self_critique critiques an answer, so it comes after generate")
        elif step in ("generate", "multiple_choice") and ds.steps.index(step) < j:
            problems.append(f"steps[{j}]: {step} is listed twice")
    if "multiple_choice" in ds.steps and not ds.choices:
        problems.append('choices: the multiple_choice step needs the options (e.g. ["{A}", "{B}", "{C}", "{D}"], or ["{options[*]}"] for a list field)')
    return problems


def _check_tools(plan: Plan, ds: DatasetConfig) -> list[str]:
    if ds.tools is None:
        return []
    if ds.mode != "gen":
        return [f"tools: only for mode = 'gen' (got {ds.mode!r})"]
    text = [f"{m.abbr} ({m.type})" for m in plan.tested if not issubclass(BACKENDS[m.type], OpenAIChatBackend)]
    if text:
        chat = ", ".join(name for name, backend in BACKENDS.items() if issubclass(backend, OpenAIChatBackend))
        return [f"tools: only the chat types ({chat}) send tools; models {', '.join(text)} take one text"]
    streamed = [m.abbr for m in plan.tested if m.stream]
    if streamed:
        return [f"tools: a streamed reply's tool calls are not read; models {', '.join(streamed)} stream (set stream = false on them for this plan)"]
    return []


def _check_fields(ds: DatasetConfig) -> list[str]:
    """turns and tools name a record field (the records are checked with the data)."""
    named = (("turns", ds.turns), ("tools", ds.tools))
    return [f"{key}: names a record field, e.g. {key} = {key!r} (got {value!r})" for key, value in named if value is not None and not value.isidentifier()]
