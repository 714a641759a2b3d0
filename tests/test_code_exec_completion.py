"""How a HumanEval answer becomes the program that runs (no subprocesses here)."""

from __future__ import annotations

from evaltui.scoring.code.completion import build_program, clean_completion, unfence

RECORD = {
    "prompt": 'from typing import List\n\n\ndef add(a: int, b: int) -> int:\n    """Add two numbers."""\n',
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "entry_point": "add",
}


def run(program: str) -> dict:
    namespace: dict = {}
    exec(compile(program, "<test>", "exec"), namespace)  # trusted, hand-written programs only
    return namespace


def test_body_is_appended_to_prompt():
    completion = clean_completion("    return a + b\n", "add")
    assert completion == "    return a + b\n"
    program = build_program(RECORD, completion)
    assert program == RECORD["prompt"] + "    return a + b\n" + "\n\n" + RECORD["test"] + "\n\ncheck(add)\n"
    run(program)


def test_body_that_lost_its_indentation_is_reindented():
    assert clean_completion("return a + b", "add") == "    return a + b"
    assert clean_completion("total = a + b\nreturn total\n", "add") == "    total = a + b\n    return total\n"
    # a stripped reply: only the first line lost its indent
    stripped = "if a:\n        return a + b\n    return b"
    assert clean_completion(stripped, "add") == "    if a:\n        return a + b\n    return b"
    run(build_program(RECORD, clean_completion(stripped, "add")))


def test_fenced_full_function_with_imports_is_placed_after_prompt():
    reply = (
        "Here is the solution:\n\n```python\nimport math\n\ndef add(a: int, b: int) -> int:\n"
        "    return int(math.fsum([a, b]))\n```\n\nThis adds the numbers.\n```python\nprint('x')\n```"
    )
    completion = clean_completion(reply, "add")
    assert "import math" in completion and "def add(" in completion and "print" not in completion
    program = build_program(RECORD, completion)
    assert program.startswith(RECORD["prompt"])
    assert run(program)["add"](2, 2) == 4


def test_full_function_without_fence_is_recognised():
    completion = clean_completion("def add(a, b):\n    return a + b\n", "add")
    assert completion.startswith("\ndef add(")
    run(build_program(RECORD, completion))


def test_indented_full_function_is_dedented():
    completion = clean_completion("    def add(a, b):\n        return a + b\n", "add")
    assert "\ndef add(a, b):\n    return a + b\n" == completion
    run(build_program(RECORD, completion))


def test_fenced_body_is_still_a_body():
    completion = clean_completion("```\n    return a + b\n```", "add")
    assert completion == "    return a + b\n"
    run(build_program(RECORD, completion))


def test_unclosed_fence_takes_the_rest():
    assert unfence("```python\n    return a + b\n") == "    return a + b\n"
    assert unfence("no fence") == "no fence"


def test_other_function_named_like_entry_point_prefix_is_a_body():
    # "def add_one(" is not "def add(": treat as body (it fails later, which is right)
    assert not clean_completion("def add_one(x):\n    return x\n", "add").startswith("\ndef")
