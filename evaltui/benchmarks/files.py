"""Documents from the files benchmarks come in: the Hub's parquet (read with pyarrow), and the
original releases' JSON Lines (gzipped or not), JSON and CSV.

pyarrow is imported only when a parquet file is read: a plan without one never loads it.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evaltui import fastjson
from evaltui.fsutil import Unreadable, open_regular

Doc = dict[str, Any]
#: A benchmark's file is read whole: at most this many bytes (MMLU's largest split is 6 MB, a
#: parquet file of MATH's 12,500 problems 9 MB), and only a regular file (a FIFO would hang).
MAX_BYTES = 1 << 30


class DataFileError(Exception):
    """A data file that cannot be read as documents; the message names the file and the place."""


def read_docs(path: Path, columns: Sequence[str] | None = None) -> list[Doc]:
    """Every document of `path`, in order; `columns`: a CSV without a header row."""
    name = path.name
    try:
        if name.endswith(".parquet"):
            return list(parquet_docs(path))
        if name.endswith((".jsonl", ".jsonl.gz")):
            return list(_jsonl(path))
        if name.endswith(".json"):
            return _json(path)
        if name.endswith(".csv"):
            return _csv(path, columns)
    except Unreadable as e:
        raise DataFileError(f"{name}: cannot read: it {e.problem}") from None
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise DataFileError(f"{name}: cannot read: {e}") from None
    raise DataFileError(f"{name}: unsupported file type")


def parquet_docs(path: Path) -> Iterator[Doc]:
    """A parquet file's rows as dicts, a row group at a time (memory follows a row group, not the file)."""
    try:
        import pyarrow.parquet as pq
        from pyarrow import ArrowException
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise DataFileError(f"{path.name}: reading parquet needs pyarrow (pip install pyarrow)") from None
    try:
        with open_regular(path, MAX_BYTES) as f:
            pf = pq.ParquetFile(f)
            for group in range(pf.num_row_groups):
                yield from pf.read_row_group(group).to_pylist()
    except Unreadable as e:
        raise DataFileError(f"{path.name}: cannot read: it {e.problem}") from None
    except ArrowException as e:
        raise DataFileError(f"{path.name}: not a readable parquet file ({e})") from None


def _text(path: Path) -> io.TextIOBase:
    raw: Any = open_regular(path, MAX_BYTES)
    if path.name.endswith(".gz"):
        raw = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def _jsonl(path: Path) -> Iterator[Doc]:
    with _text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = fastjson.loads_exact(line)
            except ValueError as e:
                raise DataFileError(f"{path.name} line {lineno}: not valid JSON ({e})") from None
            if not isinstance(doc, dict):
                raise DataFileError(f"{path.name} line {lineno}: expected a JSON object")
            yield doc


def _json(path: Path) -> list[Doc]:
    with _text(path) as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise DataFileError(f"{path.name}: not valid JSON ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("examples"), list):
        data = data["examples"]  # BIG-Bench's task files: {"examples": [...]}
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise DataFileError(f"{path.name}: expected a JSON array of objects")
    return data


def _csv(path: Path, columns: Sequence[str] | None) -> list[Doc]:
    with _text(path) as f:
        reader = csv.reader(f)
        header = list(columns) if columns else next(reader, None)
        if header is None:
            return []
        docs = []
        for rowno, row in enumerate(reader, 1 if columns else 2):
            if not row:
                continue
            if len(row) != len(header):
                raise DataFileError(f"{path.name} row {rowno}: {len(row)} values but {len(header)} columns")
            docs.append(dict(zip(header, row, strict=True)))
        return docs
