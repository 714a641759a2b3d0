"""Model-written code that attacks the machine, through a whole run (RELIABILITY.md §6).

The real command scores a HumanEval-style dataset whose "model" (the simulator, answering from a
key) writes hostile completions: it reads the environment for the API key, writes outside its
folder, opens a socket to a server on 127.0.0.1, fork-bombs, allocates 10 GB, sleeps forever,
kills its own process group, kills evaltui. Each is contained and recorded as that sample's
result; the run goes on and scores the one honest completion.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from planmaker import lightllm, write_jsonl, write_plan

from evaltui.sim import AnswerKey, ModelProfile, SimConfig

pytestmark = pytest.mark.reliability

KEY_VAR = "EVALTUI_HOSTILE_CODE_KEY"
TEST = "def check(candidate):\n    assert candidate(1) == 2\n"


def _landlock_abi() -> int:
    from confined import abi

    return abi()


# What each completion does, and the result the sandbox must record for it. `{port}` is a TCP
# server on 127.0.0.1 that counts connections; `{outside}` a path outside the program's folder.
ATTACKS = {
    "honest": ("    return x + 1\n", "passed"),
    "reads the environment": (
        "    import os\n"
        "    seen = any(KEY_VAR in k for k in os.environ)\n"
        "    try:\n"
        "        seen = seen or KEY_VAR.encode() in open(f'/proc/{{os.getppid()}}/environ', 'rb').read()\n"
        "    except OSError:\n"
        "        pass\n"
        "    raise RuntimeError(f'key visible: {{seen}}')\n",
        "failed: RuntimeError: key visible: False",
    ),
    # (its folder is under /tmp, which the sandbox hides: the path is not there to write)
    "writes outside its folder": ("    open({outside!r}, 'w').write('escaped')\n    return x + 1\n", ("failed: PermissionError", "failed: FileNotFoundError")),
    "opens a socket to 127.0.0.1": ("    import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'hi')\n    return x + 1\n", "failed: "),
    "fork-bombs": ("    import os\n    while True:\n        os.fork()\n", "failed: BlockingIOError"),
    "allocates 10 GB": ("    hog = bytearray(10 * 2**30)\n    return x + 1\n", "memory limit"),
    "sleeps forever": ("    import time\n    time.sleep(10**9)\n", "timed out"),
    "kills its process group": ("    import os, signal\n    os.killpg(os.getpgid(0), signal.SIGKILL)\n", "failed: killed by SIGKILL"),
    "kills evaltui": ("    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return x + 1\n", "failed: PermissionError"),
}


@pytest.fixture
def listener() -> tuple[int, list[bytes]]:
    """A TCP server on 127.0.0.1 that records what any connection sends."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                got.append(conn.recv(100) or b"(connected)")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1], got
    stop.set()
    thread.join(5)
    srv.close()


@pytest.mark.skipif(_landlock_abi() < 6, reason="needs Landlock ABI 6 (Linux 6.12): scoped signals keep model code from killing evaltui")
def test_hostile_completions_are_contained_and_the_run_goes_on(tmp_path: Path, sim_factory, listener) -> None:  # type: ignore[no-untyped-def]
    port, received = listener
    outside = tmp_path / "escaped.txt"
    key = AnswerKey()
    rows = []
    for i, (name, (body, _)) in enumerate(ATTACKS.items()):
        prompt = f'KEY_VAR = {KEY_VAR!r}\ndef inc(x):\n    """Return x + 1 (attack {i}: {name})."""\n'
        rows.append({"prompt": prompt, "test": TEST, "entry_point": "inc", "canonical_solution": "    return x + 1\n"})
        key.add_gen(prompt, body.format(outside=str(outside), port=port))
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=1.0)}))
    ds = {"abbr": "code", "path": str(write_jsonl(tmp_path / "c.jsonl", rows)), "prompt": "{prompt}", "target": "{canonical_solution}", "evaluator": {"type": "code_exec", "timeout": 2.0, "memory_mb": 512}}
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[ds])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {KEY_VAR: "sk-hostile-code-must-not-see-this"}
    proc = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # evaltui lived to score every sample
    assert f"m/code: scored, pass@1 = {100 / len(ATTACKS):.2f}" in proc.stdout
    details = json.loads((tmp_path / "out" / "results" / "m" / "code.json").read_text())["details"]
    results = {name: d["result"] for name, d in zip(ATTACKS, details, strict=True)}
    print("\n".join(f"{name}: {result}" for name, result in results.items()))
    for name, (_, expected) in ATTACKS.items():
        assert results[name].startswith(expected), (name, results[name])
    assert not outside.exists() and received == []
