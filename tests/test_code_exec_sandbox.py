"""The sandbox: timeouts, memory, early exits, leaked secrets, output floods, cleanup."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import pytest

import evaltui.scoring.code.sandbox as sandbox
from evaltui.scoring import score
from evaltui.scoring.code.sandbox import (
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    PASSED,
    TIMED_OUT,
    run_program,
)

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


def test_the_exception_is_read_from_interleaved_tracebacks():
    """A fork bomb's children share one stderr: it can end with another child's heading (or a
    code line cut off); the verdict is still the exception, not `Traceback (most recent call last):`."""
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/tmp/x/program.py", line 3, in inc\n'
        "    os.fork()\n"
        "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
        "Traceback (most recent call last):\n"
        '  File "/tmp/x/program.py", line 3, in inc\n'
    )
    assert sandbox._verdict(1, "", stderr, "token") == "failed: BlockingIOError: [Errno 11] Resource temporarily unavailable"
    assert sandbox._verdict(1, "", "Traceback (most recent call last):\n", "token") == "failed: Traceback (most recent call last):"  # nothing better to say
    assert sandbox._verdict(1, "", "x\nMemoryError\nTraceback (most recent call last):\n", "token") == sandbox.MEMORY_LIMIT


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

    # (the program cannot write outside its folder to say its pid: it is found by its folder)
    sandboxes = tmp_path / "sandboxes"
    program = "import os, time\nopen('started', 'w').close()\ntime.sleep(100)\n"
    runner = subprocess.Popen(
        [sys.executable, "-c", f"from evaltui.scoring.code.sandbox import run_program; run_program({program!r}, timeout=60, tmp_root={str(sandboxes)!r})"]
    )
    deadline = time.monotonic() + 30
    while not list(sandboxes.glob("evaltui-exec-*/started")):
        assert time.monotonic() < deadline, "the sandboxed program never started"
        time.sleep(0.02)
    assert _processes_under(sandboxes)  # the sandbox's processes: its outer, keeper and program
    os.kill(runner.pid, signal.SIGKILL)  # evaltui killed mid-scoring
    runner.wait(timeout=10)
    end = time.monotonic() + 10
    while time.monotonic() < end and _processes_under(sandboxes):
        time.sleep(0.02)
    assert _processes_under(sandboxes) == [], "the sandboxed program outlived its parent"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# RELIABILITY.md §6: what a completion can do to the machine — spawn without bound, write
# outside its directory, keep root's powers — is stopped or contained, and scored as failed.
# ---------------------------------------------------------------------------------------------


def _processes_under(folder) -> list[int]:  # type: ignore[no-untyped-def]
    """Live sandboxed processes whose folder is in `folder`: their working directory is it (each
    is a fork of the sandbox's fork server, whose command line names no sample)."""
    import os

    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if cwd.startswith(f"{folder}/evaltui-exec-") and _running(int(name)):
            found.append(int(name))
    return found


@pytest.mark.reliability
def test_a_fork_bomb_is_bounded_by_the_process_limit_and_dies_with_the_program(tmp_path):
    """Each child sleeps a minute: without RLIMIT_NPROC (or as root, whom the kernel exempts,
    without dropping to nobody) all 400 forks would succeed and the body would pass."""
    import re
    import time

    body = (
        "    import os, time\n"
        "    n = 0\n"
        "    try:\n"
        "        for _ in range(400):\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60)\n"
        "                os._exit(0)\n"
        "            n += 1\n"
        "    except OSError:\n"
        "        raise SystemExit(f'fork refused after {n}')\n"
        "    return x + 1\n"
    )
    result = run_program(PROMPT + body + "\n" + TEST + "\ncheck(inc)\n", timeout=30.0, tmp_root=str(tmp_path))
    m = re.fullmatch(r"failed: fork refused after (\d+)", result)
    assert m is not None, result
    assert int(m.group(1)) < 300  # 64 over what the sandbox user already ran (others' sandboxes may end meanwhile)
    deadline = time.monotonic() + 10
    while _processes_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_under(tmp_path) == []  # the sleeping children went with it


@pytest.mark.reliability
@pytest.mark.parametrize(
    "action",
    [
        "open({target!r}, 'w').write('x')",
        "open({victim!r}, 'a').write('x')",
        "open({victim!r}, 'r+').truncate(0)",
        "os.remove({victim!r})",
        "os.rename({victim!r}, 'stolen.txt')",
        "os.mkdir({outside!r} + '/made')",
        "os.symlink({outside!r}, 'link'); open('link/through-link.txt', 'w').write('x')",
        "os.chdir('..'); open('beside.txt', 'w').write('x')",
    ],
    ids=["create", "append", "truncate", "remove", "move-away", "mkdir", "through-symlink", "parent-dir"],
)
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_a_completion_cannot_write_outside_its_directory(tmp_path, action, namespaces, monkeypatch):
    """Landlock refuses the write (PermissionError); with namespaces, a path under /tmp is not
    even there to write (FileNotFoundError): without them, Landlock alone must refuse it."""
    import os

    monkeypatch.setattr(sandbox, "NAMESPACES", namespaces)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    sandboxes = tmp_path / "sandboxes"
    program = "import os\n" + action.format(target=str(outside / "written.txt"), victim=str(victim), outside=str(outside)) + "\n"
    result = run_program(program, tmp_root=str(sandboxes))
    assert result.startswith(("failed: PermissionError", "failed: FileNotFoundError") if namespaces else "failed: PermissionError"), result
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert not sandboxes.exists() or os.listdir(sandboxes) == []  # and its own folder is gone


@pytest.mark.reliability
def test_a_correct_completion_that_also_writes_outside_is_scored_failed(tmp_path):
    target = tmp_path / "note.txt"
    detail = run_body(f"    open({str(target)!r}, 'w').write('was here')\n    return x + 1\n")
    assert detail["correct"] is False and detail["result"].startswith(("failed: PermissionError", "failed: FileNotFoundError"))
    assert not target.exists()


@pytest.mark.reliability
def test_what_a_careful_completion_does_still_works():
    body = (
        "    import json, math, os, subprocess, tempfile\n"
        "    open('scratch.txt', 'w').write('x')\n"
        "    os.makedirs('sub/deeper', exist_ok=True)\n"
        "    os.rename('scratch.txt', 'sub/moved.txt')\n"
        "    with tempfile.NamedTemporaryFile() as t:\n"
        "        t.write(b'x')\n"
        "    open(os.devnull, 'w').write('discarded')\n"
        "    subprocess.run(['true'], check=True, stdout=subprocess.DEVNULL)\n"
        "    return x + 1\n"
    )
    assert run_body(body)["result"] == PASSED


@pytest.mark.reliability
def test_the_program_holds_no_capabilities_and_is_not_really_root():
    """Started by root (as in many containers and CI runners), the program keeps none of root's
    powers: no capabilities, and a real uid the process limit applies to."""
    body = (
        "    import os\n"
        "    status = open('/proc/self/status').read()\n"
        "    assert 'CapEff:\\t0000000000000000' in status and 'CapPrm:\\t0000000000000000' in status\n"
        "    assert os.getuid() != 0\n"
        "    return x + 1\n"
    )
    assert run_body(body)["result"] == PASSED


@pytest.mark.reliability
def test_the_program_cannot_read_evaltuis_environment_from_proc():
    """The bare environment is not enough: /proc/<evaltui>/environ holds the API keys. The CLI
    makes evaltui non-dumpable for code_exec plans, and the program (even started by root) has
    no capability that would let it read a non-dumpable process's files."""
    import subprocess
    import sys

    program = "import os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read())\n"
    runner = (
        "import os\n"
        "os.environ['EVALTUI_TEST_SECRET'] = 'hunter2'\n"
        "from evaltui.redaction import undumpable\n"
        "undumpable()\n"
        "from evaltui.scoring.code.sandbox import run_program\n"
        f"print(run_program({program!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("failed: PermissionError"), proc.stdout


@pytest.mark.reliability
def test_a_program_cannot_reach_this_machine_over_the_network():
    """No TCP connection, UDP datagram or abstract unix socket reaches a server of this machine:
    a network namespace of its own when started by root, Landlock's TCP rules (Linux ≥ 6.7) and
    unix-socket scope (≥ 6.12) in any case."""
    import os
    import socket

    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    name = f"\0evaltui-test-{os.getpid()}"
    unix.bind(name)
    unix.listen()
    for s in (tcp, udp, unix):
        s.settimeout(0.3)
    attempts = {
        "tcp": f"socket.create_connection(('127.0.0.1', {tcp.getsockname()[1]}), timeout=3).sendall(b'x')",
        "unix": f"s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect({name!r}); s.sendall(b'x')",
    }
    if os.getuid() == 0:  # an ordinary user's program keeps UDP (README, "Evaluators")
        attempts["udp"] = f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp.getsockname()[1]}))"
    try:
        for kind, line in attempts.items():
            result = run_program(f"import socket\n{line}\n", timeout=5)
            assert result.startswith(("failed: PermissionError", "failed: OSError", "failed: ConnectionRefusedError")), (kind, result)
        with pytest.raises(OSError):
            tcp.accept()
        with pytest.raises(OSError):
            unix.accept()
        with pytest.raises(OSError):
            udp.recv(10)
    finally:
        for s in (tcp, udp, unix):
            s.close()


