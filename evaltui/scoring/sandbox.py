"""Run one untrusted Python program and say how it ended.

The program is model-written, so it runs in a child interpreter that:
- starts with `-I -B` (no user site, no PYTHON* variables, no cwd on sys.path, no .pyc) in a
  fresh temporary directory, its cwd, HOME and TMPDIR, removed afterwards;
- gets a bare environment, never the parent's, so API keys cannot leak into it;
- has resource limits on address space, CPU time, file size and core dumps;
- leads its own session, so a wall-clock timeout kills it with everything it spawned;
- writes stdout/stderr into unlinked temporary files, so flooding output cannot fill a pipe
  and hang us, nor our memory (the file-size limit ends a flood);
- must get through the tests for its bootstrap to print a random token it received over a pipe
  (not in the program file), so `sys.exit(0)` / `os._exit(0)` before or during the tests, or a
  program printing its own file, is not a pass;
- dies with evaltui (PR_SET_PDEATHSIG), and cannot fork without bound (RLIMIT_NPROC): the kernel
  does not apply that limit to root, so under root the child first gives up every capability
  and its groups, and becomes `nobody` — wholly when nobody can read the interpreter's
  libraries; else only its real uid (which the limit counts), keeping effective uid 0 so an
  interpreter under a private /root can still import. That partial drop does not contain a
  program that means harm: it can read root's private files and set its real uid back to 0.
  If root cannot be given up at all, the program does not run (EvaltuiSandboxError);
- can create, write, truncate, rename or delete files only inside its directory (Landlock,
  Linux ≥ 5.13; where the kernel lacks it, it can write what the user can write);
- cannot reach the network, this machine's 127.0.0.1 included: started by root, it gets a
  network namespace of its own with nothing in it; Landlock (Linux ≥ 6.7) refuses it TCP
  connections and binds in any case (so for an ordinary user, only UDP remains open);
- cannot signal any process outside its sandbox — evaltui, the user's shell — nor reach an
  abstract unix socket outside it (Landlock scopes, Linux ≥ 6.12): it can only kill itself and
  its own children. On older kernels a program running as the same user can kill evaltui.
It contains accidents and careless code, not a determined adversary: code in the same
interpreter as the bootstrap can find the token by walking frames, and a process that leaves
the session (setsid) escapes the wall-clock kill (not the CPU limit). Run untrusted models'
code in a container.
The limits are set by a short bootstrap run inside the child before the program rather than by
`preexec_fn`: Python documents `preexec_fn` as unsafe in a threaded process (the child can
deadlock before exec), and samples are started from a thread pool inside a threaded app.
"""

from __future__ import annotations

import contextlib
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

