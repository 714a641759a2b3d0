"""Refuse a work dir through which a run could damage the machine or someone else's files.

A run writes plan.toml, .evaltui.lock, infer_status/, predictions/… into its work dir and
overwrites what has those names; `work_dir = "/"` or `--work-dir ~` was once taken at its word.
So before anything is written, the path (symlinks resolved) must not be the filesystem root,
the home folder, a system folder or inside one, nor an existing folder of other files. A folder
evaltui uses is marked with a small `.evaltui` file; work dirs written before the marker (and
OpenCompass's, which evaltui resumes from) are known by the layout they have.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from pathlib import Path

MARKER = ".evaltui"
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
#: What an existing work dir holds: the marker, or the layout evaltui (before the marker) and
#: OpenCompass write.
_WORK_DIR_SIGNS = (MARKER, ".evaltui.lock", "infer_status", "predictions", "infer_heartbeat")


def refusal(path: str | os.PathLike[str]) -> str | None:
    """Why `path` must not be a work dir (to print after the field that named it), None when it may be."""
    given = os.fspath(path)
    if "\x00" in given:
        return f"contains a NUL byte, which no file name can hold (got {given!r})"
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
    """Say that `root` is a work dir, so a later run (or a person) knows it for one."""
    marker = root / MARKER
    if not marker.exists():
        marker.write_text(_MARKER_TEXT, encoding="utf-8")


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
    """An existing folder must be empty or a work dir already; a file is not a folder at all."""
    if not os.path.lexists(resolved):
        return None
    if not os.path.isdir(resolved):
        return "exists and is not a folder"
    names: list[str] = []
    try:
        with os.scandir(resolved) as entries:
            for entry in entries:
                if entry.name in _WORK_DIR_SIGNS:
                    return None
                names.append(entry.name)
                if len(names) >= _SCAN_AT_MOST:
                    break
    except OSError:
        return None  # unreadable: creating the work dir says why, in its own words
    if not names:
        return None
    listed = ", ".join(sorted(names)[:3]) + (", …" if len(names) > 3 else "")
    return f"a folder of other files ({listed}), not an evaltui work dir (it has no {MARKER} file)"
