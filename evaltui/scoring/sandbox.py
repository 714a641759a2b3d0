"""Run one untrusted Python program and say how it ended.

The program is model-written, so it runs in a child interpreter that:
- starts with `-I -B` (no user site, no PYTHON* variables, no cwd on sys.path, no .pyc) in a
  fresh temporary directory, its cwd, HOME and TMPDIR, removed afterwards;
- gets a bare environment, never the parent's, so API keys cannot leak into it;
- has resource limits on address space, CPU time, file size and core dumps;
- leads its own session, so a wall-clock timeout kills it with everything it spawned;
- writes stdout/stderr into unlinked temporary files, so flooding output cannot fill a pipe
  and hang us, nor our memory (the file-size limit ends a flood);
- must print a random sentinel after the tests, so `sys.exit(0)` / `os._exit(0)` before or
  during the tests is not a pass.
The limits are set by a short bootstrap run inside the child before the program rather than by
`preexec_fn`: Python documents `preexec_fn` as unsafe in a threaded process (the child can
deadlock before exec), and samples are started from a thread pool inside a threaded app.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
from typing import IO

FSIZE_LIMIT = 16 * 2**20
_TAIL_BYTES = 64 * 1024
_PROGRAM_NAME = "program.py"

# Runs in the child before the program: limits first, then the program as __main__.
# soft == hard, so the program cannot raise them again.
_BOOTSTRAP = """\
import resource, runpy, sys
for _name, _value in ((\"RLIMIT_AS\", {as_bytes}), (\"RLIMIT_CPU\", {cpu_s}),
                      (\"RLIMIT_FSIZE\", {fsize}), (\"RLIMIT_CORE\", 0)):
    _res = getattr(resource, _name, None)
    if _res is not None:
        resource.setrlimit(_res, (_value, _value))
_path = sys.argv[1]
del resource, _name, _value, _res
sys.argv = [_path]
runpy.run_path(_path, run_name="__main__")
"""

PASSED = "passed"
TIMED_OUT = "timed out"
MEMORY_LIMIT = "memory limit"
OUTPUT_LIMIT = "failed: output limit exceeded"


def _sandbox_env(home: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": home,
        "TMPDIR": home,
    }


def _size(f: IO[bytes]) -> int:
    return os.fstat(f.fileno()).st_size


def _tail(f: IO[bytes]) -> str:
    f.seek(max(0, _size(f) - _TAIL_BYTES))
    return f.read().decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _verdict(returncode: int, stdout: str, stderr: str, sentinel: str, *, flooded: bool = False) -> str:
    if returncode == 0 and sentinel in stdout:
        return PASSED
    if flooded:
        return OUTPUT_LIMIT
    if returncode < 0:
        sig = -returncode
        if sig == getattr(signal, "SIGXCPU", None):
            return TIMED_OUT
        if sig == getattr(signal, "SIGXFSZ", None):
            return OUTPUT_LIMIT
        return f"failed: killed by {_signal_name(sig)}"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if last.startswith("MemoryError"):
        return MEMORY_LIMIT
    if returncode == 0:
        return "failed: exited before the tests finished"
    if last:
        return f"failed: {last[:300]}"
    return f"failed: exit code {returncode}"


def run_program(source: str, *, timeout: float = 10.0, memory_mb: int = 1024) -> str:
    """`passed`, `timed out`, `memory limit` or `failed: <why>` for one program."""
    sentinel = "EVALTUI-PASSED-" + secrets.token_hex(16)
    source = source + f"\n__import__('sys').stdout.flush()\n__import__('os').write(1, b'\\n{sentinel}\\n')\n"
    bootstrap = _BOOTSTRAP.format(
        as_bytes=int(memory_mb) * 2**20,
        cpu_s=max(1, int(timeout) + 1),
        fsize=FSIZE_LIMIT,
    )
    with tempfile.TemporaryDirectory(prefix="evaltui-exec-", ignore_cleanup_errors=True) as home, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        path = os.path.join(home, _PROGRAM_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", bootstrap, path],
                cwd=home,
                env=_sandbox_env(home),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return f"failed: could not start the interpreter: {exc}"
        try:
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
                return TIMED_OUT
        finally:
            _kill_group(proc)  # whatever it left running in the background
        flooded = max(_size(out), _size(err)) >= FSIZE_LIMIT
        return _verdict(returncode, _tail(out), _tail(err), sentinel, flooded=flooded)
