"""A fork server for the crash suite: imports evaltui once, then forks one `evaltui … --no-ui` per request.

Why: the suite kills a run with SIGKILL more than twenty times and re-runs it after each kill;
paying the interpreter and import start-up for every one of those runs would cost more than the
runs themselves. Each forked child is a real, separate evaltui process (its own event loop,
threads, sockets, work-dir lock) that the test kills with SIGKILL exactly as a user would.

Protocol (one JSON object per line): the test writes `{"argv": [...], "log": PATH, "hold": …}`
on stdin; this process answers `{"pid": N}` once the child is forked, then `{"pid": N, "exit": CODE}`
when it has ended (CODE is -9 for a SIGKILL). One child at a time.

`hold` makes the disk slow at one chosen moment so that a kill can land inside a write which is
otherwise over in microseconds (the child stalls there until it is killed, at most HOLD_SECONDS):
  {"tear_line": n}   the n-th checkpoint write is cut halfway through its first line, the stall between;
  {"tear_log_line": n}  the same for the n-th write to a per-sample log (logs/samples/);
  {"replace": dir}   the stall comes just before a finished temporary file is renamed into `dir`
                     ("results": the last step of scoring; "summary": the leaderboard files).
The engine's own code runs unchanged; only `os.write` / `os.replace` are wrapped (before evaltui is
imported, so references taken at import time are wrapped too), and they hold only in a child
whose request asks for it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HOLD_SECONDS = 30.0


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _is_checkpoint(fd: int) -> bool:
    name = os.path.basename(_fd_path(fd))
    return name.startswith("tmp_") and name.endswith(".jsonl")


def _is_sample_log(fd: int) -> bool:
    path = _fd_path(fd)
    return "/logs/samples/" in path and path.endswith(".jsonl")


#: What the current child holds on (set after the fork, from its request).
HOLD: dict[str, Any] = {}


def _install() -> None:
    """Wrap os.write and os.replace before evaltui is imported, so that code which took a
    reference to them at import time (a default argument) gets the wrappers too."""
    real_write, real_replace = os.write, os.replace
    seen = {"tear_line": 0, "tear_log_line": 0}
    kinds = {"tear_line": _is_checkpoint, "tear_log_line": _is_sample_log}

    def write(fd: int, data: Any) -> int:
        for key, matches in kinds.items():
            tear = HOLD.get(key)
            if tear and matches(fd):
                seen[key] += 1
                if seen[key] == tear and len(data) > 1:
                    # halfway through the write's first line: a write of two lines of one length
                    # cut at len // 2 would end on a newline, a whole line and no tear
                    first = bytes(data).find(b"\n") + 1 or len(data)
                    written = real_write(fd, bytes(data[: max(1, first // 2)]))
                    time.sleep(HOLD_SECONDS)
                    return written
        return real_write(fd, data)

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        folder = HOLD.get("replace")
        if folder and folder in Path(dst).parts:
            time.sleep(HOLD_SECONDS)
        real_replace(src, dst, *args, **kwargs)

    os.write = write
    os.replace = replace


def _child(request: dict[str, Any]) -> None:
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    HOLD.update(request.get("hold") or {})
    sys.argv = ["evaltui", *request["argv"]]
    from evaltui.cli import entry

    entry()  # ends with os._exit


def main() -> None:
    _install()
    # Everything a run imports, imported once here (no threads are started by importing).
    import evaltui.cli  # noqa: F401
    import evaltui.engine.run.runner  # noqa: F401
    import evaltui.headless  # noqa: F401
    import evaltui.scoring  # noqa: F401

    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(request)
            finally:
                os._exit(70)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
