"""evaltui's end of the sandbox's fork server (`sandbox_server`): one warm interpreter per evaltui
process, started at the first sample, that forks each sample's sandbox.

`ForkServer.spawn` stands where `subprocess.Popen` of a fresh interpreter stood: it returns a
`Sandbox` with the outer's pid (to put in a cgroup, to watch, to kill) and its end, as Popen's
returncode (the exit code, or minus the signal). The server is the outer's parent, so it reaps it
and says how it ended through the sample's status pipe. Threads share the server: a request is
one message on a SOCK_SEQPACKET socket, whose sends do not interleave.
"""

from __future__ import annotations

import atexit
import os
import select
import socket
import subprocess
import sys
import threading
import time

_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_server.py")
#: How long a request may wait for the server to fork (it does nothing else between requests).
_SPAWN_SECONDS = 30.0


class Sandbox:
    """One sample's sandbox seen from evaltui: its outer's pid and, once ended, its returncode."""

    def __init__(self, pid: int, status: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status

    def wait(self, timeout: float | None = None) -> int | None:
        """The returncode once the sandbox ended within `timeout` s, else None (still running)."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None and not select.select([self._status], [], [], max(0.0, timeout))[0]:
            return None
        report = _read_exactly(self._status, 4)
        os.close(self._status)
        # the server ended first (evaltui is going away): said as a kill, as its end was one
        self.returncode = -9 if report is None else os.waitstatus_to_exitcode(int.from_bytes(report, "little", signed=True))
        return self.returncode

    def close(self) -> None:
        if self.returncode is None:
            self.returncode = -9
            os.close(self._status)


def _read_exactly(fd: int, n: int, deadline: float | None = None) -> bytes | None:
    data = b""
    while len(data) < n:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class ForkServer:
    """The process's fork server, started (again) when needed."""

    _lock = threading.Lock()
    _current: ForkServer | None = None

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-B", _SERVER, str(os.getpid()), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd="/",
            )
        finally:
            theirs.close()
        self._sock = ours
        self._owner = os.getpid()
        atexit.register(self.close)  # evaltui's end is the server's: nothing of the sandbox outlives it

    @classmethod
    def shared(cls) -> ForkServer:
        with cls._lock:
            server = cls._current
            if server is None or server._owner != os.getpid() or server._proc.poll() is not None:
                if server is not None and server._owner == os.getpid():
                    server.close()
                server = cls._current = cls()
            return server

    @classmethod
    def spawn(cls, home: str, env: dict[str, str], settings: list[str], out: int, err: int) -> tuple[Sandbox, int]:
        """Fork a sandbox for the sample in `home`: its Sandbox, and the write end of its token pipe
        (the go: the outer waits for the token before it does anything)."""
        for attempt in range(2):
            server = cls.shared()
            token_r, token_w = os.pipe()
            status_r, status_w = os.pipe()
            message = "\0".join([home, "\n".join(f"{k}={v}" for k, v in env.items()), *settings]).encode()
            try:
                socket.send_fds(server._sock, [message], [out, err, token_r, status_w])
            except OSError:
                for fd in (token_w, status_r):
                    os.close(fd)
                if attempt:
                    raise
                with cls._lock:
                    if cls._current is server:
                        cls._current = None
                continue
            finally:
                os.close(token_r)
                os.close(status_w)
            pid = _read_exactly(status_r, 4, time.monotonic() + _SPAWN_SECONDS)
            if pid is None:
                os.close(token_w)
                os.close(status_r)
                raise OSError("the sandbox's fork server did not start the sample")
            return Sandbox(int.from_bytes(pid, "little", signed=True), status_r), token_w
        raise AssertionError("unreachable")

    def close(self) -> None:
        """End the server (it ends when its socket closes) and wait for it; in a fork of evaltui, only let go of it."""
        self._sock.close()
        if self._owner != os.getpid():
            return
        try:
            self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
