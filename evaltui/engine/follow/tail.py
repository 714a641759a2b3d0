"""Reading what another process appends to a file, a little at a time, never writing to it.

`evaltui watch` follows checkpoints as the run appends them: each look stats the file and reads
only the bytes added since the last one, so following costs what the run writes, not what it
has written. Those bytes come in pieces of at most PIECE, each split into its complete lines
before the next is read, so joining a run whose checkpoint is already large takes memory for a
piece, not for the file. A line still being written is held back until its end arrives. A file
that was replaced (another inode: set aside by `--fresh`, started over) or cut shorter than what
was read (a torn last line cut off by the next run) is reported as `None`: the caller starts over.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from evaltui.fsutil import not_regular

PIECE = 4 << 20  # bytes read at a time


class AppendedLines:
    def __init__(self, path: Path):
        self.path = path
        self._inode: int | None = None
        self._offset = 0
        self._partial = b""

    def pieces(self) -> Iterator[list[bytes]] | None:
        """The complete lines appended since the last call (the whole file the first time), a
        piece at a time; None when the file was replaced, cut or removed since then. Take every
        piece before calling again: what is not taken is not read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None if self._inode is not None else iter(())
        if not stat.S_ISREG(st.st_mode):  # a FIFO, a device, a folder in its place: never waited on
            raise not_regular(self.path, st.st_mode)
        if self._inode is not None and (st.st_ino != self._inode or st.st_size < self._offset):
            return None
        self._inode = st.st_ino
        if st.st_size == self._offset:
            return iter(())
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return None
        return self._read(f, st.st_size)

    def _read(self, f: BinaryIO, end: int) -> Iterator[list[bytes]]:
        with f:
            f.seek(self._offset)
            while self._offset < end:
                data = f.read(min(PIECE, end - self._offset))
                if not data:
                    return
                self._offset += len(data)
                data = self._partial + data
                cut = data.rfind(b"\n") + 1
                self._partial = data[cut:]
                if cut:
                    yield data[:cut].splitlines()
