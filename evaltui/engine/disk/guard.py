"""Refuse a work dir through which a run could damage the machine or someone else's files.

A run writes plan.toml, .evaltui.lock, infer_status/, predictions/… into its work dir and
overwrites what has those names; `work_dir = "/"` or `--work-dir ~` was once taken at its word.
So before anything is written, the path (symlinks resolved) must not be the filesystem root,
the home folder, a system folder or inside one, nor an existing folder of other files. A folder
evaltui uses is marked with a small `.evaltui` file; a work dir written before the marker is
known by its lock beside its own plan snapshot or status files, and OpenCompass's (which evaltui
resumes from) by its files. A single name of evaltui's is no proof: an empty `predictions/` or a
lone lock file may be anyone's. Everything is checked before anything is made.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import pwd
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from evaltui.fsutil import atomic_write_text, is_temporary_of, nul_byte

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MARKER = ".evaltui"
_MARKER_HEAD = b"evaltui work dir"
_MARKER_TEXT = "evaltui work dir: evaltui writes, moves and sets aside files here (see its README, 'What a run writes').\n"
#: A work dir's top level holds a dozen entries: a folder with more and no sign of one is not one.
_SCAN_AT_MOST = 256

#: Folders whose whole tree belongs to the system: nothing inside them is a work dir.
SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr",
    "/System", "/Library", "/Applications", "/private/etc",  # macOS
)
#: Folders that are the system's themselves, though a folder inside them may be a work dir.
SYSTEM_FOLDERS = (
    "/home", "/root", "/var", "/var/lib", "/var/log", "/var/cache", "/var/tmp", "/run", "/tmp", "/opt", "/srv",
    "/mnt", "/media", "/snap", "/Users", "/Volumes", "/private", "/private/var", "/private/tmp",
)
#: What a run creates in its work dir, by kind: a folder must not be a file there, nor a file a folder.
FOLDERS = ("infer_status", "predictions", "results", "summary", "logs", "superseded", ".sandbox")
FILES = ("plan.toml", ".evaltui.lock", "infer_heartbeat")
#: The statuses evaltui writes (engine/disk/workdir.py), by which an earlier evaltui's status file is known.
_STATUSES = ("pending", "running", "done", "fail")
#: A plan snapshot is a few kB: a larger plan.toml is not one.
_PLAN_BYTES = 1 << 20


class WorkDirRefused(Exception):
    """The folder must not be a work dir; the message says why (to print after the field that named it)."""


def checked(path: str | os.PathLike[str]) -> Path:
    """`path` resolved, when it may be a work dir; WorkDirRefused (saying why) when it may not."""
    problem = refusal(path)
    if problem is not None:
        raise WorkDirRefused(problem)
    return Path(os.path.realpath(os.path.abspath(path)))


def refusal(path: str | os.PathLike[str]) -> str | None:
    """Why `path` must not be a work dir (to print after the field that named it), None when it may be."""
    given = os.fspath(path)
    if given == "":
        return "is empty: name a folder (or leave it out for the default)"
    nul = nul_byte(given)
    if nul is not None:
        return nul
    try:
        resolved = os.path.realpath(os.path.abspath(given))
    except (OSError, ValueError) as e:
        return f"cannot resolve {given!r}: {e}"
    shown = repr(given) if resolved == os.path.abspath(given) else f"{given!r} resolves to {resolved}"
    why = _system_reason(resolved)
    if why is None and resolved in _forms(*_homes()):
        why = "your home folder"
    if why is None:
        why = _contents_reason(resolved)
    if why is None:
        return None
    return f"{shown}: {why}; a run writes plan.toml, predictions/ and more into its work dir, so choose a new or empty folder"


def mark(root: Path) -> None:
    """Say that `root` is a work dir, so a later run (or a person) knows it for one. Written whole
    or not at all (a temporary name, then a rename), and first of all: a run killed as it starts
    leaves either nothing or a work dir known by its marker."""
    if not _is_marker(root / MARKER):
        atomic_write_text(root / MARKER, _MARKER_TEXT)


def _system_reason(resolved: str) -> str | None:
    if resolved == os.path.realpath("/") or os.path.dirname(resolved) == resolved:
        return "the filesystem root"
    for tree in SYSTEM_TREES:
        for form in _forms(tree):
            if resolved == form:
                return "a system folder"
            if resolved.startswith(form.rstrip("/") + "/"):
                return f"inside the system folder {tree}"
    if resolved in _forms(*SYSTEM_FOLDERS):
        return "a system folder"
    return None


def _forms(*folders: str) -> set[str]:
    """Each folder as written and as resolved (/bin is /usr/bin, /var/run is /run, /tmp is /private/tmp)."""
    out = set()
    for folder in folders:
        if folder:
            out.add(os.path.abspath(folder))
            with contextlib.suppress(OSError, ValueError):
                out.add(os.path.realpath(folder))
    return out


def _homes() -> list[str]:
    homes = [os.environ.get("HOME", "")]
    with contextlib.suppress(KeyError, OSError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    return homes


def _contents_reason(resolved: str) -> str | None:
    """An existing folder must be empty or shown to be a work dir: by its marker, by the lock and
    plan snapshot an evaltui before the marker wrote, or by OpenCompass's files. One name of
    evaltui's (an empty predictions/, a lone lock) is no proof: anyone may use such names."""
    try:
        st = os.stat(resolved)
    except FileNotFoundError:
        return None
    except OSError as e:
        return "a symlink loop" if e.errno == errno.ELOOP else None  # else creating it says why, in its own words
    if not stat.S_ISDIR(st.st_mode):
        return "exists and is not a folder"
    names = _names(resolved)
    if names is None or not names or _only_a_start(Path(resolved), names):
        return None  # unreadable (creating the work dir says why), empty, or a start killed before its marker was whole
    root = Path(resolved)
    if not (_is_marker(root / MARKER) or _earlier_evaltui(root) or _opencompass(root)):
        listed = ", ".join(sorted(names)[:3]) + (", …" if len(names) > 3 else "")
        return f"a folder of other files ({listed}), not an evaltui work dir (it has no {MARKER} file)"
    if os.path.lexists(root / "plan.toml") and not _is_marker(root / MARKER) and not _is_snapshot(root / "plan.toml"):
        return "it holds a plan.toml evaltui did not write, which a run would overwrite"
    return _clash(root)