# Runs in the child before the program: ties it to its parent, sets limits, reads the pass token
# from an inherited pipe (so it is not in the program file for the program to print), runs the
# program as __main__ — its last line calls the tests — and prints the token only if that
# returned. soft == hard, so the program cannot raise its limits again.
_BOOTSTRAP = """\
import contextlib, os, resource, runpy, sys
def _unroot(libc, ctypes, program):
    # RLIMIT_NPROC binds no process whose real uid is root or that holds CAP_SYS_ADMIN or
    # CAP_SYS_RESOURCE: take nobody's ids, then drop every capability for good (SECBIT_NOROOT,
    # locked: an exec cannot give them back). Wholly nobody when nobody can read the interpreter,
    # its libraries and the program; else real uid nobody, effective root (see the module doc).
    if libc.prctl(28, 3, 0, 0, 0) != 0:  # PR_SET_SECUREBITS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS) refused")
    os.setgroups([])
    os.setresgid({nobody}, {nobody}, {nobody})
    libraries = [d for d in sys.path if d and os.path.exists(d)]  # looked up as root: nobody may not see them
    os.setresuid({nobody}, {nobody}, 0)  # a trial, undone below: the saved uid is still root
    readable = all(os.access(d, os.R_OK, effective_ids=True) for d in libraries)
    home = os.path.dirname(program)  # root's own (0700) until given to nobody below: its parent must be reachable
    readable = readable and os.access(os.path.dirname(home), os.X_OK, effective_ids=True)
    os.setresuid({nobody}, 0, 0)
    if readable:
        os.chown(home, {nobody}, {nobody})
        os.chown(program, {nobody}, {nobody})
        os.setresuid({nobody}, {nobody}, {nobody})
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    libc.capset(header, (ctypes.c_uint32 * 6)())
def _isolate_network(libc):
    # As root, before giving it up: a network namespace of its own, where nothing is reachable
    # (not this machine's 127.0.0.1 either, TCP, UDP or abstract unix sockets). Where it is
    # refused (a container without CAP_SYS_ADMIN), Landlock below still stops TCP.
    libc.unshare(0x40000000)  # CLONE_NEWNET
def _confine(libc, ctypes, home):
    # Landlock: creating, writing, truncating, renaming and removing files only beneath `home`
    # (and writing /dev/null); reading stays free. ABI 4 (Linux 6.7): no TCP bind or connect.
    # ABI 6 (Linux 6.12): no signal to a process outside the sandbox (evaltui, the user's
    # shell), no abstract unix socket outside it. Without it in the kernel: nothing to do.
    call = libc.syscall
    call.restype = ctypes.c_long
    L = ctypes.c_long
    abi = call(L(444), None, L(0), L(1))  # landlock_create_ruleset(NULL, 0, VERSION)
    if abi < 1:
        return
    rights = 0x1ff2 | (0x2000 if abi >= 2 else 0) | (0x4000 if abi >= 3 else 0)
    # handled_access_fs, handled_access_net (bind, connect TCP), scoped (abstract unix, signal)
    fields = [rights] + ([0x3] if abi >= 4 else []) + ([0x3] if abi >= 6 else [])
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = call(L(444), ctypes.byref(attr), L(8 * len(fields)), L(0))
    if ruleset < 0:
        return
    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [(\"allowed\", ctypes.c_uint64), (\"parent_fd\", ctypes.c_int32)]
    for path, allowed in ((home, rights), (os.devnull, 0x2 | (rights & 0x4000))):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        call(L(445), L(ruleset), L(1), ctypes.byref(Beneath(allowed, fd)), L(0))
        os.close(fd)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, which landlock_restrict_self requires
    call(L(446), L(ruleset), L(0))
    os.close(ruleset)
def _prepare(parent, token_fd, program):
    home = os.path.dirname(program)
    if sys.platform.startswith("linux"):
        import ctypes, signal
        libc = ctypes.CDLL(None, use_errno=True)
        if os.getuid() == 0:
            with contextlib.suppress(OSError, AttributeError):
                _isolate_network(libc)
            try:
                _unroot(libc, ctypes, program)
            except (OSError, AttributeError) as e:  # model code never runs as full root
                os.write(2, ("EvaltuiSandboxError: the sandbox could not give up root (%s); run evaltui as an ordinary user\\n" % e).encode())
                os._exit(71)
        with contextlib.suppress(OSError, AttributeError):  # no prctl: the wall-clock kill remains
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with evaltui
        if os.getppid() != parent:
            os._exit(70)
        with contextlib.suppress(OSError, AttributeError):  # no Landlock: writes are not confined
            _confine(libc, ctypes, home)
    limits = [(\"RLIMIT_AS\", {as_bytes}), (\"RLIMIT_CPU\", {cpu_s}), (\"RLIMIT_FSIZE\", {fsize}), (\"RLIMIT_CORE\", 0)]
    if os.getuid() != 0:  # root ignores it (when it could not become nobody); for others it stops fork bombs
        limits.append((\"RLIMIT_NPROC\", {nproc}))
    for name, value in limits:
        res = getattr(resource, name, None)
        if res is not None:
            with contextlib.suppress(ValueError, OSError):  # a limit the platform lacks
                resource.setrlimit(res, (value, value))
    token = os.read(token_fd, 256)
    os.close(token_fd)
    return token
def _run(path, token):
    sys.argv = [path]
    runpy.run_path(path, run_name="__main__")
    sys.stdout.flush()
    os.write(1, b"\\n" + token + b"\\n")
_run(sys.argv[1], _prepare(int(sys.argv[2]), int(sys.argv[3]), sys.argv[1]))
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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)


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


NOBODY = 65534  # the real uid a sandbox started by root runs under


def _user_processes(uid: int) -> int:
    """How many processes the user `uid` runs now (the base of the sandbox's process limit)."""
    uid_text = str(uid)
    count = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 1024
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status", "rb") as f:
                    for line in f:
                        if line.startswith(b"Uid:"):
                            count += line.split()[1].decode() == uid_text
                            break
            except OSError:
                continue
    return count


def run_program(source: str, *, timeout: float = 10.0, memory_mb: int = 1024, tmp_root: str | None = None) -> str:
    """`passed`, `timed out`, `memory limit` or `failed: <why>` for one program.

    `tmp_root`: where the program's temporary directory goes (default: the system's), so a
    run killed mid-scoring leaves its leftovers where the next run can clear them.
    """
    sentinel = "EVALTUI-PASSED-" + secrets.token_hex(16)
    bootstrap = _BOOTSTRAP.format(
        as_bytes=int(memory_mb) * 2**20,
        cpu_s=max(1, int(timeout) + 1),
        fsize=FSIZE_LIMIT,
        nproc=_user_processes(os.getuid() or NOBODY) + 64,
        nobody=NOBODY,
    )
    if tmp_root is not None:
        os.makedirs(tmp_root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evaltui-exec-", dir=tmp_root, ignore_cleanup_errors=True) as home, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        path = os.path.join(home, _PROGRAM_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        token_read, token_write = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", bootstrap, path, str(os.getpid()), str(token_read)],
                cwd=home,
                env=_sandbox_env(home),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
                pass_fds=(token_read,),
            )
        except OSError as exc:
            os.close(token_write)
            return f"failed: could not start the interpreter: {exc}"
        finally:
            os.close(token_read)
        try:
            with contextlib.suppress(OSError):  # it is already gone; its exit status says why
                os.write(token_write, sentinel.encode())
        finally:
            os.close(token_write)
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
