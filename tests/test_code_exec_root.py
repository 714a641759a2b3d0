"""The code_exec sandbox when evaltui runs as root (README "Evaluators", RELIABILITY.md §6).

The sandbox modules need only the standard library, so these tests load them into other
interpreters by path: the system's, which `nobody` can read (so the program runs wholly as
nobody), and ours with a capability removed (so giving up root fails and must be said).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import evaltui.scoring.code.sandbox as sandbox

pytestmark = [pytest.mark.reliability, pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="root on Linux only")]

SYSTEM_PYTHON = "/usr/bin/python3"


def sandbox_loader() -> str:
    """Python that imports evaltui.scoring.code.sandbox from this checkout without the packages'
    __init__ files (which need evaltui's dependencies): only the standard library is needed."""
    code = os.path.dirname(sandbox.__file__)
    scoring = os.path.dirname(code)
    package = os.path.dirname(scoring)
    return (
        "import sys, types\n"
        f"for name, path in (('evaltui', {package!r}), ('evaltui.scoring', {scoring!r}), ('evaltui.scoring.code', {code!r})):\n"
        "    sys.modules[name] = types.ModuleType(name); sys.modules[name].__path__ = [path]\n"
        "import evaltui.scoring.code.sandbox as mod\n"
    )


def run_in(python: str, program: str, tmp_root: str, before: str = "", after: str = "") -> str:
    runner = before + sandbox_loader() + after + f"print(mod.run_program({program!r}, timeout=20, tmp_root={tmp_root!r}))\n"
    proc = subprocess.run([python, "-I", "-c", runner], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def open_dir() -> str:
    """A scratch root nobody can reach (pytest's own tmp dirs are private to root)."""
    with tempfile.TemporaryDirectory(prefix="evaltui-root-test-") as d:
        os.chmod(d, 0o755)
        yield d


WHOLLY_NOBODY = (
    "import os\n"
    "assert os.getresuid() == (65534, 65534, 65534), os.getresuid()\n"
    "try:\n"
    "    os.setresuid(0, 0, 0)\n"
    "except PermissionError:\n"
    "    pass\n"
    "else:\n"
    "    raise AssertionError('took root back')\n"
    "try:\n"
    "    open({secret!r}).read()\n"
    "except PermissionError:\n"
    "    pass\n"
    "else:\n"
    "    raise AssertionError('read a root-only file')\n"
    "open('scratch.txt', 'w').write('its own folder is writable')\n"
)


@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason="no system python")
def test_with_an_interpreter_nobody_can_read_the_program_is_wholly_nobody(open_dir: str) -> None:
    """Without namespaces (as in a container that refuses them), so the root-only file made
    here stays in sight."""
    secret = Path(open_dir) / "root-only.txt"
    secret.write_text("root's")
    secret.chmod(0o600)
    program = WHOLLY_NOBODY.format(secret=str(secret))
    assert run_in(SYSTEM_PYTHON, program, open_dir, after="mod.NAMESPACES = False\n") == sandbox.PASSED


@pytest.mark.skipif(not os.path.exists("/etc/shadow"), reason="no root-only /etc/shadow to read")
def test_in_its_own_namespaces_the_program_is_wholly_nobody_even_with_an_interpreter_under_root(open_dir: str) -> None:
    """The mount namespace puts the interpreter's libraries back under an empty /root (and /tmp)
    that nobody may cross, so even this checkout's interpreter (under /root here) needs no
    effective root: the partial drop of the module's doc is left for kernels without namespaces."""
    assert run_in(sys.executable, WHOLLY_NOBODY.format(secret="/etc/shadow"), open_dir) == sandbox.PASSED


def test_when_root_cannot_be_given_up_the_program_does_not_run_and_the_sample_says_why(open_dir: str) -> None:
    marker = Path(open_dir) / "ran"
    drop_setpcap = "import ctypes\nassert ctypes.CDLL(None).prctl(24, 8, 0, 0, 0) == 0\n"  # PR_CAPBSET_DROP CAP_SETPCAP
    result = run_in(sys.executable, f"open({str(marker)!r}, 'w')\n", open_dir, before=drop_setpcap)
    assert result.startswith("failed: EvaltuiSandboxError: the sandbox could not give up root"), result
    assert not marker.exists()
