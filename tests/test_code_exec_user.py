"""The code_exec sandbox when evaltui runs as an ordinary user (README "Evaluators").

Run from root (the tests give up root for an unused uid), with the system's interpreter loading
the sandbox from this checkout by path (see tests/test_code_exec_root.py). An ordinary user
cannot make PID, mount and network namespaces directly, but can inside a user namespace of its
own where the kernel allows one: then a daemon dies with its sample, the folders that hold
unix sockets are hidden, 127.0.0.1 is unreachable by UDP too, and the process limit counts only
the sandbox's own processes. Without one (skipped here, with the reason) the subreaper still
kills what the program leaves behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_code_exec_root import SYSTEM_PYTHON, sandbox_loader
from test_code_exec_sandbox import FORKED_MEMORY

from evaltui.scoring.code.sandbox import MEMORY_LIMIT, PASSED
from evaltui.scoring.code.sandbox_child import CLONE_NEWUSER, EXTRA_PROCESSES

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="root on Linux only (to become an ordinary user)"),
    pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason="no system python an ordinary user can run"),
]

USER = 61_234  # no account's: nothing else runs as it


def _become_user() -> None:
    os.setgroups([])
    os.setresgid(USER, USER, USER)
    os.setresuid(USER, USER, USER)


def _user_namespaces_allowed() -> bool:
    """Whether an ordinary user may make a user namespace here (a child tries, as USER)."""
    pid = os.fork()
    if pid == 0:
        try:
            _become_user()
            os._exit(0 if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) == 0 else 1)
        except BaseException:
            os._exit(2)
    return os.waitpid(pid, 0)[1] == 0


needs_user_namespaces = pytest.mark.skipif(not _user_namespaces_allowed(), reason="the kernel lets no ordinary user make a user namespace")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="evaltui-user-test-") as d:
        os.chmod(d, 0o755)
        os.chown(d, USER, USER)
        yield Path(d)


def run_as_user(programs: dict[str, str], folder: Path) -> dict[str, str]:
    """Each program's result, each run by run_program in an interpreter of USER's."""
    runner = sandbox_loader() + (
        "import json, sys\n"
        f"programs = json.loads({json.dumps(programs)!r})\n"
        f"print(json.dumps({{k: mod.run_program(p, timeout=10, memory_mb=512, tmp_root={str(folder / 'sb')!r}) for k, p in programs.items()}}))\n"
    )
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(folder), "TMPDIR": str(folder)}
    proc = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", runner], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, env=env, cwd=folder, preexec_fn=_become_user,
    )
    assert proc.returncode == 0, proc.stderr
    results: dict[str, str] = json.loads(proc.stdout)
    return results


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                status = Path(f"/proc/{name}/status").read_text()
            except OSError:
                continue
            if f"\nUid:\t{uid}\t" in status and "State:\tZ" not in status:
                found.append(int(name))
    return found


def test_what_the_program_leaves_behind_dies_with_the_sample(open_dir: Path) -> None:
    """With or without namespaces: a daemon dies (PID namespace, else the subreaper's kill)."""
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n    os._exit(0)\ntime.sleep(0.2)\n"
    assert run_as_user({"daemon": daemon}, open_dir) == {"daemon": PASSED}
    assert _processes_of(USER) == []


@needs_user_namespaces
def test_in_a_user_namespace_sockets_udp_and_the_process_count_are_the_sandboxs_own(open_dir: Path) -> None:
    sock_path = str(open_dir / "agent.sock")  # under /tmp, as an ssh-agent's is
    server = socket.socket(socket.AF_UNIX)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        server.bind(sock_path)
        os.chmod(sock_path, 0o777)
        server.listen()
        server.settimeout(0.3)
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.3)
        programs = {
            "unix": f"import socket\ns = socket.socket(socket.AF_UNIX); s.connect({sock_path!r}); s.sendall(b'x')\n",
            "udp": f"import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp.getsockname()[1]}))\n",
            "forks": (
                "import os, time\nn = 0\ntry:\n    for _ in range(400):\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n"
                "        n += 1\nexcept OSError:\n    raise SystemExit(f'fork refused after {n}')\n"
            ),
            "memory": FORKED_MEMORY,
            "capabilities": "raise SystemExit(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n",
        }
        results = run_as_user(programs, open_dir)
        with pytest.raises(OSError):
            server.accept()
        with pytest.raises(OSError):
            udp.recv(10)
    finally:
        server.close()
        udp.close()
    assert results["unix"].startswith(("failed: FileNotFoundError", "failed: PermissionError")), results
    assert results["udp"].startswith("failed: OSError: [Errno 101]"), results  # Network is unreachable
    assert results["forks"] == f"failed: fork refused after {EXTRA_PROCESSES}", results
    assert results["memory"] == MEMORY_LIMIT, results  # an ordinary user has no cgroup: the watchdog
    assert results["capabilities"] == "failed: 0000000000000000", results
    assert _processes_of(USER) == []
