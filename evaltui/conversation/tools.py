"""Tool calls as evaltui keeps them: a reply's `tool_calls` become its answer, a JSON list of
`{"name": …, "arguments": {…}}` (no tool is run), and `tool_call_match` compares two such lists.

A server gives each call's arguments as a JSON text (OpenAI's `function.arguments`); they are
kept parsed, so two calls with the same arguments written differently are the same call. A
reference may be written the same way, in OpenAI's shape (`{"type": "function", "function":
{…}}`), as one call instead of a list, or as a record's list filled into a template (`{calls}`,
which Python writes with single quotes).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from typing import Any

from evaltui import fastjson


class NotToolCalls(ValueError):
    """A text that is not a list of tool calls; the message says why."""


def answer_of(tool_calls: Sequence[Any]) -> str:
    """A reply's `tool_calls` (OpenAI's shape) as the answer text: a JSON list of {name, arguments}."""
    return fastjson.dumps([_plain(call) for call in tool_calls]).decode()


def _plain(call: Any) -> dict[str, Any]:
    """One call as {name, arguments}: OpenAI's {id, type, function: {name, arguments}} or already plain."""
    if not isinstance(call, dict):
        raise NotToolCalls(f"a tool call is an object, not {type(call).__name__}")
    function = call.get("function")
    inner: dict[str, Any] = function if isinstance(function, dict) else call
    name = inner.get("name")
    if not isinstance(name, str):
        raise NotToolCalls("a tool call has no name")
    arguments = inner.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = fastjson.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass  # kept as the model wrote it: it can only equal the same text
    return {"name": name, "arguments": arguments}


def parse_calls(text: str) -> list[dict[str, Any]]:
    """A list of tool calls from an answer or a reference (see the module's docstring); NotToolCalls when it is none."""
    value: Any
    try:
        value = fastjson.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text.strip())  # a record's list, as str.format wrote it
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise NotToolCalls("not JSON") from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise NotToolCalls(f"not a list of tool calls (a {type(value).__name__})")
    return [_plain(call) for call in value]


def canonical(calls: Sequence[dict[str, Any]]) -> str:
    """The calls in one spelling, order-free: each call's keys sorted, whole floats as integers
    (1 and 1.0 alike, as Python's == has them), the calls sorted. Two lists of calls are the same
    calls, each as often, exactly when their canonical texts are equal."""
    return "[" + ",".join(sorted(json.dumps(_numbers(c), sort_keys=True, ensure_ascii=False, separators=(",", ":")) for c in calls)) + "]"


def _numbers(value: Any) -> Any:
    """Whole floats as integers, so `{"n": 1}` and `{"n": 1.0}` compare equal, as Python's == has them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value
