"""Dataset records from .jsonl, .jsonl.gz, .json and .csv files, and the samples made from them.

Records are plain dicts. A run reads them as its workers take them (`open_records`) and renders a
sample only when it is about to be sent, so a large dataset costs memory for the samples in
flight, not for its records (a .json array is the exception: it is parsed whole). What is learnt
of a data file on the way (its count, fingerprint, a small one's bytes) is kept by the file's
identity (`kept`), so that 10,000 small datasets are not each read again.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import os
import sys
import zlib
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui import fastjson
from evaltui.datasets.kept import (
    ANY_SIZE,
    FIRST_READ_BYTES,
    HELD_FILE_BYTES,
    Hashing,
    count_key,
    counted,
    file_fingerprint,
    file_key,
    held_bytes,
    keep,
    small_file,
)
from evaltui.datasets.kept import known_count as known
from evaltui.fsutil import Unreadable, open_regular
from evaltui.templates import (
    Sample,
    check_records,
    field_checks,
    is_conversation,
    render_sample,
    template_fields,
    templates_of,
)

__all__ = [  # the templates' names, long imported from here
    "DatasetError", "Sample", "check_dataset", "count_records", "file_fingerprint", "is_conversation", "iter_records", "known_count",
    "load_records", "open_records", "render_sample", "template_fields", "templates_of",
]

if TYPE_CHECKING:  # only read here: the plan is above the datasets (it checks them)
    from evaltui.plan import DatasetConfig, Plan


class DatasetError(Exception):
    """A data file that cannot be read as records; the message names the place."""


#: The longest record (a .jsonl line, a .csv row's line) read: 16 Mi characters. A 2 GB sparse
#: file (one line of NULs) was read whole, 4.2 GB in memory, before it was refused.
MAX_RECORD_CHARS = 16 << 20
#: The largest .json file read (it is parsed whole); the line-per-record formats have no bound
#: but their records'.
MAX_JSON_BYTES = 256 << 20


def _open_text(path: Path, fingerprint: bool = False, held: bytes | None = None) -> io.TextIOBase:
    """The file as text, once it is known to be a regular file (a FIFO would hang the reader);
    `fingerprint`: its bytes hashed on the way (kept.Hashing), not .gz; `held`: its bytes, kept."""
    if held is not None:
        return io.TextIOWrapper(io.BytesIO(held), encoding="utf-8-sig", newline="")
    raw = open_regular(path, MAX_JSON_BYTES if path.name.endswith(".json") else ANY_SIZE)
    if fingerprint and not path.name.endswith(".gz"):
        st = os.fstat(raw.fileno())
        if st.st_size <= HELD_FILE_BYTES:  # read whole, hashed and held at once: the layers of Hashing were most of a small file's cost
            with raw:
                data = raw.read()
            return io.TextIOWrapper(io.BytesIO(keep(st, data)), encoding="utf-8-sig", newline="")
        raw = io.BufferedReader(Hashing(raw))
    if path.name.endswith(".gz"):
        raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")  # -sig: a leading BOM is not data


def _split_lines(data: bytes) -> list[str] | None:
    """A small file's lines as _lines gives them (each with its "\n", a leading BOM dropped), in
    one decode and one split; None where that could differ (bytes that are not UTF-8, whose error
    is the incremental reader's to report; a "\r", which it also ends a line at): then the file
    is read through io as any other."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text or len(text) > MAX_RECORD_CHARS:
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    last = lines.pop()
    whole = [line + "\n" for line in lines]
    if last:
        whole.append(last)
    return whole


def _lines(f: io.TextIOBase, name: str) -> Iterator[str]:
    """The file's lines, none read past MAX_RECORD_CHARS."""
    read = f.readline
    lineno = 0
    while line := read(MAX_RECORD_CHARS + 1):
        lineno += 1
        if len(line) > MAX_RECORD_CHARS:
            raise DatasetError(f"{name} line {lineno}: longer than {MAX_RECORD_CHARS:,} characters, the most a record may be (is it a data file?)")
        yield line


def iter_records(
    path: Path, columns: list[str] | None = None, skip: Container[int] = (), fingerprint: bool = False, held: bytes | None = None
) -> Iterator[dict[str, Any] | None]:
    """Yield the file's records in order; DatasetError names the line or item that is wrong.

    A record whose index is in `skip` (a resumed run's finished samples) is yielded as None,
    unread where the format allows: a .jsonl line is not parsed. `held`: the file's bytes, kept
    (kept.py) since they were read, for the file itself."""
    name = path.name
    try:
        if name.endswith((".jsonl", ".jsonl.gz")):
            yield from _jsonl_records(path, skip, fingerprint, held)
        elif name.endswith(".json"):
            yield from _json_records(path, fingerprint, held)
        elif name.endswith(".csv"):
            yield from _csv_records(path, columns, fingerprint, held)
        elif name.endswith(".parquet"):
            yield from _parquet_records(path, skip)
        else:
            raise DatasetError(f"{name}: unsupported file type")
    except Unreadable as e:
        raise DatasetError(f"{name}: cannot read: it {e.problem}") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error, RecursionError) as e:
        raise DatasetError(f"{name}: cannot read: {e}") from None