# ---------------------------------------------------------------------------------------------
# The whole sandbox, not each process: memory, processes left behind, sockets at paths, its folder.
# ---------------------------------------------------------------------------------------------

# Four children of 200 MB each (each under the 512 MB per-process limit): 800 MB in all.
FORKED_MEMORY = (
    "import os, time\n"
    "kids = []\n"
    "for _ in range(4):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        block = bytearray(200 * 2**20)\n"
    "        for i in range(0, len(block), 4096):\n"
    "            block[i] = 1\n"
    "        time.sleep(2)\n"
    "        os._exit(0)\n"
    "    kids.append(pid)\n"
    "for pid in kids:\n"
    "    os.waitpid(pid, 0)\n"
)


@pytest.mark.reliability
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-where-possible", "watchdog"])
def test_memory_mb_holds_the_whole_sandbox_not_each_process(tmp_path, monkeypatch, cgroup):
    """Each child stays under RLIMIT_AS; together they are over memory_mb: the sample ends as
    `memory limit`, by the kernel (a memory cgroup) or the watchdog summing the tree's memory."""
    import evaltui.scoring.code.sandbox_watch as watch

    if not cgroup:
        monkeypatch.setattr(watch.MemoryCgroup, "_unavailable", True)
    assert run_program(FORKED_MEMORY, timeout=20, memory_mb=512, tmp_root=str(tmp_path)) == MEMORY_LIMIT
    assert _processes_under(tmp_path) == []


