"""Whether a process holds a work dir's lock, found out without taking it.

`evaltui watch` must never take the lock (WorkDir.lock): even a moment's hold could make the
evaltui that starts in that moment refuse the work dir. So it reads the kernel's table of file
locks, /proc/locks, where an flock shows as `FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode>`, and
looks for the lock file's inode there. Linux only; elsewhere (or when /proc/locks cannot be read)
the answer is None, "cannot tell", and the caller goes by the heartbeat instead.

A file on overlayfs (containers) may show in /proc/locks under the device of the layer below,
so an inode that matches on another device counts when the pid beside it is the one the lock
file names (a holder writes its pid into it).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC_LOCKS = Path("/proc/locks")


def lock_holder(lock_file: Path, proc_locks: Path = PROC_LOCKS) -> int | None:
    """The pid holding `lock_file`'s flock; 0 when nobody holds it; None when it cannot be told."""
    try:
        st = os.stat(lock_file)
    except FileNotFoundError:
        return 0  # no lock file: no evaltui has run here yet
    except OSError:
        return None
    try:
        table = proc_locks.read_bytes()
    except OSError:
        return None
    named = _named_pid(lock_file)
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 16916 fe:00:2165020 0 EOF"; a waiter's line has "->" before FLOCK
        if len(parts) < 6 or parts[1] != b"FLOCK":
            continue
        where = parts[5].split(b":")
        if len(where) != 3 or not parts[4].isdigit():
            continue
        try:
            major, minor, inode = int(where[0], 16), int(where[1], 16), int(where[2])
        except ValueError:
            continue
        if inode != st.st_ino:
            continue
        pid = int(parts[4])
        if (major, minor) == (os.major(st.st_dev), os.minor(st.st_dev)) or pid == named:
            return pid
    return 0


def _named_pid(lock_file: Path) -> int | None:
    """The pid the lock file names (its last holder writes it there)."""
    try:
        text = lock_file.read_bytes()[:32].decode(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