def _jsonl_records(path: Path, skip: Container[int], fingerprint: bool = False, held: bytes | None = None) -> Iterator[dict[str, Any] | None]:
    if held is None and fingerprint:
        held = small_file(path)
    lines = None if held is None else _split_lines(held)
    if lines is not None:  # a small file's bytes in hand: split at once, not read a line at a time through io
        yield from _parsed(path.name, lines, skip)
        return
    with _open_text(path, fingerprint, held) as f:
        yield from _parsed(path.name, _lines(f, path.name), skip)


def _parsed(name: str, lines: Iterable[str], skip: Container[int]) -> Iterator[dict[str, Any] | None]:
    index = -1
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        index += 1
        if index in skip:
            yield None
            continue
        try:
            rec = fastjson.loads_exact(line)
        except ValueError as e:
            raise DatasetError(f"{name} line {lineno}: not valid JSON ({e})") from None
        if not isinstance(rec, dict):
            raise DatasetError(f"{name} line {lineno}: expected a JSON object, got {type(rec).__name__}")
        yield rec


def _parquet_records(path: Path, skip: Container[int]) -> Iterator[dict[str, Any] | None]:
    """A parquet file's rows (pyarrow, imported only here), a row group at a time."""
    from evaltui.benchmarks.files import DataFileError, parquet_docs

    try:
        for index, rec in enumerate(parquet_docs(path)):
            yield None if index in skip else rec
    except DataFileError as e:
        raise DatasetError(str(e)) from None


def _benchmark_records(plan: Plan, ds: DatasetConfig) -> list[dict[str, Any]]:
    """A benchmark dataset's records, up to `limit` (evaltui.benchmarks, imported only for one)."""
    from evaltui.benchmarks import DataUnavailable, dataset_records

    try:
        records = dataset_records(ds, plan.base_dir)
    except DataUnavailable as e:
        raise DatasetError(str(e)) from None
    except (OSError, ValueError) as e:
        raise DatasetError(f"{ds.benchmark}: cannot read its data: {e}") from None
    return records[: ds.limit] if ds.limit else records


def _json_records(path: Path, fingerprint: bool = False, held: bytes | None = None) -> Iterator[dict[str, Any]]:
    name = path.name
    with _open_text(path, fingerprint, held) as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise DatasetError(f"{name}: not valid JSON ({e})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{name}: expected a JSON array of objects, got {type(data).__name__}")
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DatasetError(f"{name} item {i}: expected a JSON object, got {type(rec).__name__}")
        yield rec


def _csv_records(path: Path, columns: list[str] | None, fingerprint: bool = False, held: bytes | None = None) -> Iterator[dict[str, Any]]:
    name = path.name
    with _open_text(path, fingerprint, held) as f:
        reader = csv.reader(_lines(f, name))
        header = list(columns) if columns else next(reader, None)
        if header is None:
            return
        for rowno, row in enumerate(reader, 1 if columns else 2):
            if not row or (rowno == 1 and row == header):
                continue  # blank, or a header row that names exactly the given columns
            if len(row) != len(header):
                raise DatasetError(f"{name} row {rowno}: {len(row)} values but {len(header)} columns ({', '.join(header)})")
            yield dict(zip(header, row, strict=False))


def count_records(plan: Plan, ds: DatasetConfig) -> int:
    if ds.benchmark:
        return len(_benchmark_records(plan, ds))
    known = known_count(plan, ds)
    return known if known is not None else sum(1 for _ in open_records(plan, ds))


def known_count(plan: Plan, ds: DatasetConfig) -> int | None:
    """The records counted when the data file was checked, if it is the same file still (a stat,
    no read); None when they are to be counted."""
    return None if ds.benchmark else known(count_key(plan.dataset_path(ds), ds))


