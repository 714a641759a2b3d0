"""What a benchmark puts into the plan's dataset table: the keys the plan leaves out.

The plan's schema calls `fill` on each [[datasets]] table before validating it, so a benchmark
dataset is validated, checked, fingerprinted and run as the same table written out by hand
would be. A key the plan sets wins (the version column then says the entry was changed); an
evaluator table the plan gives is merged over the entry's when it keeps the entry's type (so
`[datasets.evaluator] reducer = "pass_at_k"` changes only the reducer). `fewshot_as_multiturn`
turns the entry's system and prompt into `messages`, as lm-eval's flag does (`multiturn_messages`).
"""

from __future__ import annotations

import copy
from typing import Any

from evaltui.benchmarks.catalog import lookup

#: The keys an entry fills, with the value a plain dataset has when it leaves one out.
FILLED: dict[str, Any] = {
    "prompt": None, "system": "", "system_join": "\n\n", "target": None, "mode": "gen", "choices": [], "stop": None, "max_tokens": None,
    "temperature": None, "evaluator": None,
}


def fill(data: dict[str, Any]) -> dict[str, Any]:
    """The table with the entry's keys added where the plan has none (an unknown name: unchanged
    but for placeholders, so the name's own error is the only one reported)."""
    name = data.get("benchmark")
    if not isinstance(name, str):
        return data
    try:
        lookup(name)
    except ValueError:
        return {"path": "", "prompt": "", "target": "", **data}
    out = dict(data)
    out.setdefault("path", "")  # "": the Hub
    if data.get("fewshot_as_multiturn") is True and not any(k in data for k in ("prompt", "system", "messages")):
        out["messages"] = multiturn_messages(name, data.get("num_fewshot"))
    for key, value in entry_fields(name).items():
        if key == "evaluator" or (key in ("prompt", "system") and "messages" in out):
            continue
        out.setdefault(key, value)
    theirs = data.get("evaluator")
    ours = entry_fields(name)["evaluator"]
    if not isinstance(theirs, dict):
        out["evaluator"] = ours if theirs is None else theirs
    elif theirs.get("type", ours["type"]) == ours["type"]:
        out["evaluator"] = {**ours, **theirs}
    return out


def entry_fields(name: str) -> dict[str, Any]:
    """Every key the entry fills (those it does not name at their plain-dataset values), a fresh copy."""
    entry = lookup(name)
    fields = {k: v for k, v in FILLED.items() if v is not None}
    fields.update(copy.deepcopy(dict(entry.fields)))
    return fields


def multiturn_messages(name: str, num_fewshot: Any) -> list[dict[str, str]]:
    """lm-eval's `fewshot_as_multiturn`: the description as the system message, each example a
    user turn (its question) and an assistant turn (its answer), then the question — templates
    over the record's `fewshot_q<i>`, `fewshot_a<i>` (lmeval.with_fewshot); an entry whose
    examples are part of its prompt gives its own (`Entry.turns`)."""
    entry = lookup(name)
    if entry.turns:  # examples written into the prompt: the reference's own turns
        return [dict(m) for m in entry.turns]
    prompt, system = str(entry.fields["prompt"]), str(entry.fields.get("system", ""))
    n = num_fewshot if isinstance(num_fewshot, int) and 0 <= num_fewshot <= 100 else entry.num_fewshot
    messages = [{"role": "system", "content": system}] if system else []
    if prompt.startswith("{fewshot}"):
        for i in range(n):
            messages += [{"role": "user", "content": f"{{fewshot_q{i}}}"}, {"role": "assistant", "content": f"{{fewshot_a{i}}}"}]
    return [*messages, {"role": "user", "content": prompt.removeprefix("{fewshot}")}]
