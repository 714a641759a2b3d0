"""Reading what another process appends to a file, a little at a time, never writing to it.

`evaltui watch` follows checkpoints as the run appends them: each look stats the file and reads
only the bytes added since the last one, so following costs what the run writes, not what it
has written. A line still being written is held back until its end arrives. A file that was
replaced (another inode: set aside by `--fresh`, started over) or cut shorter than what was read
(a torn last line cut off by the next run) is reported as `None`: the caller starts over.
"""

from __future__ import annotations

import os
from pathlib import Path


class AppendedLines:
    def __init__(self, path: Path):
        self.path = path
        self._inode: int | None = None
        self._offset = 0
        self._partial = b""

    def read(self) -> list[bytes] | None:
        """The complete lines appended since the last call (the whole file the first time);
        None when the file was replaced, cut or removed since then."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None if self._inode is not None else []
        if self._inode is not None and (st.st_ino != self._inode or st.st_size < self._offset):
            return None
        self._inode = st.st_ino
        if st.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except FileNotFoundError:
            return None
        self._offset += len(data)
        data = self._partial + data
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        return data[:end].splitlines()
