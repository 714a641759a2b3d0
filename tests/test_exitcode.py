"""The exit codes are SPEC §2's numbers, whatever name the code gives them."""

from __future__ import annotations

import json

from evaltui.exitcode import ExitCode


def test_each_exit_code_is_the_number_spec_gives_it() -> None:
    assert [int(c) for c in (ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE, ExitCode.INTERRUPTED)] == [0, 1, 2, 130]


def test_an_exit_code_reads_as_its_number_in_text_and_json() -> None:
    """`exit code 2` in a log line and `"exit_code": 130` in --json, on every Python (3.10 printed an IntEnum's name)."""
    assert f"exit code {ExitCode.USAGE}" == "exit code 2"
    assert json.dumps({"exit_code": ExitCode.INTERRUPTED}) == '{"exit_code": 130}'
