"""Run one untrusted Python program and say how it ended.

The program is model-written, so it runs in a child process (`sandbox_child`, which says how
the sandbox is built from inside), forked by the fork server (`sandbox_server`, `forkserver`:
one warm interpreter per evaltui process, so a sample does not pay an interpreter's start), that:
- runs in an interpreter started with `-I -B` (no user site, no PYTHON* variables, no cwd on
  sys.path, no .pyc), in a fresh temporary directory, its cwd, HOME and TMPDIR, removed afterwards;
- gets a bare environment, never the parent's, so API keys cannot leak into it;
- has resource limits on address space, CPU time, file size and core dumps per process, and
  the whole sandbox — every process it starts — is held to `memory_mb` together (a memory
  cgroup where evaltui can make one, else a watchdog here summing the tree's proportional set
  sizes every 50 ms) and its folder to FOLDER_LIMIT (`sandbox_watch`);
- writes stdout/stderr into unlinked temporary files, so flooding output cannot fill a pipe
  and hang us, nor our memory (the file-size limit ends a flood);
- must get through the tests for its bootstrap to print a random token it received over a pipe
  (not in the program file), so `sys.exit(0)` / `os._exit(0)` before or during the tests, or a
  program printing its own file, is not a pass;
- dies with evaltui (PR_SET_PDEATHSIG), and nothing it starts outlives the sample: in a PID
  namespace of its own (root; an ordinary user inside a user namespace, where the kernel allows
  one) the kernel kills all of it when the sample ends, daemons that left the session included;
  elsewhere a subreaper gets what it orphans and kills it;
- cannot fork without bound (RLIMIT_NPROC, EXTRA_PROCESSES more than were running): the kernel
  does not apply that limit to root, so under root the child first gives up every capability
  and its groups, and becomes `nobody` — wholly when nobody can read the interpreter's
  libraries (always in a mount namespace of its own, which puts them back under an empty /root);
  else only its real uid (which the limit counts), keeping effective uid 0 so an interpreter
  under a private /root can still import. That partial drop does not contain a program that
  means harm: it can read root's private files and set its real uid back to 0. If root cannot
  be given up at all, the program does not run (EvaltuiSandboxError);
- in a mount namespace of its own, finds /tmp, /var/tmp, /run, /dev/shm, /home, /root and
  /var/lib empty (its own folder and the interpreter's libraries put back): the unix sockets
  there (ssh-agent, D-Bus, docker.sock) and the users' files are out of its reach;
- can create, write, truncate, rename or delete files only inside its directory (Landlock,
  Linux ≥ 5.13; where the kernel lacks it, it can write what the user can write);
- cannot reach the network, this machine's 127.0.0.1 included: in namespaces of its own it has
  a network namespace with nothing in it (root: one the fork server made once, for all its
  samples; a user: its own); Landlock (Linux ≥ 6.7) refuses it TCP connections and
  binds in any case (so without namespaces, only UDP remains open);
- cannot signal any process outside its sandbox — evaltui, the user's shell — nor reach an
  abstract unix socket outside it (Landlock scopes, Linux ≥ 6.12): it can only kill itself and
  its own children. On older kernels a program running as the same user can kill evaltui.
It contains accidents and careless code, not a determined adversary: code in the same
interpreter as the bootstrap can find the token by walking frames, and a unix socket outside
the hidden folders stays reachable. Run untrusted models' code in a container.
The limits are set inside the child before the program rather than by `preexec_fn`: Python
documents `preexec_fn` as unsafe in a threaded process (the child can deadlock before exec),
and samples are started from a thread pool inside a threaded app.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import tempfile
import time
from typing import IO

from evaltui.scoring.code.forkserver import ForkServer, Sandbox
from evaltui.scoring.code.sandbox_child import EXTRA_PROCESSES, descendants
from evaltui.scoring.code.sandbox_watch import FOLDER_LIMIT, POLL, MemoryCgroup, folder_bytes, tree_memory

FSIZE_LIMIT = 16 * 2**20
_TAIL_BYTES = 64 * 1024
_PROGRAM_NAME = "program.py"
#: Whether the sandbox makes namespaces of its own where the kernel allows (tests turn it off to
#: check what still holds where the kernel refuses them, as in a container).
NAMESPACES = True

PASSED = "passed"
TIMED_OUT = "timed out"
MEMORY_LIMIT = "memory limit"
OUTPUT_LIMIT = "failed: output limit exceeded"
FOLDER_FULL = f"failed: its folder grew past {FOLDER_LIMIT // 2**20} MiB"


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


def _end(proc: Sandbox) -> None:
    """Kill the sandbox: every process below the outer (the keeper among them, whose end kills the
    rest; outside a PID namespace the outer, a subreaper, kills what is left), then the outer
    should it linger. Called only before the outer is reaped, so its number is still its own."""
    for pid in descendants(proc.pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if proc.wait(timeout=1.0) is None:
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _watch(proc: Sandbox, home: str, *, timeout: float, memory: int, cgroup: MemoryCgroup | None) -> str | None:
    """Wait for the sandbox to end; the verdict when it had to be ended: its time, its memory (all
    its processes together, where no cgroup holds them) or its folder's size ran out."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.wait(timeout=max(0.0, min(POLL, deadline - time.monotonic()))) is not None:
            return None
        if time.monotonic() >= deadline:
            verdict = TIMED_OUT
        elif cgroup.oom_killed() if cgroup is not None else tree_memory(proc.pid) > memory:
            verdict = MEMORY_LIMIT  # (the kernel's OOM killer took one process: the sandbox goes whole)
        elif folder_bytes(home, FOLDER_LIMIT) > FOLDER_LIMIT:
            verdict = FOLDER_FULL
        else:
            continue
        _end(proc)
        return verdict


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_NOT_THE_EXCEPTION = ("Traceback (most recent call last):", "During handling of the above exception", "The above exception was the direct cause")


