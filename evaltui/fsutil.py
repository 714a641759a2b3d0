"""Atomic file writes, and bounded reads.

Every JSON or text file that another reader (the watch-scorer, a second run, the user's
`cat`) may look at is written to a temporary name in the same folder and renamed into place,
so a reader sees either the old file or the new one, never half of one.

And every file evaltui reads that a user (or an accident) may have replaced — the plan, a work
dir's status files, checkpoints, results, heartbeat, sample logs — is opened only when it is a
regular file, and only up to a size that fits its kind (`open_regular`, `read_regular`): a FIFO
would hang the reader, `/dev/zero` or a huge file would fill memory, a folder would be a
traceback. What is wrong is said in words (`Unreadable`), for one line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from evaltui import fastjson


def _current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc)."""
    with contextlib.suppress(OSError, ValueError, IndexError):  # no /proc: the fallback below
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: the classic dance, at import time
    os.umask(mask)
    return mask


# mkstemp creates files 0600; results are meant to be shared like any file the user writes.
_MODE = 0o666 & ~_current_umask()


@contextmanager
def atomic_writer(path: str | os.PathLike[str], *, replace: Callable[[str, Path], None] = os.replace) -> Iterator[BinaryIO]:
    """A binary file that appears at `path` only once the block ends without an error.

    `replace(tmp, path)` puts it in place; a caller may pass one that refuses (raises) when
    the file would be stale by then, and the temporary is removed."""
    path = path if isinstance(path, Path) else Path(path)
    fd, tmp = _temporary(path)
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb", buffering=1 << 16) as f:
            yield f
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# Temporaries are named with 8 of mkstemp's letters (hex digits, `[a-z0-9_]{8}`), and opened with
# its flags: what workdir.clear_leftovers knows as ours. A generator of its own, as mkstemp has:
# the process-wide one is a user's (a `python` evaluator that seeds it and draws must draw the same
# whatever files were written in between).
_NAMES = random.Random()
os.register_at_fork(after_in_child=_NAMES.seed)  # a forked child names its files apart from its parent
_NEW_FILE = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _temporary(path: Path) -> tuple[int, str]:
    """A new file `.<name>.<8 random letters>.tmp` beside `path` (its folder made when missing),
    open and its absolute path, as tempfile.mkstemp makes it but without its checks of every
    argument and a mkdir first each time: a status file is written several times a dataset, and
    those were half the cost of writing it."""
    folder, sep, name = str(path).rpartition(os.sep)  # (os.path.dirname, join and Path.name cost more than the rest of the Python here)
    start = f"{folder}{sep}.{name}."
    for attempt in range(tempfile.TMP_MAX):
        tmp = f"{start}{_NAMES.getrandbits(32):08x}{_TMP_SUFFIX}"  # 8 of mkstemp's letters (hex digits), a tenth of the cost of choices()
        try:
            return os.open(tmp, _NEW_FILE, 0o600), tmp if folder.startswith(os.sep) else os.path.abspath(tmp)
        except FileExistsError:
            continue
        except (FileNotFoundError, NotADirectoryError):
            if attempt:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)  # (a file in its place: FileExistsError, as ever)
    raise FileExistsError(errno.EEXIST, "no unused name for a temporary file beside", str(path))


_TMP_SUFFIX = ".tmp"


def is_temporary_of(name: str, target: str) -> bool:
    """Whether the file `name` is atomic_writer's temporary for a file named `target`: what a
    write killed before its rename leaves beside it (`.plan.toml.k2j9xq1.tmp`)."""
    return name.startswith(f".{target}.") and name.endswith(_TMP_SUFFIX)


def nul_byte(path: str) -> str | None:
    """Why `path` cannot name a file when it holds a NUL byte (the OS would refuse it with a
    traceback-worthy ValueError), else None: said the same way for every path a plan names."""
    if "\x00" in path:
        return f"contains a NUL byte, which no file name can hold (got {path!r})"
    return None


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, replace: Callable[[str, Path], None] = os.replace) -> None:
    """atomic_writer's file for bytes at hand, written straight to its descriptor (no buffered
    file object made and flushed for them); `replace` as atomic_writer's."""
    path = path if isinstance(path, Path) else Path(path)
    fd, tmp = _temporary(path)
    try:
        try:
            os.fchmod(fd, _MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def discard(temporaries: Iterable[str | None]) -> None:
    """Remove these temporaries (None: none), quietly: what a stopped or refused write leaves
    behind, cleaned up on the way out of the error that stopped it."""
    for tmp in temporaries:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, replace: Callable[[str, Path], None] = os.replace) -> None:
    atomic_write_bytes(path, dumps_readable(obj).encode("utf-8"), replace=replace)


