"""What is learnt of a data file, kept for the process and keyed by the file's identity.

The identity is what a stat gives (device, inode, size, mtime, ctime): asked again, the file is
stat'ed (one call, not the six of resolving its path), and one edited, replaced or re-pointed
since has another key, so nothing stale is served. Record counts are those seen while validating,
so a run does not parse a dataset once more just to learn its size. A small file's bytes, read
whole by that check, are kept too: the simulator's answer key and the scoring parse them again
(their records anew, as a caller may change its own) without opening 10,000 small files once more.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from evaltui.fsutil import open_checked, open_regular

if TYPE_CHECKING:  # only read here: the plan is above the datasets (it checks them)
    from evaltui.plan import DatasetConfig, Plan

FileIdentity = tuple[int, int, int, int, int]
_COUNTS: dict[tuple[Any, ...], int] = {}
_FINGERPRINTS: dict[FileIdentity, str] = {}
_HELD: dict[FileIdentity, bytes] = {}
HELD_FILE_BYTES = 64 << 10  # a larger file is read from disk each time (its bytes would cost memory all run)
FIRST_READ_BYTES = 4096  # what a data file's first read takes at least (a page; io reads 8 KiB chunks)
HELD_BYTES = 16 << 20  # the held files together; the oldest are let go past it
ANY_SIZE = 1 << 62
_held_size = [0]


def held_bytes(key: FileIdentity | None) -> bytes | None:
    """The bytes kept of the file of this identity, if they are."""
    return None if key is None else _HELD.get(key)


def _hold(key: FileIdentity, data: bytes) -> None:
    _held_size[0] += len(data) - len(_HELD.pop(key, b""))
    _HELD[key] = data
    while _held_size[0] > HELD_BYTES:
        _held_size[0] -= len(_HELD.pop(next(iter(_HELD))))


def identity(st: os.stat_result) -> FileIdentity:
    """(device, inode, size, mtime, ctime): the change time too, which no one can set back — a
    file rewritten in place at its old size with its mtime restored (`cp -p`, `touch -r`, a
    tarball unpacked) is another file."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_key(path: Path) -> FileIdentity | None:
    try:
        return identity(os.stat(path))
    except OSError:
        return None


def count_key(path: Path, ds: DatasetConfig) -> tuple[Any, ...] | None:
    key = file_key(path)
    return None if key is None else (*key, tuple(ds.columns), ds.limit)


def known_count(key: tuple[Any, ...] | None) -> int | None:
    """The records counted of the file (and columns and limit) of this count_key, if they were."""
    return None if key is None else _COUNTS.get(key)


def counted(key: tuple[Any, ...], count: int) -> None:
    _COUNTS[key] = count


def file_fingerprint(plan: Plan, ds: DatasetConfig) -> str | None:
    """sha256 of the data file's bytes (None when unreadable): an edited file makes earlier
    predictions stale."""
    if ds.benchmark:
        from evaltui.benchmarks import data_fingerprint

        return data_fingerprint(ds, plan.base_dir)
    path = plan.dataset_path(ds)
    key = file_key(path)
    if key is not None and key in _FINGERPRINTS:
        return _FINGERPRINTS[key]
    digest = hashlib.sha256()
    try:
        with open_regular(path, ANY_SIZE) as f:
            read = identity(os.fstat(f.fileno()))  # the file hashed, whatever was at the path before
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    value = digest.hexdigest()[:16]
    _FINGERPRINTS[read] = value
    return value


class Hashing(io.RawIOBase):
    """A data file whose bytes are hashed as they are read and to its end when it is closed, the
    fingerprint kept as file_fingerprint keeps it (by the open file's fstat): checking a dataset
    reads it whole anyway, and a second read for its fingerprint was ~70 us a small dataset."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw, self._digest, self._key = cast(io.BufferedReader, raw), hashlib.sha256(), identity(os.fstat(raw.fileno()))

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n: int = self._raw.readinto(buffer)
        self._digest.update(memoryview(buffer)[:n])
        return n

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError), self._raw:  # unreadable further: no fingerprint kept
                while self._key[2] <= _HASHED_TO_THE_END and (chunk := self._raw.read(1 << 20)):  # (not the rest of 2 GB after an error)
                    self._digest.update(chunk)
                if self._key[2] <= _HASHED_TO_THE_END or self._raw.tell() == self._key[2]:
                    _FINGERPRINTS[self._key] = self._digest.hexdigest()[:16]
        super().close()


_HASHED_TO_THE_END = 16 << 20  # a larger file's rest is not read on close: planning hashes it


def keep(st: os.stat_result, data: bytes) -> bytes:
    """A small file's bytes, read whole: their fingerprint kept, and they held."""
    key = identity(st)
    _FINGERPRINTS[key] = hashlib.sha256(data).hexdigest()[:16]
    if len(data) == st.st_size:  # (not one that grew as it was read)
        _hold(key, data)
    return data


def small_file(path: Path) -> bytes | None:
    """A small .jsonl file's bytes, read whole (fingerprinted and held, as a check's reading of
    a small file is), None for a larger one or another kind; raised as open_regular raises. One
    os.read, not open_regular's buffered file: checking 10,000 small datasets opens each."""
    if not path.name.endswith(".jsonl"):
        return None
    fd, st = open_checked(path)
    try:
        if st.st_size > HELD_FILE_BYTES:
            return None
        os.set_blocking(fd, True)
        chunks = [os.read(fd, st.st_size + 1)]
        while chunks[-1]:  # to its end, as a read of the open file would (one that grew, too)
            chunks.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return keep(st, b"".join(chunks))
