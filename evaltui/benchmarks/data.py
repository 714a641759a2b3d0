"""A benchmark dataset's records: its files found (a local copy, or the Hub's), read, and prepared.

A dataset names its benchmark and, optionally, a `path` (a file: the evaluation split, its
siblings the others; a folder: the original release's layout), a `split`, `subsets` of a
grouped benchmark and `num_fewshot`. Its records are the entry's preparation of those
documents — the reference's processing and few-shot examples as fields — made once per process
and held (they are what every sample of the dataset renders from).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.benchmarks.entry import Doc, Docs, Entry, LocalData
from evaltui.benchmarks.files import read_docs
from evaltui.benchmarks.hub import Progress

#: Raised when the way documents become records changes, so earlier predictions are set aside.
PREPARE_REVISION = 1


class DataUnavailable(Exception):
    """A benchmark's data cannot be had as asked; the message is one line naming the benchmark."""


class NotDownloaded(DataUnavailable):
    """The Hub's files are not in its cache, and no download was asked for."""


@dataclass(frozen=True)
class Wanted:
    """What one dataset asks of its benchmark."""

    entry: Entry
    path: Path | None  # a local copy; None: the Hub
    split: str
    parts: tuple[str, ...]  # a grouped benchmark's parts ("" for an ungrouped one)
    num_fewshot: int

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits read: the evaluation split, and the few-shot split when examples come from one."""
        few = self.entry.fewshot_split
        return (self.split,) if few is None or self.num_fewshot == 0 or few == self.split else (self.split, few)

    def where(self) -> str:
        """Where the data come from, for messages and `evaltui benchmarks`."""
        return str(self.path) if self.path is not None else f"the Hub: {self.entry.hub.repo}"


def wanted(entry: Entry, path: Path | None, split: str | None, subsets: Sequence[str] | None, num_fewshot: int | None) -> Wanted:
    parts = tuple(subsets) if subsets else tuple(entry.parts) or ("",)
    return Wanted(entry, path, split or entry.split, parts, entry.num_fewshot if num_fewshot is None else num_fewshot)


def _pattern(template: str, part: str) -> str:
    return template.replace("{part}", part)


def hub_patterns(w: Wanted) -> list[str]:
    files = w.entry.hub.files
    missing = [s for s in w.splits if s not in files]
    if missing:
        raise DataUnavailable(f"{w.entry.name}: the Hub copy has no split {missing[0]!r} (it has: {', '.join(files)})")
    return [_pattern(files[s], p) for s in w.splits for p in w.parts]


def local_files(w: Wanted) -> dict[tuple[str, str], list[Path]]:
    """The local copy's files of each (split, part): the original release's layout, or a copy of
    the Hub repo (a folder laid out as the Hub serves it); DataUnavailable naming what is missing."""
    assert w.path is not None
    entry, layout = w.entry, w.entry.local
    if not w.path.exists():
        raise DataUnavailable(f"{entry.name}: path {w.path} does not exist")
    try:
        if layout is None:
            return _single_file(w) if w.path.is_file() else hub_files(w, w.path)
        return _release_files(w, layout)
    except DataUnavailable as release:
        if not w.path.is_dir() or layout is None:
            raise DataUnavailable(f"{release} (or a copy of the Hub's {entry.hub.repo}: {', '.join(hub_patterns(w))})") from None
        try:
            return hub_files(w, w.path)  # a copy of the Hub repo (`huggingface-cli download --local-dir`)
        except DataUnavailable:
            raise release from None


def _single_file(w: Wanted) -> dict[tuple[str, str], list[Path]]:
    """A file as the path of a Hub-only entry: its evaluation split, when nothing else is read."""
    assert w.path is not None
    if len(w.splits) > 1 or w.parts != ("",):
        raise DataUnavailable(f"{w.entry.name}: needs more than one file ({', '.join(hub_patterns(w))}): `path` names the folder holding them")
    return {(w.split, ""): [w.path]}


def _release_files(w: Wanted, layout: LocalData) -> dict[tuple[str, str], list[Path]]:
    out: dict[tuple[str, str], list[Path]] = {}
    for split in w.splits:
        if split not in layout.files:
            raise DataUnavailable(f"{w.entry.name}: the local layout has no split {split!r} (it has: {', '.join(layout.files)})")
        for part in w.parts:
            out[(split, part)] = [_local_file(w, layout.files[split], split, part)]
    return out


def _local_file(w: Wanted, pattern: str, split: str, part: str) -> Path:
    assert w.path is not None and w.entry.local is not None
    name = _pattern(pattern, part)
    if w.path.is_file():
        # A file is the evaluation split; the other splits are its siblings, by their release names.
        candidate = w.path if split == w.split else w.path.parent / Path(name).name
    else:
        candidate = w.path / name
        if not candidate.exists() and name.startswith("data/"):
            candidate = w.path / name[len("data/"):]  # the path names the release's data/ folder itself
    if not candidate.is_file():
        raise DataUnavailable(
            f"{w.entry.name}: no {split!r} file at {candidate} (a `path` folder is laid out as {w.entry.local.release}: {name})"
        )
    return candidate


def hub_files(w: Wanted, folder: Path) -> dict[tuple[str, str], list[Path]]:
    """The downloaded snapshot's files of each (split, part), in name order."""
    out: dict[tuple[str, str], list[Path]] = {}
    for split in w.splits:
        for part in w.parts:
            pattern = _pattern(w.entry.hub.files[split], part)
            found = sorted(p for p in folder.glob(pattern) if p.is_file())
            if not found:
                raise DataUnavailable(f"{w.entry.name}: the Hub snapshot of {w.entry.hub.repo} has no file {pattern}")
            out[(split, part)] = found
    return out