def json_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON (fastjson.dumps): every checkpoint line and scored detail."""
    return fastjson.dumps(obj)


def dumps_readable(obj: Any) -> str:
    """JSON laid out one entry per line: readable with `less`, and written by the C encoder.

    `json.dumps(indent=2)` falls back to the pure-Python encoder, which made writing a
    2,000-sample predictions or results file cost tens of milliseconds; here each top-level
    value (or each item of a top-level list value) is encoded compactly on its own line.
    """
    if not isinstance(obj, dict) or not obj:
        return _dumps(obj) + "\n"
    if all(type(k) is str and (type(v) in _SCALARS or type(v) is list and all(type(x) in _SCALARS for x in v)) for k, v in obj.items()):
        # A status file's kind (scalars, lists of them): orjson's indented layout is this one, in one call.
        with contextlib.suppress(TypeError):  # a lone surrogate, a huge int: the general way below
            return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode("utf-8") + "\n"
    lines = []
    for key, value in obj.items():
        k = _dumps(str(key))
        if isinstance(value, list) and value:
            items = ",\n".join("    " + _dumps(item) for item in value)
            lines.append(f"  {k}: [\n{items}\n  ]")
        else:
            lines.append(f"  {k}: {_dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


_SCALARS = (str, int, float, bool, type(None))


def _dumps(obj: Any) -> str:
    return json_bytes(obj).decode("utf-8")


def read_json(path: str | os.PathLike[str], limit: int) -> Any | None:
    """The parsed file, or None when it is missing or not valid JSON (never half-written by us);
    Unreadable when it is no regular file, or larger than `limit` bytes."""
    try:
        return fastjson.loads(read_regular(path, limit))
    except (FileNotFoundError, ValueError):
        return None


class Unreadable(OSError):
    """A file that cannot be read as the file it should be: not a regular file (a folder, a FIFO,
    a device), or larger than its kind's bound. `problem` says which, without the path."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = Path(path)
        self.problem = problem


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(path: str | os.PathLike[str], mode: int) -> Unreadable:
    """What to raise for `path`, whose `st_mode` is `mode`: it is no regular file."""
    return Unreadable(path, f"is {_kind(mode)}, not a regular file")


def open_checked(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """`path`'s descriptor and stat, once the open file is known to be a regular one (symlinks
    followed, checked on the open file, so nothing can swap it in between); Unreadable otherwise.
    Opened non-blocking, so a FIFO is refused rather than waited on. FileNotFoundError (and
    other OSErrors) as `open` raises them."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(path: str | os.PathLike[str], limit: int) -> BinaryIO:
    """`path` open for reading, once it is known to be a regular file of at most `limit` bytes
    (open_checked); Unreadable otherwise."""
    fd, st = open_checked(path)
    try:
        if st.st_size > limit:
            raise Unreadable(path, too_large(st.st_size, limit))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small(path: str | os.PathLike[str], small: int) -> bytes | None:
    """The bytes of a regular file of at most `small` bytes, in one read (no buffered file made:
    a run's end reads 10,000 small results); None for a larger one. Checked as open_regular."""
    fd, st = open_checked(path)
    try:
        return os.read(fd, st.st_size) if st.st_size <= small else None
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see open_regular); a file that grew
    past its bound while it was read is Unreadable too."""
    with open_regular(path, limit) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(size + 1)  # (not limit + 1: a buffer of that size would be allocated for every read)
        if len(data) > size:  # it grew meanwhile: the rest, no further than the bound
            data += f.read(limit + 1 - len(data))
    if len(data) > limit:
        raise Unreadable(path, too_large(len(data), limit))
    return data


def too_large(size: int, limit: int) -> str:
    return f"is {size:,} bytes, larger than the {limit:,} such a file may be"


def unreadable_in(exc: BaseException) -> Unreadable | None:
    """The Unreadable behind `exc`, itself or in its exception group (a task group's), if any."""
    if isinstance(exc, Unreadable):
        return exc
    for part in getattr(exc, "exceptions", ()):
        found = unreadable_in(part)
        if found is not None:
            return found
    return None


def names_by_stem(names: Iterable[str], prefix: str, suffix: str) -> dict[str, list[str]]:
    """The names `<prefix><stem><suffix>` of a folder's `names`, by stem; a stem `<s>_<n>` (a
    shard's, n a number) is listed under `<s>` too. A lookup a dataset, not a pass over the folder."""
    found: dict[str, list[str]] = {}
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
            stem = name[len(prefix) : len(name) - len(suffix)]
            found.setdefault(stem, []).append(name)
            head, _, number = stem.rpartition("_")
            if head and number.isdigit():
                found.setdefault(head, []).append(name)
    return found


class Listing:
    """A folder's names as read once, for many questions about it: whether a name was there, and
    the names of a kind by stem. Planning 10,000 datasets asks tens of thousands of them of a work
    dir, mostly about files that are not there; each was a system call failing (~30 us each once
    the GIL is waited for again), or a pass over the folder."""

    __slots__ = ("names", "_stems")

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        try:
            names: frozenset[str] | None = frozenset(os.listdir(folder))
        except FileNotFoundError:
            names = frozenset()
        except NotADirectoryError:  # a file in its place: what is in it is for a read of it to say
            names = None
        self.names = names
        self._stems: dict[tuple[str, str], dict[str, list[str]]] = {}

    def lacks(self, name: str) -> bool:
        """Whether the folder did not hold `name` when it was listed (False when it is no folder)."""
        return self.names is not None and name not in self.names

    def by_stem(self, prefix: str, suffix: str) -> dict[str, list[str]]:
        """names_by_stem of its names (none when it is no folder), made once."""
        found = self._stems.get((prefix, suffix))
        if found is None:
            found = self._stems[prefix, suffix] = names_by_stem(self.names or (), prefix, suffix)
        return found


class Listings(dict[str, Listing]):
    """Folders' Listings by path, each folder listed the first time it is asked for."""

    def __missing__(self, folder: str) -> Listing:
        found = self[folder] = Listing(folder)
        return found


def real_path_text(path: Path, folders: dict[str, str]) -> str:
    """`str(path.resolve())`, its folder resolved once for all the files in it (`folders` keeps
    them for the caller): resolving walks the path part by part, a syscall each, and a plan of
    10,000 data files in one folder walked it 10,000 times. A file that is itself a link (or a
    name like `..`) is resolved whole, so the answer is the same. In plain strings: no Path made,
    hashed or joined for each of 10,000 data files (the plan snapshot, the summary's versions)."""
    text = str(path)
    folder, name = os.path.split(text)
    if name in ("", ".", "..") or os.path.islink(text):
        return str(path.resolve())
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = str(Path(folder or ".").resolve())
    return os.path.join(real, name)
