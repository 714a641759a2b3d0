"""The sandbox from inside: `main(["sandbox_child", "name=value", ...])`, called in a fork of the
fork server (`sandbox_server`, an interpreter started `python -I -B` for `sandbox.run_program`),
which then runs the model's program. Standard library only, and nothing of evaltui is imported
(`-I` keeps evaltui off sys.path).

On Linux it makes this tree of processes:

    evaltui ── fork server ── outer ── keeper ── the program ── whatever the program starts

- the outer (the server's fork) dies with the server, which ends with evaltui, waits for the go (the pass token,
  sent once evaltui has put it in the sandbox's memory cgroup), makes the namespaces, and ends
  as the program ended (the same exit code, or killed by the same signal);
- the keeper is PID 1 of a PID namespace of the sandbox's own where one can be made (root can;
  an ordinary user can inside a user namespace of its own, where the kernel allows one): when
  it ends, the kernel kills every process left in the namespace, daemons that left the session
  included. Where none can be made the outer itself keeps, as a child subreaper (what the
  program orphans comes to it, not to PID 1), and kills what is left when the program ends. In
  its mount namespace the keeper hides, under empty tmpfs, the folders where unix sockets and
  private files live (/tmp, /run, /home, ...), putting back only the program's folder and the
  interpreter's libraries;
- the program leads a session of its own, gives up root (or, in a user namespace, its
  capabilities), is confined by Landlock, gets its resource limits, and runs the model's code.

The keeper and the outer run no model code and are outside the program's Landlock domain, so
the program cannot signal them (Landlock ABI 6; a PID namespace's init ignores its members'
signals anyway).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import resource
import runpy
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (mypy takes it as true)
    from typing import Any, NoReturn

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000, 0x2
PR_SET_PDEATHSIG, PR_SET_SECUREBITS, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 28, 36, 38
#: Where unix sockets (ssh-agent, D-Bus, docker.sock, X11, tmux) and private files live: each is
#: covered by an empty tmpfs in the sandbox's mount namespace.
HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/home", "/root", "/var/lib")
#: Processes (threads count as processes) the program may add to those running: HumanEval's
#: programs need none; a subprocess or a thread pool of a few is allowed.
EXTRA_PROCESSES = 16
_HIDDEN_TMPFS = b"size=64k,nr_inodes=1024,mode=755"


class SandboxError(Exception):
    """The sandbox could not be set up as promised: the program must not run."""


def main(argv: list[str]) -> NoReturn:
    settings = dict(arg.split("=", 1) for arg in argv[1:])
    parent = int(settings["parent"])
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    _tie_to_parent(libc, parent)
    token = _read_token(int(settings["token_fd"]))
    net = int(settings.get("net_fd", "-1"))  # the fork server's empty network namespace (root only)
    namespaces = _namespaces(libc, net) if libc is not None and settings["namespaces"] == "1" else ""
    if net >= 0:
        os.close(net)
    _tie_to_parent(libc, parent)  # again: a user namespace's new credentials clear the tie
    if "pid" in namespaces:
        status_read, status_write = os.pipe()
        keeper = os.fork()
        if keeper:
            os.close(status_write)
            _relay(_keeper_status(keeper, status_read))
        os.close(status_read)
        _tie_to_parent(libc, None)
        with contextlib.suppress(OSError):  # no mount namespace: the sockets stay where they are
            _hide_paths(libc, os.path.dirname(settings["program"]), _kept_paths(settings["program"]))
        status = _start_and_keep(libc, settings, token, namespaces, status_write)
        os.write(status_write, status.to_bytes(4, "little", signed=True))
        os._exit(0)  # the kernel kills what is left in the namespace
    if libc is not None:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _relay(_start_and_keep(libc, settings, token, namespaces, None))


def _tie_to_parent(libc: Any, parent: int | None) -> None:
    """Die with the parent (PR_SET_PDEATHSIG); if it already died, end now."""
    if libc is not None:
        with contextlib.suppress(OSError, AttributeError):  # no prctl: the parent's kill remains
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(70)


def _read_token(fd: int) -> bytes:
    """The pass token, which is also the go: evaltui sends it once the sandbox is in place."""
    token = os.read(fd, 256)
    os.close(fd)
    if not token:  # evaltui went away
        os._exit(70)
    return token


def _namespaces(libc: Any, net: int = -1) -> str:
    """Which namespaces of its own the sandbox got: "pid mount net", "net" or "" (none).

    Root makes them directly — but for the network namespace, which when `net` is given is the
    fork server's, made once with nothing in it (making one costs ~15 ms of a sample's wall
    time); the samples that share it have no interface up and no capability to raise one. An
    ordinary user makes them inside a user namespace of its own ("user pid mount net"), mapping
    only its own uid and gid, where the kernel allows one.
    """
    if os.getuid() == 0:
        shared = net >= 0 and libc.setns(net, CLONE_NEWNET) == 0
        if libc.unshare(CLONE_NEWPID | CLONE_NEWNS | (0 if shared else CLONE_NEWNET)) == 0:
            return "pid mount net"
        return "net" if shared or libc.unshare(CLONE_NEWNET) == 0 else ""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET) != 0:
        return ""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return "user pid mount net"


def _keeper_status(keeper: int, status_read: int) -> int:
    """How the program ended, as the keeper reported it; killed if the keeper was killed first."""
    _, keeper_status = os.waitpid(keeper, 0)
    report = os.read(status_read, 4)
    if len(report) == 4:
        return int.from_bytes(report, "little", signed=True)
    return keeper_status if os.WIFSIGNALED(keeper_status) else signal.SIGKILL


def _relay(status: int) -> NoReturn:
    """End as the program ended: its exit code, or killed by its signal (no core file)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(number, signal.SIG_DFL)  # Python ignores SIGPIPE and SIGXFSZ
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _kept_paths(program: str) -> list[str]:
    """What the program needs under the hidden folders: its own folder, the interpreter's
    libraries (each as named and as resolved); a path inside another kept one is not repeated."""
    named = [os.path.dirname(program), *sys.path, sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(sys.executable)]
    found = sorted({q for p in named if p and os.path.isdir(p) for q in (os.path.abspath(p), os.path.realpath(p))})
    kept: list[str] = []
    for path in found:
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _hide_paths(libc: Any, home: str, keep: list[str]) -> None:
    """Cover each of HIDDEN with an empty tmpfs, then bind-mount back the paths in `keep` under it
    (a folder whose paths cannot all be put back is uncovered again).

    Landlock (ABI 7) has no rule for connecting to a unix socket at a path, and such a socket
    is reachable by anyone its file mode lets write: hiding the file is what stops a program.
    Sockets elsewhere stay reachable.
    """
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount(MS_PRIVATE)")
    held = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in keep]
    for folder in HIDDEN:
        if not os.path.isdir(folder) or os.path.islink(folder):
            continue
        inside = [(path, fd) for path, fd in held if path == folder or path.startswith(folder + "/")]
        if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, _HIDDEN_TMPFS) != 0:
            continue
        try:
            for path, fd in inside:
                os.makedirs(path, exist_ok=True)
                if libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None) != 0:
                    raise OSError(ctypes.get_errno(), f"bind-mount {path}")
        except OSError:
            libc.umount2(folder.encode(), MNT_DETACH)
    for _, fd in held:
        os.close(fd)
    os.chdir(home)
    # The namespace's own /proc: the program sees only the sandbox's processes, not evaltui's.
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def _start_and_keep(libc: Any, settings: dict[str, str], token: bytes, namespaces: str, status_write: int | None) -> int:
    """Start the program and wait for it (reaping what it orphans); its wait status. Outside a PID
    namespace, what it left running is killed first (inside one, the keeper's end does that)."""
    keeper = os.getpid()
    program = os.fork()
    if program == 0:
        if status_write is not None:
            os.close(status_write)
        os._exit(_program_status(libc, settings, token, namespaces, keeper))
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == program:
            if "pid" not in namespaces:  # (in one, /proc may not number processes as kill() does)
                kill_descendants(keeper)
            return status