def find_files(w: Wanted, progress: Progress | None = None, *, download: bool = True) -> dict[tuple[str, str], list[Path]]:
    """The files of each (split, part): the local copy's, else the Hub cache's, downloading them
    when `download` (DataUnavailable when they cannot be had)."""
    if w.path is not None:
        return local_files(w)
    from evaltui.benchmarks import hub

    patterns = hub_patterns(w)
    folder = hub.cached(w.entry.hub, patterns)
    if folder is None:
        if not download:
            raise NotDownloaded(f"{w.entry.name}: not downloaded yet")
        try:
            folder = hub.fetch(w.entry.name, w.entry.hub, patterns, progress)
        except hub.HubUnavailable as e:
            raise DataUnavailable(str(e)) from None
    return hub_files(w, folder)


def read(files: dict[tuple[str, str], list[Path]], w: Wanted) -> Docs:
    """The documents: the evaluation split's (each of a grouped benchmark's tagged with its
    `subset`, in part order) and each part's few-shot split."""
    local = w.entry.local if w.path is not None else None
    columns = (local.columns or None) if local is not None else None
    split_of = local.split_of if local is not None else None

    def docs_of(split: str, part: str) -> list[Doc]:
        return [d for path in files[(split, part)] for d in read_docs(path, columns) if split_of is None or split_of(d) == split]

    eval_docs: list[Doc] = []
    fewshot: dict[str, list[Doc]] = {}
    few = w.entry.fewshot_split
    for part in w.parts:
        eval_docs.extend({**d, "subset": part} if part else d for d in docs_of(w.split, part))
        if few is not None and (few, part) in files:
            fewshot[part] = docs_of(few, part)
    return Docs(eval_docs, fewshot, w.parts)


def prepare(w: Wanted, files: dict[tuple[str, str], list[Path]]) -> list[Doc]:
    return list(w.entry.prepare(read(files, w), w.num_fewshot, w.parts))


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _digest(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def fingerprint(w: Wanted, files: dict[tuple[str, str], list[Path]]) -> str:
    """The records' identity: the files' bytes (not where they lie), the entry and its settings."""
    h = hashlib.sha256()
    head: list[Any] = [w.entry.name, w.entry.version, PREPARE_REVISION, w.split, list(w.parts), w.num_fewshot]
    h.update(repr(head).encode())
    for key in sorted(files):
        for path in files[key]:
            h.update(f"{key}:{_digest(path)}".encode())
    return h.hexdigest()[:16]