def _only_a_start(root: Path, names: set[str]) -> bool:
    """All there is are what an evaltui killed as it started can leave behind: the marker's
    temporary file, an empty marker (an earlier evaltui wrote it in place), the lock."""
    for name in names:
        path = root / name
        if not stat.S_ISREG(_lstat_mode(path)):
            return False
        if name == MARKER or is_temporary_of(name, MARKER):
            if not _MARKER_HEAD.startswith(_head(path, len(_MARKER_HEAD))):  # the marker, or as much as was written
                return False
        elif name != ".evaltui.lock":  # (it holds the pid of the run that took it)
            return False
    return True


def _lstat(path: Path) -> os.stat_result | None:
    """The entry itself (a symlink not followed); None when it cannot be read."""
    try:
        return path.lstat()
    except OSError:
        return None


def _names(resolved: str) -> set[str] | None:
    names: set[str] = set()
    try:
        with os.scandir(resolved) as entries:
            for entry in entries:
                names.add(entry.name)
                if len(names) >= _SCAN_AT_MOST:
                    break
    except OSError:
        return None
    return names


def _clash(root: Path) -> str | None:
    """A name the run writes held by the wrong kind of entry: found now, before anything is made
    (a file named `results` once failed the run after it had made infer_status/ beside it)."""
    for name in FOLDERS:
        if os.path.lexists(root / name) and not (root / name).is_dir():
            return f"its {name} is not a folder, and a run keeps a folder of that name there"
    for name in (*FILES, MARKER):
        if os.path.lexists(root / name) and not stat.S_ISREG(_lstat_mode(root / name)):
            return f"its {name} is not a file (a folder or a symlink), and a run writes a file of that name there"
    return None


def _lstat_mode(path: Path) -> int:
    st = _lstat(path)
    return st.st_mode if st is not None else 0


def _is_marker(path: Path) -> bool:
    return _head(path, len(_MARKER_HEAD)) == _MARKER_HEAD


def _head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file (not through a symlink), b"" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _is_snapshot(path: Path) -> bool:
    """Whether a plan.toml is one evaltui wrote: the resolved plan, its `[run]` naming the work dir."""
    text = _head(path, _PLAN_BYTES + 1)
    if not text or len(text) > _PLAN_BYTES:
        return False
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    run, models, datasets = data.get("run"), data.get("models"), data.get("datasets")
    return (
        isinstance(run, dict) and isinstance(run.get("work_dir"), str)
        and isinstance(models, list) and bool(models) and all(isinstance(m, dict) and "abbr" in m and "type" in m for m in models)
        and isinstance(datasets, list) and bool(datasets) and all(isinstance(d, dict) and "abbr" in d for d in datasets)
    )


def _earlier_evaltui(root: Path) -> bool:
    """A work dir from before the marker: its lock beside its plan snapshot or a status file of its own."""
    if not stat.S_ISREG(_lstat_mode(root / ".evaltui.lock")):
        return False
    return _is_snapshot(root / "plan.toml") or any(_is_status(p) for p in _pair_files(root / "infer_status", ".json"))


def _is_status(path: Path) -> bool:
    try:
        data = json.loads(_head(path, 64 * 1024))
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("status") in _STATUSES and all(
        isinstance(data.get(k), int) for k in ("total", "completed", "failed")
    )


def _opencompass(root: Path) -> bool:
    """OpenCompass's layout with its files in it: `infer_status/<model>/*.json`,
    `predictions/<model>/*.json` or `predictions/<model>/tmp_*` (evaltui's own names too)."""
    if any(True for _ in _pair_files(root / "infer_status", ".json")):
        return True
    return any(p.name.startswith("tmp_") or p.suffix == ".json" for p in _pair_files(root / "predictions", ""))


def _pair_files(folder: Path, suffix: str) -> Iterator[Path]:
    """Regular files `<folder>/<model>/*<suffix>`, at most _SCAN_AT_MOST models and files looked at."""
    with contextlib.suppress(OSError):
        for model in itertools.islice(folder.iterdir(), _SCAN_AT_MOST):
            if model.is_dir() and not model.is_symlink():
                for path in itertools.islice(model.iterdir(), _SCAN_AT_MOST):
                    if path.name.endswith(suffix) and stat.S_ISREG(_lstat_mode(path)):
                        yield path
