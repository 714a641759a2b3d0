"""The sandbox: timeouts, memory, early exits, leaked secrets, output floods, cleanup."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import pytest

from evaltui.scoring import score
from evaltui.scoring.sandbox import MEMORY_LIMIT, OUTPUT_LIMIT, PASSED, TIMED_OUT, run_program

PROMPT = 'def inc(x):\n    """Return x + 1."""\n'
TEST = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"
RECORD = {"prompt": PROMPT, "test": TEST, "entry_point": "inc"}


@dataclass
class Ev:
    type: str = "code_exec"
    pattern: str | None = None
    timeout: float = 10.0
    memory_mb: int = 1024


def run_body(body: str, **limits) -> dict:
    result = score(Ev(**limits), [{"index": 0, "origin_prompt": PROMPT, "prediction": body, "gold": ""}], [RECORD])
    return result["details"][0]


def test_correct_body_passes():
    detail = run_body("    return x + 1\n")
    assert detail["result"] == PASSED and detail["correct"] is True


def test_wrong_body_fails_with_last_traceback_line():
    detail = run_body("    return x\n")
    assert detail["result"] == "failed: AssertionError"
    assert detail["correct"] is False


def test_syntax_error_fails():
    assert run_body("    return (x +\n")["result"].startswith("failed: SyntaxError")


def test_infinite_loop_times_out():
    detail = run_body("    while True:\n        pass\n", timeout=1.0)
    assert detail["result"] == TIMED_OUT and not detail["correct"]


def test_sleeping_program_times_out():
    assert run_body("    import time\n    time.sleep(60)\n", timeout=1.0)["result"] == TIMED_OUT


def test_huge_allocation_hits_memory_limit():
    assert run_body("    x = bytearray(8 * 2**30)\n    return x + 1\n", memory_mb=256)["result"] == MEMORY_LIMIT


def test_growing_list_hits_memory_limit():
    body = "    hog = []\n    for _ in range(10**6):\n        hog.append(bytearray(2**20))\n"
    assert run_body(body, memory_mb=256)["result"] == MEMORY_LIMIT


@pytest.mark.parametrize(
    "reply",
    [
        # exits at import time, before check() runs
        "def inc(x):\n    return x + 1\nimport os\nos._exit(0)\n",
        "def inc(x):\n    return x + 1\nimport sys\nsys.exit(0)\n",
        # exits while check() runs
        "    import os\n    os._exit(0)\n",
        "    raise SystemExit(0)\n",
    ],
)
def test_early_exit_is_not_a_pass(reply):
    detail = run_body(reply)
    assert detail["correct"] is False
    assert detail["result"] == "failed: exited before the tests finished"


def test_parent_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("EVALTUI_TEST_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    absent = "    import os\n    assert 'EVALTUI_TEST_SECRET' not in os.environ\n    assert 'OPENAI_API_KEY' not in os.environ\n    return x + 1\n"
    present = "    import os\n    assert os.environ.get('EVALTUI_TEST_SECRET') == 'hunter2'\n    return x + 1\n"
    assert run_body(absent)["result"] == PASSED
    assert run_body(present)["result"] == "failed: AssertionError"


def test_environment_is_minimal_and_home_is_private():
    body = (
        "    import os\n"
        "    assert set(os.environ) <= {'PATH', 'LANG', 'PYTHONDONTWRITEBYTECODE', 'HOME', 'TMPDIR', 'LC_CTYPE'}, sorted(os.environ)\n"
        "    assert os.environ['HOME'] == os.getcwd()\n"
        "    return x + 1\n"
    )
    assert run_body(body)["result"] == PASSED


def test_stdin_is_closed():
    assert run_body("    input()\n")["result"] == "failed: EOFError: EOF when reading a line"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_does_not_hang(stream):
    body = f"    import sys\n    for _ in range(10**6):\n        sys.{stream}.write('x' * 100000)\n"
    assert run_body(body, timeout=5.0)["result"] == OUTPUT_LIMIT


def test_some_output_is_fine():
    assert run_body("    print('debugging', x)\n    return x + 1\n")["result"] == PASSED


def test_temporary_directory_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    body = "    open('scratch.txt', 'w').write('x')\n    import os\n    os.makedirs('sub', exist_ok=True)\n    return x + 1\n"
    assert run_body(body)["result"] == PASSED
    assert list(tmp_path.iterdir()) == []


def test_run_program_directly():
    assert run_program("assert 1 + 1 == 2\n") == PASSED
    assert run_program("raise ValueError('bad input')\n") == "failed: ValueError: bad input"


def test_score_code_exec_mixed_batch_with_errors_and_missing_records():
    samples = [
        {"index": 0, "origin_prompt": PROMPT, "prediction": "    return x + 1\n", "gold": ""},
        {"index": 1, "origin_prompt": PROMPT, "prediction": "    return x\n", "gold": ""},
        {"index": 2, "origin_prompt": PROMPT, "prediction": "", "gold": "",
         "error": {"type": "ReadTimeout", "status": None, "message": "timed out"}},
        {"index": 3, "origin_prompt": PROMPT, "prediction": "    return x + 1\n", "gold": ""},
        {"index": 4, "origin_prompt": PROMPT, "prediction": "    return x + 1\n", "gold": ""},
    ]
    records = [RECORD, RECORD, RECORD, {"prompt": PROMPT}]  # 3 lacks fields, 4 has none
    result = score(Ev(), samples, records, workers=3)
    assert result["pass@1"] == 20.0
    details = result["details"]
    assert [d["index"] for d in details] == [0, 1, 2, 3, 4]
    assert [d["correct"] for d in details] == [True, False, False, False, False]
    assert details[0]["extracted"] == "    return x + 1\n"
    assert details[2]["error"]["type"] == "ReadTimeout"
    assert details[2]["result"] == "failed: inference failed (ReadTimeout)"
    assert details[3]["result"] == "failed: dataset record lacks test, entry_point"
    assert details[4]["result"].startswith("failed: dataset record lacks")


def test_code_exec_needs_records():
    with pytest.raises(ValueError, match="needs the dataset records"):
        score(Ev(), [{"index": 0, "origin_prompt": "", "prediction": "x", "gold": ""}])


def test_printing_the_pass_token_found_in_the_program_file_is_not_a_pass():
    body = (
        "    import os, re, sys\n"
        "    text = open(sys.argv[0]).read() + open(__file__).read()\n"
        "    print(' '.join(re.findall(r'EVALTUI-PASSED-[0-9a-f]+', text)))\n"
        "    os._exit(0)\n"
    )
    detail = run_body(body)
    assert detail["result"] != PASSED and detail["correct"] is False


def test_the_program_dies_with_the_process_that_runs_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "pid"
    program = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(100)\n"
    runner = subprocess.Popen(
        [sys.executable, "-c", f"from evaltui.scoring.sandbox import run_program; run_program({program!r}, timeout=60)"]
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the sandboxed program never started"
        time.sleep(0.02)
    child = int(pid_file.read_text())
    os.kill(runner.pid, signal.SIGKILL)  # evaltui killed mid-scoring
    runner.wait(timeout=10)
    end = time.monotonic() + 10
    while time.monotonic() < end and _running(child):
        time.sleep(0.02)
    assert not _running(child), "the sandboxed program outlived its parent"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False
