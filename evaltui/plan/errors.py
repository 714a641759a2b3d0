"""A plan problem as one line a user can act on: `models[1].max_workers: must be ≥ 1 (got 0)`.

TOML syntax errors and pydantic's validation errors are both turned into `field.path: message`
lines here (the loader prefixes the file name), so a typo never shows as a traceback.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from evaltui.plan.schema import Plan


class PlanError(Exception):
    """The plan (or the command line naming parts of it) is invalid; `problems` are ready to print."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def toml_error(e: Exception) -> str:
    msg = str(e)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        return f"line {m.group(1)}, column {m.group(2)}: invalid TOML: {msg[: m.start()].strip()}"
    m = re.search(r"\(at end of document\)", msg)
    if m:
        return f"end of file: invalid TOML: {msg[: m.start()].strip()}"
    return f"invalid TOML: {msg}"


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


_TYPE_NAMES = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "true or false",
    "dict": "a table",
    "list": "an array",
    "model": "a table",
}


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Plan
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        ann = field.annotation
        inner = getattr(ann, "__args__", (ann,))
        sub = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is None:
            return []
        model = sub
    return [k for k in model.model_fields if k != "source"]


def pydantic_problems(e: ValidationError, raw: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for err in e.errors(include_url=False):
        loc = tuple(err["loc"])
        # pydantic reports Literal/union failures under a synthetic tag; keep the field path.
        loc = tuple(p for p in loc if not (isinstance(p, str) and (p.startswith("literal[") or p in ("str", "int", "float", "EvaluatorConfig"))))
        kind = err["type"]
        ctx = err.get("ctx") or {}
        got = err.get("input")
        where = _loc(loc)
        if kind == "extra_forbidden":
            known = _known_keys(loc)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else (f" (known keys: {', '.join(known)})" if known else "")
            problems.append(f"{where}: unknown key{hint}")
        elif kind == "missing":
            problems.append(f"{where}: required field is missing")
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            sym = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
            bound = next(iter(ctx.values()))
            problems.append(f"{where}: must be {sym} {bound} (got {got!r})")
        elif kind == "literal_error":
            problems.append(f"{where}: must be one of {ctx.get('expected')} (got {got!r})")
        elif kind == "finite_number":
            problems.append(f"{where}: must be a finite number (got {got!r})")
        elif kind == "value_error":
            problems.append(f"{where}: {ctx.get('error', err['msg'])}")
        elif kind == "too_short":
            problems.append(f"{where}: needs at least {ctx.get('min_length', 1)} entry")
        elif kind.endswith("_type") or kind.endswith("_parsing"):
            base = kind.rsplit("_", 1)[0]
            want = _TYPE_NAMES.get(base, base)
            problems.append(f"{where}: expected {want} (got {_toml_type(got)} {got!r})")
        else:
            problems.append(f"{where}: {err['msg']} (got {got!r})")
    # Duplicates arise when one key fails in several union arms; keep the first.
    return list(dict.fromkeys(problems))


def _toml_type(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", dict: "table", list: "array"}.get(type(v), type(v).__name__)
