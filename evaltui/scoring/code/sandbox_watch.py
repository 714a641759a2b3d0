"""The sandbox from outside, while its program runs: its processes and their memory, the size of
its folder, a memory cgroup of its own where one can be made, and killing all of it.

Per-process limits (RLIMIT_AS, RLIMIT_FSIZE) do not bound a program that forks: ten children
of 400 MB each under a 512 MB limit once took 4 GB of the machine, and many files of 16 MB each
can fill the work dir's disk. So the whole sandbox is held to `memory_mb` and FOLDER_LIMIT:
- memory: by the kernel, where evaltui can make a memory cgroup (cgroup v2 with the memory
  controller delegated to its own cgroup, or the v1 memory hierarchy; in practice as root), else
  by `sandbox.run_program` summing the memory of every process of the sandbox (`tree_memory`)
  every POLL seconds and killing them all past the limit (a fast allocator may overshoot for one POLL);
- the folder: measured every POLL seconds, the sandbox killed past the limit.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from pathlib import Path

from evaltui.scoring.code.sandbox_child import descendants

POLL = 0.05
#: What the program's folder may hold in all (each file on its own is held to FSIZE_LIMIT).
FOLDER_LIMIT = 64 * 2**20
_BLOCK = 4096  # an entry counts at least this much: a million empty files is not an empty folder
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def tree_memory(pid: int) -> int:
    """Bytes of memory `pid` and every process below it hold: the sum of their proportional
    set sizes (a page shared after a fork counted once in all, as the machine pays for it), or
    of their resident sets where the kernel does not say (shared pages then counted in each)."""
    return sum(_memory(p) for p in [pid, *descendants(pid)])


def _memory(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):  # no smaps_rollup (older kernels): the resident size below
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def folder_bytes(path: str, stop_at: int) -> int:
    """Disk used beneath `path` (symlinks not followed), counting each entry as at least a block;
    it stops counting once past `stop_at`, so a folder of a million files costs one bounded walk."""
    total = 0
    todo = [path]
    while todo and total <= stop_at:
        try:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        total += max(_BLOCK, getattr(st, "st_blocks", 0) * 512 or st.st_size)
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                    if total > stop_at:
                        break
        except OSError:
            continue
    return total


class MemoryCgroup:
    """A memory cgroup of one sandbox: the kernel holds all its processes, together, to the limit
    (and its OOM killer picks among them alone)."""

    _counter = itertools.count()
    _unavailable = False  # once making one failed in this process, no more tries
    _swept = False  # the cgroups a killed evaltui left behind are removed once per process

    def __init__(self, path: Path, events: str) -> None:
        self.path = path
        self._events = events

    @classmethod
    def make(cls, limit: int, proc: str = "/proc/self") -> MemoryCgroup | None:
        """A new cgroup limited to `limit` bytes beneath evaltui's own, or None where none can be made."""
        if cls._unavailable:
            return None
        found = memory_hierarchy(proc)
        if found is None:
            cls._unavailable = True
            return None
        parent, version = found
        if not cls._swept:
            cls._swept = True
            _sweep(parent)
        path = parent / f"evaltui-{os.getpid()}-{next(cls._counter)}"
        try:
            path.mkdir()
        except OSError:
            cls._unavailable = True
            return None
        group = cls(path, "memory.events" if version == 2 else "memory.oom_control")
        try:
            if version == 2:
                (path / "memory.max").write_text(str(limit))
                with contextlib.suppress(OSError):  # no swap accounting: nothing to swap to either
                    (path / "memory.swap.max").write_text("0")
                with contextlib.suppress(OSError):  # one process over the limit ends them all
                    (path / "memory.oom.group").write_text("1")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        except OSError:
            group.close()
            cls._unavailable = True
            return None
        return group

    def add(self, pid: int) -> bool:
        """Put `pid` in the cgroup (its children follow); False when the kernel refused."""
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError:
            return False
        return True

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the sandbox for the limit."""
        try:
            lines = (self.path / self._events).read_text().splitlines()
        except OSError:
            return False
        counts = dict(line.split(None, 1) for line in lines if " " in line)
        return counts.get("oom_kill", "0").strip() not in ("", "0")

    def close(self) -> None:
        """Kill what is still in the cgroup (a process that escaped the sandbox's tree), remove it."""
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                pids = []
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(FileNotFoundError):
                try:
                    self.path.rmdir()
                    return
                except OSError:  # busy for a moment while the killed exit
                    time.sleep(0.002)


def _sweep(parent: Path) -> None:
    """Remove the (empty) cgroups of evaltuis that died before removing their own (kill -9)."""
    for path in parent.glob("evaltui-*-*"):
        try:
            pid = int(path.name.split("-")[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):  # still holding a process, or not ours to remove
                path.rmdir()
        except (ValueError, OSError):  # not a number, or alive (PermissionError: someone else's)
            continue


def memory_hierarchy(proc: str = "/proc/self") -> tuple[Path, int] | None:
    """Evaltui's own cgroup folder in a hierarchy where a child can have a memory limit, and the
    hierarchy's version: v2 when the memory controller is delegated to that folder's children,
    else v1's memory hierarchy; None when neither is mounted or evaltui is in neither."""
    try:
        groups = Path(proc, "cgroup").read_text().splitlines()
        mounts = Path(proc, "mountinfo").read_text().splitlines()
    except OSError:
        return None
    own: dict[str, str] = {}
    for line in groups:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["(v2)"]:
            own[name] = path
    found: dict[int, Path] = {}
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        parts, kind = fields.split(), tail.split()
        if len(parts) < 5 or len(kind) < 3:
            continue
        root, point = parts[3], parts[4]
        if kind[0] == "cgroup2" and "(v2)" in own:
            folder = _inside(point, root, own["(v2)"])
            with contextlib.suppress(OSError):
                if folder is not None and "memory" in (folder / "cgroup.subtree_control").read_text().split():
                    found[2] = folder
        elif kind[0] == "cgroup" and "memory" in kind[2].split(",") and "memory" in own:
            folder = _inside(point, root, own["memory"])
            if folder is not None and folder.is_dir():
                found[1] = folder
    version = max(found, default=None)
    return None if version is None else (found[version], version)


def _inside(point: str, root: str, path: str) -> Path | None:
    """Where cgroup `path` is under a hierarchy mounted at `point` from its `root`; None when the
    mount does not show it (a container's view of another part of the tree)."""
    if root != "/" and path != root and not path.startswith(root.rstrip("/") + "/"):
        return None
    rest = path[len(root.rstrip("/")):] if root != "/" else path
    return Path(point, rest.lstrip("/"))