def _exception_line(stderr: str) -> str:
    """The line a traceback ends with, the exception: stderr's last line that is not indented (a
    traceback's File, code and caret lines are) nor a traceback's own heading. A fork bomb's
    children write their tracebacks into one stderr, which can end with another's heading."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if not line[0].isspace() and not line.startswith(_NOT_THE_EXCEPTION):
            return line
    return lines[-1].strip() if lines else ""


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
    last = _exception_line(stderr)
    if last.startswith("MemoryError"):
        return MEMORY_LIMIT
    if returncode == 0:
        return "failed: exited before the tests finished"
    if last:
        return f"failed: {last[:300]}"
    return f"failed: exit code {returncode}"


NOBODY = 65534  # the real uid a sandbox started by root runs under


def _user_processes(uid: int) -> int:
    """How many processes the user `uid` runs now (the base of the sandbox's process limit): the
    real uid on each /proc/<pid>/status's Uid line, read raw (reading them line by line cost ~5 ms
    a sample, a fifth of one)."""
    marker = b"\nUid:\t%d\t" % uid
    count = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 1024
    for name in names:
        if name.isdigit():
            try:
                fd = os.open(f"/proc/{name}/status", os.O_RDONLY)
            except OSError:
                continue
            try:
                count += marker in os.read(fd, 1024)
            except OSError:
                pass
            finally:
                os.close(fd)
    return count


def run_program(source: str, *, timeout: float = 10.0, memory_mb: int = 1024, tmp_root: str | None = None) -> str:
    """`passed`, `timed out`, `memory limit` or `failed: <why>` for one program.

    `tmp_root`: where the program's temporary directory goes (default: the system's), so a
    run killed mid-scoring leaves its leftovers where the next run can clear them.
    """
    sentinel = "EVALTUI-PASSED-" + secrets.token_hex(16)
    if tmp_root is not None:
        os.makedirs(tmp_root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evaltui-exec-", dir=tmp_root, ignore_cleanup_errors=True) as home, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        path = os.path.join(home, _PROGRAM_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        settings = {
            "program": path,
            "as_bytes": int(memory_mb) * 2**20,
            "cpu_s": max(1, int(timeout) + 1),
            "fsize": FSIZE_LIMIT,
            "nproc": _user_processes(os.getuid() or NOBODY) + EXTRA_PROCESSES,
            "nobody": NOBODY,
            "namespaces": int(NAMESPACES),
        }
        try:
            proc, token_write = ForkServer.spawn(home, _sandbox_env(home), [f"{k}={v}" for k, v in settings.items()], out.fileno(), err.fileno())
        except OSError as exc:
            return f"failed: could not start the interpreter: {exc}"
        cgroup = MemoryCgroup.make(int(memory_mb) * 2**20)
        try:
            if cgroup is not None and not cgroup.add(proc.pid):
                cgroup.close()
                cgroup = None
            with contextlib.suppress(OSError):  # it is already gone; its exit status says why
                os.write(token_write, sentinel.encode())  # the go: the sandbox is in its cgroup
            os.close(token_write)
            ended = _watch(proc, home, timeout=timeout, memory=int(memory_mb) * 2**20, cgroup=cgroup)
            if ended is None and cgroup is not None and cgroup.oom_killed():
                ended = MEMORY_LIMIT
        finally:
            if proc.returncode is None:
                _end(proc)
            if cgroup is not None:
                cgroup.close()
        if ended is not None:
            return ended
        flooded = max(_size(out), _size(err)) >= FSIZE_LIMIT
        assert proc.returncode is not None
        return _verdict(proc.returncode, _tail(out), _tail(err), sentinel, flooded=flooded)
