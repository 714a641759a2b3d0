"""Turn a model's HumanEval answer into the program that is run.

Models answer in three shapes: a bare function body (what the benchmark asks for), the whole
function again (chat models), or either one inside a markdown code fence.  All three must run
the same way, so the answer is unwrapped and placed where it belongs:

- a fenced answer is replaced by its first fenced block;
- an answer that defines `<entry_point>(` is appended after the prompt as a whole: the
  prompt's own function already has its docstring as a body, so defining it again is valid,
  the prompt's helpers and imports stay in scope, and the answer's own imports are kept;
- otherwise the answer is the function body and is appended to the prompt directly; a body
  whose first line lost its indentation (a stripped reply) is re-indented to four spaces.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

_FENCE_RE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_INDENT = "    "


def unfence(prediction: str) -> str:
    """The first fenced code block, or the text itself when it has no fence."""
    if "```" not in prediction:
        return prediction
    match = _FENCE_RE.search(prediction)
    if match is None:  # a fence with nothing after it on the same line
        return prediction.split("```", 1)[1]
    return match.group(1)


def defines_entry_point(code: str, entry_point: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def _indent_body(body: str) -> str:
    lines = body.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if not filled:
        return body
    first = filled[0]
    if lines[first][:1] in (" ", "\t"):
        return body
    if all(lines[i][:1] not in (" ", "\t") for i in filled):
        return "\n".join(_INDENT + line if line.strip() else line for line in lines)
    lines[first] = _INDENT + lines[first]
    return "\n".join(lines)


def clean_completion(prediction: str, entry_point: str) -> str:
    """The code to put after the prompt: a full definition or an indented body."""
    code = unfence(prediction)
    if defines_entry_point(code, entry_point):
        return "\n" + textwrap.dedent(code).strip("\n") + "\n"
    return _indent_body(code)


def build_program(record: dict[str, Any], completion: str) -> str:
    prompt, test, entry_point = str(record["prompt"]), str(record["test"]), record["entry_point"]
    return prompt + completion + "\n\n" + test + "\n\n" + f"check({entry_point})\n"
