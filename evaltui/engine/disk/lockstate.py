"""Whether a process holds a work dir's lock, found out without taking it.

`evaltui watch` must never take the lock (WorkDir.lock): even a moment's hold could make the
evaltui that starts in that moment refuse the work dir. So it reads the kernel's table of file
locks, /proc/locks, where an flock shows as `FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode>`, and
looks for the lock file's inode there. Linux only; elsewhere (or when /proc/locks cannot be read)
the answer is None, "cannot tell", and the caller goes by the heartbeat instead.

A file on overlayfs (containers) may show in /proc/locks under the device of the layer below,
so an inode that matches on another device counts when the pid beside it is the one the lock
file names (a holder writes its pid into it).

The table is only this kernel's, and only what this pid namespace can see: on a filesystem
other hosts write (NFS, CIFS, …) a run elsewhere holds a lock it does not show, and a lock held
from another pid namespace (another container on the same volume, the host seen from a
container) is left out of it altogether. So `run_holder` says "nobody" only on a filesystem only
this kernel writes (`local_filesystem`, from /proc/self/mountinfo) AND with a heartbeat that has
missed its beats: a free lock beside a fresh heartbeat is a holder out of sight.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from evaltui.engine.disk.heartbeat import missed_beats, stale
from evaltui.fsutil import open_regular

PROC_LOCKS = Path("/proc/locks")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")
# filesystems only the kernel that mounts them writes: a lock free in its table is free
LOCAL_FILESYSTEMS = frozenset(
    "ext2 ext3 ext4 xfs btrfs bcachefs zfs f2fs jfs reiserfs nilfs2 tmpfs ramfs overlay vfat exfat ntfs3 hfsplus".split()
)


def run_holder(root: Path, local: bool, beats_every: float) -> int | None:
    """The pid of the process running in work dir `root`; 0 when none can be (nobody here holds
    its lock, it is on a `local` filesystem, and its heartbeat — written every `beats_every` s
    by a live run — has missed two beats); None when it cannot be told."""
    holder = lock_holder(root / ".evaltui.lock")
    if holder or not local:
        return holder if holder else None
    for sign in ("infer_heartbeat", ".evaltui.lock"):  # before its first beat, the pid a run wrote as it took the lock
        try:
            age = time.time() - (root / sign).stat().st_mtime
        except OSError:
            continue
        return 0 if stale(age, missed_beats(beats_every)) else None
    return 0


def local_filesystem(path: Path, mountinfo: Path | None = None) -> bool:
    """Whether `path` is on a filesystem only this kernel writes (False when it cannot be told)."""
    try:
        table = (mountinfo or PROC_MOUNTINFO).read_text(errors="replace")
        where = os.path.realpath(path)
    except OSError:
        return False
    best, kind = "", ""
    for line in table.splitlines():
        # "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw": point, then type after " - "
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if len(fields) < 5 or not tail:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):  # the deepest mount, the last mounted on a point
            best, kind = point, tail.split()[0]
    return kind in LOCAL_FILESYSTEMS


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
            return pid or named or None  # (pid 0: an owner that has gone, on some kernels)
    return 0


def _named_pid(lock_file: Path) -> int | None:
    """The pid the lock file names (its last holder writes it there)."""
    try:
        with open_regular(lock_file, 1 << 20) as f:  # (a FIFO in its place would hang the reader)
            text = f.read(32).decode(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
