"""Reading a plan file: parse, validate, check, and report every problem found at once.

A plan error is a user's typo, not a bug: `load_plan` never lets a traceback escape. It collects
each problem as one line `plan.toml: models[1].max_workers: must be ≥ 1 (got 0)` and raises
`PlanError` with all of them, so one run of `evaltui` shows everything to fix.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaltui.datasets import check_dataset
from evaltui.plan.checks import check_semantics
from evaltui.plan.errors import PlanError, pydantic_problems, toml_error
from evaltui.plan.schema import Plan

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


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
                problems += [f"datasets[{i}].{p}" for p in check_dataset(plan, ds)]
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


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        raise PlanError([f"{path}: plan file not found"]) from None
    except OSError as e:
        raise PlanError([f"{path}: cannot read plan file: {e.strerror or e}"]) from None
    try:
        raw: dict[str, Any] = tomllib.loads(raw_bytes.decode("utf-8"))
        return raw
    except UnicodeDecodeError as e:
        raise PlanError([f"{path.name}: not UTF-8 text ({e.reason} at byte {e.start})"]) from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError([f"{path.name}: {toml_error(e)}"]) from None


def select(plan: Plan, models: list[str] | None, datasets: list[str] | None) -> Plan:
    """The plan restricted to `--models` / `--datasets`; PlanError naming unknown abbrs."""
    problems: list[str] = []
    for flag, wanted, items in (("--models", models, plan.models), ("--datasets", datasets, plan.datasets)):
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
        update["models"] = [m for m in plan.models if m.abbr in models]
    if datasets is not None:
        update["datasets"] = [d for d in plan.datasets if d.abbr in datasets]
    return plan.model_copy(update=update)
