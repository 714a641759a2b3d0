"""The text of a work dir's `plan.toml`: `tomli_w.dumps` of the plan's snapshot, made faster.

10,000 datasets of 29 settings each took tomli_w 0.55 s, before the first request. Their tables
are alike but for `abbr` and `path`: each kind of table (its other settings) is written by tomli_w
once, with stand-ins for those two strings, and each dataset's table is that text with its own
two strings put in, written as tomli_w writes a string. The text is tomli_w's, byte for byte
(tests/test_plan_snapshot.py compares them); a plan this cannot vouch for is written by tomli_w
whole.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import orjson
import tomli_w

from evaltui.fsutil import real_path_text
from evaltui.plan.schema import Plan, _drop_none
from evaltui.plan.strict import settings_key

#: A string tomli_w writes as it is, between double quotes: no quote, backslash or control character.
_PLAIN = re.compile(r'[^"\\\x00-\x1f\x7f]*')
_PUT_IN = ("abbr", "path")


def dumps_snapshot(data: dict[str, Any]) -> str:
    """`tomli_w.dumps(data)`, the same text."""
    datasets = data.get("datasets")
    if not isinstance(datasets, list) or not datasets or list(data)[-1] != "datasets":
        return tomli_w.dumps(data)
    head = tomli_w.dumps({k: v for k, v in data.items() if k != "datasets"})
    if not head:  # (then the tables are not preceded by a blank line)
        return tomli_w.dumps(data)
    stand_in = {k: f"evaltui-{k}-{secrets.token_hex(8)}" for k in _PUT_IN}  # in no plan
    kinds: dict[bytes, str] = {}
    parts = [head]
    for ds in datasets:
        if not (isinstance(ds, dict) and all(isinstance(ds.get(k), str) for k in _PUT_IN)):
            return tomli_w.dumps(data)
        like = {**ds, **stand_in}  # (both keys are there: their places kept)
        try:
            kind = orjson.dumps(like)
        except TypeError:  # not JSON (a date, an integer beyond 64 bits): not vouched for
            return tomli_w.dumps(data)
        text = kinds.get(kind)
        if text is None:
            # An array of tables only while no table fits on one line (then it is an inline array):
            # one that does not with "" as its strings does not with any string.
            if not tomli_w.dumps({"datasets": [{**like, **dict.fromkeys(_PUT_IN, "")}]}).startswith("[[datasets]]\n"):
                return tomli_w.dumps(data)
            text = kinds[kind] = tomli_w.dumps({"datasets": [like]})
            if any(text.count(f'"{s}"') != 1 for s in stand_in.values()):
                return tomli_w.dumps(data)
        for k in _PUT_IN:
            text = text.replace(f'"{stand_in[k]}"', _string(ds[k]))
        parts.append(text)
    return "\n".join(parts)


def _string(s: str) -> str:
    """`s` as tomli_w writes a string value."""
    if _PLAIN.fullmatch(s):
        return f'"{s}"'
    return tomli_w.dumps({"s": s})[len("s = ") : -1]


def snapshot_to_write(plan: Plan) -> dict[str, Any]:
    """`plan.snapshot()` for dumps_snapshot to write: the same data, each kind of dataset table
    (alike but for abbr and path: settings_key) dumped once, each dataset's a copy with its own
    abbr and path (its real path, as snapshot() has it). Dumping 10,000 datasets' settings and
    dropping their None values was ~0.1 s of a run's start. The copies share the kind's inner
    tables (its evaluator's): data to write, not to change."""
    data = plan.model_copy(update={"datasets": []}).snapshot()
    kinds: dict[bytes, dict[str, Any]] = {}
    folders: dict[str, str] = {}  # each resolved once (real_path_text)
    tables = []
    for ds in plan.datasets:
        kind = settings_key(ds, _PUT_IN)
        table = None if kind is None else kinds.get(kind)
        if table is None:
            table = _drop_none(ds.model_dump(mode="json"))
            if kind is not None:
                kinds[kind] = table
        path = real_path_text(plan.dataset_path(ds), folders) if ds.path or not ds.benchmark else ds.path  # a benchmark's "" (the Hub) stays ""
        tables.append({**table, "abbr": ds.abbr, "path": path})
    data["datasets"] = tables
    return data