def _program_status(libc: Any, settings: dict[str, str], token: bytes, namespaces: str, keeper: int) -> int:
    """Run the program; the exit code the interpreter would give it (the program is a fork, so
    its exit, its uncaught exception, its atexit handlers and buffered output are seen to here)."""
    try:
        _become_the_program(libc, settings, token, namespaces, keeper)
        status = 0
    except SandboxError as e:
        os.write(2, f"EvaltuiSandboxError: {e}\n".encode())
        return 71
    except SystemExit as e:
        status = _exit_code(e.code)
    except BaseException:  # the model's code raised: reported as the interpreter reports it
        import traceback

        traceback.print_exc()
        status = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return status


def _exit_code(code: object) -> int:
    """sys.exit's argument as the interpreter reads it: None is 0, a number itself, else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        print(code, file=sys.stderr)
    return 1


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc/<pid>/task/*/children ([] where it is not kept)."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 100_000:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", "rb") as f:
                    children = [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below `pid` (this process) until none is left, reaping its own:
    orphans come back to a subreaper, so each pass finds what the last one's victims started."""
    for _ in range(100):
        below = descendants(pid)
        for child in below:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if not below:
            return
        time.sleep(0.001)


def _become_the_program(libc: Any, settings: dict[str, str], token: bytes, namespaces: str, keeper: int) -> None:
    os.setsid()  # its own session and group: killing its group kills only itself and its own
    program = settings["program"]
    if libc is not None:
        if os.getuid() == 0:
            _unroot(libc, program, int(settings["nobody"]))
        elif "user" in namespaces:
            _drop_capabilities(libc)
        _tie_to_parent(libc, keeper)  # after the uid changes, which clear the tie
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        with contextlib.suppress(OSError, AttributeError):  # no Landlock: writes are not confined
            _confine(libc, os.path.dirname(program))
    extra = int(settings["nproc"]) if "user" not in namespaces else 3 + EXTRA_PROCESSES  # a user namespace counts its own
    _set_limits(settings, extra)
    sys.argv = [program]
    runpy.run_path(program, run_name="__main__")
    sys.stdout.flush()
    os.write(1, b"\n" + token + b"\n")


