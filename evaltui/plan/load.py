"""Reading a plan file: parse, validate, check, and report every problem found at once.

A plan error is a user's typo, not a bug: `load_plan` never lets a traceback escape. It collects
each problem as one line `plan.toml: models[1].max_workers: must be ≥ 1 (got 0)` and raises
`PlanError` with all of them, so one run of `evaltui` shows everything to fix.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaltui.datasets import check_dataset, count_records
from evaltui.fsutil import Unreadable, read_regular
from evaltui.plan.checks import check_semantics
from evaltui.plan.errors import PlanError, pydantic_problems, toml_error
from evaltui.plan.schema import DatasetConfig, ModelConfig, Plan

try:  # tomli's wheels are compiled (mypyc): 10,000 datasets' plan parses in 0.11 s, not 0.36
    import tomli as tomllib
except ImportError:  # pragma: no cover - a source-only install: the same parser, pure Python
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        raise


def load_plan(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None, check_data: bool = True) -> Plan:
    """Read, validate and check a plan file; raise PlanError listing every problem found."""
    path = Path(path)
    name = path.name
    environ: Mapping[str, str] = os.environ if env is None else env
    raw = _read_toml(path)
    # `source` is set here, not by the user: a `source` key in the file is as unknown as any typo.
    shadowed = ["source: unknown key (known keys: title, run, models, datasets)"] if "source" in raw else []
    try:
        plan = Plan.model_validate({**raw, "source": path.resolve()}, context={"base_dir": path.resolve().parent})
    except ValidationError as e:
        raise PlanError([f"{name}: {p}" for p in shadowed + pydantic_problems(e, raw)]) from None
    problems = shadowed + check_semantics(plan, environ)
    if check_data:
        for i, ds in enumerate(plan.datasets):
            if not any(p.startswith(f"datasets[{i}].") for p in problems):
                found = check_dataset(plan, ds)
                if not found and ds.sample_ids is not None:
                    found = _beyond(plan, ds, ds.sample_ids, "sample_ids")
                problems += [f"datasets[{i}].{p}" for p in found]
    if problems:
        raise PlanError([f"{name}: {p}" for p in problems])
    return plan


def read_snapshot(path: str | os.PathLike[str]) -> Plan:
    """A work dir's `plan.toml` as a run wrote it: its schema is checked, not its surroundings.

    `evaltui watch` may follow a run from where the plan's API keys are unset and its data files
    absent (another shell, a copy of the work dir); it needs the plan's shape only, so the checks
    of `load_plan` that look at the environment and the data are not made."""
    path = Path(path)
    raw = _read_toml(path)
    try:
        return Plan.model_validate({**raw, "source": path.resolve()}, context={"base_dir": path.resolve().parent})
    except ValidationError as e:
        raise PlanError([f"{path}: {p}" for p in pydantic_problems(e, raw)]) from None


def _beyond(plan: Plan, ds: DatasetConfig, indices: list[int], field: str) -> list[str]:
    """A problem when the highest index is not a sample of the dataset (its records, up to limit)."""
    count = count_records(plan, ds)
    if indices and indices[-1] >= count:
        return [f"{field}: {indices[-1]} is not a sample of this dataset, which has {count} (indices count from 0)"]
    return []


def samples_spec(indices: Sequence[int]) -> str:
    """Sorted indices written as parse_samples reads them, runs as ranges: `3,17,40-60`."""
    parts: list[str] = []
    start = prev = None
    for i in [*indices, None]:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(parts)


MAX_SELECTED = 10_000_000  # indices one selection may name
_INDEX_DIGITS = 15  # an index is below 10^15 (no dataset has more records)


def parse_samples(text: str) -> list[int]:
    """`3,17,40-60` as the sorted indices it names (a range includes both ends); ValueError if it
    is not that. Sizes are checked range by range, before any is expanded."""
    ranges: list[tuple[int, int]] = []
    named = 0
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        if not (_ascii_digits(first) and (not dash or _ascii_digits(last))):
            raise ValueError(f"{part!r} is neither an index nor a range like 40-60 (ASCII digits)")
        if max(len(first), len(last)) > _INDEX_DIGITS:
            raise ValueError(f"{part!r} is too large an index")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise ValueError(f"the range {part} ends before it starts")
        named += hi - lo + 1
        if named > MAX_SELECTED:
            raise ValueError(f"the ranges name more than {MAX_SELECTED:,} samples (at {part})")
        ranges.append((lo, hi))
    found: set[int] = set()
    for lo, hi in ranges:
        found.update(range(lo, hi + 1))
    return sorted(found)


def _ascii_digits(text: str) -> bool:
    """`0`–`9` only: str.isdigit also takes `²` and other digits int() refuses."""
    return text.isascii() and text.isdigit()


#: The largest plan file read: a plan of 10,000 datasets is ~3 MB, one that lists millions of
#: sample_ids tens; /dev/zero named as the plan grew to 23.5 GB before the kernel killed it.
PLAN_BYTES = 64 << 20
#: Tables and arrays nested deeper than this are refused: no plan needs more than a few levels,
#: and a 5,000-deep array was a RecursionError traceback (the TOML parser recurses, and so do
#: pydantic, the plan snapshot's writer and the JSON of a request).
MAX_NESTING = 32


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw_bytes = read_regular(path, PLAN_BYTES)
    except FileNotFoundError:
        raise PlanError([f"{path}: plan file not found"]) from None
    except Unreadable as e:
        raise PlanError([f"{path}: cannot read plan file: it {e.problem}"]) from None
    except OSError as e:
        raise PlanError([f"{path}: cannot read plan file: {e.strerror or e}"]) from None
    try:
        raw: dict[str, Any] = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PlanError([f"{path.name}: not UTF-8 text ({e.reason} at byte {e.start})"]) from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError([f"{path.name}: {toml_error(e)}"]) from None
    except RecursionError:
        raise PlanError([f"{path.name}: invalid TOML: arrays or tables nested more than {MAX_NESTING} deep"]) from None
    deep = _too_deep(raw)
    if deep is not None:
        raise PlanError([f"{path.name}: {deep}: arrays or tables nested more than {MAX_NESTING} deep"])
    return raw


def _too_deep(raw: dict[str, Any]) -> str | None:
    """The path of the first value nested more than MAX_NESTING deep, None when none is;
    walked without recursion. Only tables and arrays are walked (a plan of 10,000 datasets has
    60,000 other values): a value too deep is found as its table or array is, where the walk of
    every value found it (the next one taken, a child of the same name, as names stop at _NAMED_LEVELS)."""
    stack: list[tuple[Any, str, int]] = [(raw, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_NESTING or (depth == MAX_NESTING and value):
            return f"{where}…"
        named = depth < _NAMED_LEVELS  # the field is named by its first levels; the rest is a run of brackets
        if isinstance(value, dict):
            stack += [(v, (f"{where}.{k}" if where else str(k)) if named else where, depth + 1) for k, v in value.items() if isinstance(v, (dict, list))]
        else:
            stack += [(v, f"{where}[{i}]" if named else where, depth + 1) for i, v in enumerate(value) if isinstance(v, (dict, list))]
    return None


_NAMED_LEVELS = 3


def select(plan: Plan, models: list[str] | None, datasets: list[str] | None, samples: list[int] | None = None) -> Plan:
    """The plan restricted to `--models` / `--datasets` / `--samples` (the same indices of every
    dataset, in place of its sample_ids); PlanError naming unknown abbrs or indices."""
    problems: list[str] = []
    for flag, wanted, items in (("--models", models, plan.tested), ("--datasets", datasets, plan.datasets)):
        if wanted is None:
            continue
        known = [x.abbr for x in items]
        for w in wanted:
            if w not in known:
                problems.append(f"{plan.source.name}: {flag}: unknown abbr {w!r} (the plan has: {', '.join(known)})")
    if problems:
        raise PlanError(problems)
    update: dict[str, Any] = {}
    if models is not None:
        update["models"] = _with_judges(plan, models)
    chosen = [d for d in plan.datasets if datasets is None or d.abbr in datasets]
    if samples is not None:
        problems = [f"{plan.source.name}: --samples: {d.abbr}: {p.split(': ', 1)[1]}" for d in chosen for p in _beyond(plan, d, samples, "--samples")]
        if problems:
            raise PlanError(problems)
        chosen = [d.model_copy(update={"sample_ids": samples}) for d in chosen]
    if datasets is not None or samples is not None:
        update["datasets"] = chosen
    return plan.model_copy(update=update)


def _with_judges(plan: Plan, models: list[str]) -> list[ModelConfig]:
    """The models named, and every judge: they grade whichever models are run."""
    return [m for m in plan.models if m.abbr in models or m.role == "judge"]