@pytest.mark.reliability
@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_daemon_the_program_leaves_behind_dies_with_the_sample(tmp_path, monkeypatch, namespaces):
    """fork, setsid, fork again, sleep: reparented to PID 1 it outlived the sample and evaltui."""
    monkeypatch.setattr(sandbox, "NAMESPACES", namespaces)
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    )
    assert run_program(daemon, timeout=20, tmp_root=str(tmp_path)) == PASSED  # and then nothing of it is left
    assert _processes_under(tmp_path) == []


@pytest.mark.reliability
def test_a_program_cannot_reach_a_unix_socket_at_a_path():
    """An ssh-agent's, D-Bus's or docker's socket is a file anyone its mode lets write may connect
    to; Landlock has no rule for that (ABI 7), so the sandbox hides the folders they live in."""
    import os
    import socket
    import tempfile

    folder = tempfile.mkdtemp(prefix="evaltui-socket-test-")  # under /tmp, like ssh-agent's
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "agent.sock")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(path)
        os.chmod(path, 0o777)
        server.listen()
        server.settimeout(0.3)
        line = f"import socket\ns = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect({path!r}); s.sendall(b'x')\n"
        result = run_program(line, timeout=5)
        assert result.startswith(("failed: FileNotFoundError", "failed: PermissionError")), result
        with pytest.raises(OSError):
            server.accept()
    finally:
        server.close()
        os.unlink(path)
        os.rmdir(folder)


@pytest.mark.reliability
def test_the_programs_folder_is_held_to_its_limit(tmp_path):
    """Each file stops at 16 MiB (RLIMIT_FSIZE); six of 15 MiB would fill 90 MiB of the work dir's disk."""
    from evaltui.scoring.code.sandbox import FOLDER_FULL

    fill = "for n in range(6):\n    with open(f'fill{n}', 'wb') as f:\n        f.write(bytes(15 * 2**20))\nimport time\ntime.sleep(5)\n"
    assert run_program(fill, timeout=20, tmp_root=str(tmp_path)) == FOLDER_FULL
    assert _processes_under(tmp_path) == [] and list(tmp_path.iterdir()) == []


@pytest.mark.reliability
def test_a_sample_forked_by_the_fork_server_holds_nothing_of_the_server_or_other_samples(tmp_path):
    """Each sample is a fork of one warm interpreter: it must not inherit the server's socket, its
    network namespace's handle, nor another sample's files — only its own stdin, stdout, stderr."""
    import threading

    body = (
        "    import os\n"
        "    fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\n"
        "    if fds[:3] != [0, 1, 2] or len(fds) > 4:\n"  # (the listing's own fd is the fourth)
        "        raise SystemExit(f'fds {fds}')\n"
        "    return x + 1\n"
    )
    program = PROMPT + body + "\n" + TEST + "\ncheck(inc)\n"
    slow = "import time\ntime.sleep(3)\n"
    results: list[str] = []
    other = threading.Thread(target=lambda: results.append(run_program(slow, timeout=10, tmp_root=str(tmp_path))))
    other.start()  # another sample running meanwhile, its files open in the server's process
    try:
        assert run_program(program, timeout=10, tmp_root=str(tmp_path)) == PASSED
    finally:
        other.join(timeout=30)
    assert results == [PASSED]