def _set_limits(settings: dict[str, str], nproc: int) -> None:
    """soft == hard, so the program cannot raise them again."""
    limits = [("RLIMIT_AS", int(settings["as_bytes"])), ("RLIMIT_CPU", int(settings["cpu_s"])), ("RLIMIT_FSIZE", int(settings["fsize"])), ("RLIMIT_CORE", 0)]
    if os.getuid() != 0:  # root ignores it (when it could not become nobody); for others it stops fork bombs
        limits.append(("RLIMIT_NPROC", nproc))
    for name, value in limits:
        res = getattr(resource, name, None)
        if res is not None:
            with contextlib.suppress(ValueError, OSError):  # a limit the platform lacks
                resource.setrlimit(res, (value, value))


def _unroot(libc: Any, program: str, nobody: int) -> None:
    """RLIMIT_NPROC binds no process whose real uid is root or that holds CAP_SYS_ADMIN or
    CAP_SYS_RESOURCE: take nobody's ids, then drop every capability for good (SECBIT_NOROOT,
    locked: an exec cannot give them back). Wholly nobody when nobody can read the interpreter,
    its libraries and the program; else real uid nobody, effective root (see sandbox's doc)."""
    try:
        if libc.prctl(PR_SET_SECUREBITS, 3, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS) refused")
        os.setgroups([])
        os.setresgid(nobody, nobody, nobody)
        libraries = [d for d in sys.path if d and os.path.exists(d)]  # looked up as root: nobody may not see them
        os.setresuid(nobody, nobody, 0)  # a trial, undone below: the saved uid is still root
        readable = all(os.access(d, os.R_OK, effective_ids=True) for d in libraries)
        home = os.path.dirname(program)  # root's own (0700) until given to nobody below: its parent must be reachable
        readable = readable and os.access(os.path.dirname(home), os.X_OK, effective_ids=True)
        os.setresuid(nobody, 0, 0)
        if readable:
            os.chown(home, nobody, nobody)
            os.chown(program, nobody, nobody)
            os.setresuid(nobody, nobody, nobody)
        _drop_capabilities(libc)
    except (OSError, AttributeError) as e:  # model code never runs as full root
        raise SandboxError(f"the sandbox could not give up root ({e}); run evaltui as an ordinary user") from None


def _drop_capabilities(libc: Any) -> None:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")


class _Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _confine(libc: Any, home: str) -> None:
    """Landlock: creating, writing, truncating, renaming and removing files only beneath `home`
    (and writing /dev/null); reading stays free. ABI 4 (Linux 6.7): no TCP bind or connect.
    ABI 6 (Linux 6.12): no signal to a process outside the sandbox (evaltui, the user's shell,
    the keeper), no abstract unix socket outside it. Without it in the kernel: nothing to do."""
    call = libc.syscall
    call.restype = ctypes.c_long
    long_ = ctypes.c_long
    abi = call(long_(444), None, long_(0), long_(1))  # landlock_create_ruleset(NULL, 0, VERSION)
    if abi < 1:
        return
    rights = 0x1FF2 | (0x2000 if abi >= 2 else 0) | (0x4000 if abi >= 3 else 0)
    # handled_access_fs, handled_access_net (bind, connect TCP), scoped (abstract unix, signal)
    fields = [rights] + ([0x3] if abi >= 4 else []) + ([0x3] if abi >= 6 else [])
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = call(long_(444), ctypes.byref(attr), long_(8 * len(fields)), long_(0))
    if ruleset < 0:
        return
    for path, allowed in ((home, rights), (os.devnull, 0x2 | (rights & 0x4000))):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        call(long_(445), long_(ruleset), long_(1), ctypes.byref(_Beneath(allowed, fd)), long_(0))
        os.close(fd)
    call(long_(446), long_(ruleset), long_(0))
    os.close(ruleset)


if __name__ == "__main__":
    main(sys.argv)
