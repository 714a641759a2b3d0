"""Standard benchmarks by name: the catalog, and a benchmark dataset's records.

    entry     what an entry is: its reference, its fields, where its data live
    catalog   every entry by name; `lookup` refuses an unknown name with the close ones
    fill      the keys an entry puts into the plan's [[datasets]] table
    data      a dataset's files (a local copy, or the Hub's), read and prepared into records
    files     documents from parquet (pyarrow), JSON Lines, JSON and CSV files
    hub       huggingface_hub: its cache, offline mode, mirrors, tokens; a download's progress
    lmeval    lm-evaluation-harness's prompt: few-shot samplers and examples
    entries/  one module per family of entries (gsm8k, mmlu, bbh, choice, minerva, code, opencompass)

The catalog sits below the datasets and the plan: the plan's schema fills a benchmark dataset's
table from it, `evaltui.datasets` reads its records through it. Nothing here is imported by a
plan that names no benchmark, and huggingface_hub and pyarrow only when data must be read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.benchmarks.catalog import ENTRIES, lookup
from evaltui.benchmarks.data import DataUnavailable, NotDownloaded, Wanted, find_files, fingerprint, prepare, wanted
from evaltui.benchmarks.entry import Doc, Entry
from evaltui.benchmarks.hub import Progress

if TYPE_CHECKING:  # read only: the plan is above the catalog (it is filled from it)
    from evaltui.plan import DatasetConfig

__all__ = [
    "ENTRIES", "DataUnavailable", "Entry", "data_fingerprint", "data_problem", "dataset_records", "fetch", "lookup", "wanted_of",
]


def wanted_of(ds: DatasetConfig, base_dir: Path) -> Wanted:
    """What `ds` asks of its benchmark (its `path` relative to the plan's folder)."""
    assert ds.benchmark is not None
    path = None
    if ds.path:
        p = Path(ds.path).expanduser()
        path = p if p.is_absolute() else base_dir / p
    return wanted(lookup(ds.benchmark), path, ds.split, ds.subsets, ds.num_fewshot)


_RECORDS: dict[tuple[Any, ...], list[Doc]] = {}


def _key(w: Wanted, files: dict[tuple[str, str], list[Path]]) -> tuple[Any, ...]:
    stats = []
    for key in sorted(files):
        for p in files[key]:
            st = p.stat()
            stats.append((key, str(p.resolve()), st.st_mtime_ns, st.st_size))
    return (w, tuple(stats))


def dataset_records(ds: DatasetConfig, base_dir: Path, progress: Progress | None = None, *, download: bool = True) -> list[Doc]:
    """The dataset's records, in order (all of them: `limit` is the caller's); made once a process.

    DataUnavailable (one line naming the benchmark) when the files cannot be had; the Hub's are
    downloaded when not cached, unless `download` is False."""
    w = wanted_of(ds, base_dir)
    files = find_files(w, progress, download=download)
    key = _key(w, files)
    if key not in _RECORDS:
        _RECORDS[key] = prepare(w, files)
    return _RECORDS[key]


def iter_dataset_records(ds: DatasetConfig, base_dir: Path) -> Iterator[Doc]:
    yield from dataset_records(ds, base_dir)


def fetch(ds: DatasetConfig, base_dir: Path, progress: Progress | None = None) -> None:
    """Make the dataset's files available (downloading what the Hub cache lacks) and its records."""
    dataset_records(ds, base_dir, progress)


def data_fingerprint(ds: DatasetConfig, base_dir: Path) -> str | None:
    """The identity of the dataset's records (its files' bytes, entry and settings); None when
    its files cannot be had without a download."""
    w = wanted_of(ds, base_dir)
    try:
        return fingerprint(w, find_files(w, download=False))
    except (DataUnavailable, OSError):
        return None


def data_problem(ds: DatasetConfig, base_dir: Path) -> tuple[str | None, bool]:
    """(why the dataset's data cannot be had, as a plan problem `field: message`, or None;
    whether they are here to read now). Data the Hub cache lacks are no problem unless
    huggingface_hub is offline: the run downloads them."""
    w = wanted_of(ds, base_dir)
    field = "path" if w.path is not None else "benchmark"
    try:
        find_files(w, download=False)
        return None, True
    except NotDownloaded:
        pass
    except DataUnavailable as e:
        return f"{field}: {e}", False
    from evaltui.benchmarks import hub

    if hub.offline():
        problem = (f"benchmark: {w.entry.name}: HF_HUB_OFFLINE is set and its files ({w.entry.hub.repo}) are not in the Hub cache "
                   "(HF_HOME): pass `path` to a local copy")
        return problem, False
    return None, False