def open_records(plan: Plan, ds: DatasetConfig, skip: Container[int] = ()) -> Iterator[dict[str, Any] | None]:
    """The dataset's records (up to `limit`), read as they are taken, None for those in `skip`;
    the file is opened, and its first record read, before this returns, so an unreadable file is
    a DatasetError here."""
    if ds.benchmark:
        held = _benchmark_records(plan, ds)
        return iter([None if i in skip else r for i, r in enumerate(held)])
    # The bytes held since the file was checked, while it is the same file (a stat): a run of
    # 10,000 small datasets opened and read each one again, on the loop, as it started. Only a
    # file that its first read takes whole anyway: a larger one is read as its records are taken
    # (one cut short mid-run fails the samples it lost, not the run's others; test_load.py).
    path = plan.dataset_path(ds)
    kept = held_bytes(file_key(path))
    records = iter_records(path, ds.columns or None, skip, held=kept if kept is not None and len(kept) <= FIRST_READ_BYTES else None)
    if ds.limit:
        records = itertools.islice(records, ds.limit)
    try:
        first = next(records)
    except StopIteration:
        return iter(())
    return itertools.chain((first,), records)


def load_records(plan: Plan, ds: DatasetConfig) -> list[dict[str, Any]]:
    """The records, held for the run: field names interned, as every record repeats them.

    json.loads gives each record its own copies of the names; 200,000 records of two fields
    held 26 MB of them (of ~100 MB), for 0.05 s more CPU.
    """
    if ds.benchmark:
        return _benchmark_records(plan, ds)
    intern = sys.intern
    path = plan.dataset_path(ds)
    records: list[dict[str, Any]] = []
    for rec in iter_records(path, ds.columns or None, held=held_bytes(file_key(path))):
        assert rec is not None  # nothing skipped
        records.append({intern(k): v for k, v in rec.items()})
        if ds.limit and len(records) >= ds.limit:
            break
    return records


# a record without a template's field in a .csv without `columns`: its first row was the header
_CSV_HEADER_HINT = "; a .csv's first row is read as its header (those are its fields): a file without one needs `columns`"


def check_dataset(plan: Plan, ds: DatasetConfig) -> list[str]:
    """Problems with a dataset's data: unreadable file, no records, or a record a template can't fill.

    Every record is rendered through every template, as the run will, so a format spec that
    does not fit a value (`{n:d}` on a string) or a nested key one record lacks is reported
    now, with the record's index, instead of failing that sample hours into the run.
    """
    templates = templates_of(ds)
    needs = {name: template_fields(tpl) for name, tpl in templates.items()}
    checks = {name: tpl for name, tpl in templates.items() if needs[name]}  # no field: nothing to fail
    if ds.benchmark:
        return _check_benchmark(plan, ds, checks, needs)
    path = plan.dataset_path(ds)
    key = count_key(path, ds)  # before the file is read: a change while it is, is a change after
    records = iter_records(path, ds.columns or None, fingerprint=True)  # the read planning's file_fingerprint then needs not make
    try:
        count, problems = check_records(records, ds.limit, checks, needs, field_checks(ds))
    except DatasetError as e:
        return [f"path: {e}"]
    if key is not None:
        counted(key, count)
    if path.name.endswith(".csv") and not ds.columns:
        problems = [p + _CSV_HEADER_HINT if " has no field " in p else p for p in problems]
    if count == 0:
        hint = ""
        if path.name.endswith(".csv") and not ds.columns:
            hint = " (its first row was read as the header; a CSV without one needs `columns`)"
        problems.append(f"path: {path.name} has no records{hint}")
    return problems


def _check_benchmark(plan: Plan, ds: DatasetConfig, checks: dict[str, str], needs: dict[str, set[str]]) -> list[str]:
    """A benchmark dataset's data: refused when they cannot be had (a bad `path`; offline and not
    cached), checked like any dataset's when they are here, left to the run (which downloads
    them, showing its progress, then checks them) when the Hub cache lacks them."""
    from evaltui.benchmarks import data_problem

    problem, ready = data_problem(ds, plan.base_dir)
    if problem is not None:
        return [problem]
    if not ready:
        return []
    try:
        records = _benchmark_records(plan, ds)
    except DatasetError as e:
        return [f"benchmark: {e}"]
    count, problems = check_records(iter(records), ds.limit, checks, needs, field_checks(ds))
    if count == 0:
        problems.append(f"benchmark: {ds.benchmark}: no records (split {ds.split!r}, subsets {ds.subsets!r})")
    return problems
