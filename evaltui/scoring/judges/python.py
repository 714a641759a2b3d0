"""`type = "python"`: an evaluator of your own, a function evaltui calls for each answer.

`function = "my_pkg.scorers:score"` names it by module and attribute; a bare name is looked up
among the entry points of the group `evaltui.evaluators` that installed packages register.
The contract (README, "Evaluators of your own"): the function gets the sample's record (its
fields from the data file), the answer (thinking cut out) and the target (the dataset's
`target` filled), and returns a bool, a number from 0 to 1, or a dict with `value` (one of
those) and optionally `answer` (what it read out of the answer) and `explanation`. It runs in
the scorer's worker thread, off the UI's loop; an exception, or a value it may not return,
fails that sample (its error says which), never the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from evaltui.plan.judges import GROUP, where_is
from evaltui.scoring.judgement import ScoredJudge, Verdict

ERROR_CHARS = 500

UserFunction = Callable[[dict[str, Any], str, str], Any]


def load_function(spec: str) -> UserFunction:
    """The function `spec` names (ValueError saying why when there is none)."""
    problem = where_is(spec)
    if problem is not None:
        raise ValueError(problem)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    else:
        obj = next(ep for ep in entry_points(group=GROUP) if ep.name == spec).load()
    if not callable(obj):
        raise ValueError(f"{spec!r} is not a function (it is a {type(obj).__name__})")
    fn: UserFunction = obj
    return fn


def python_judge(fn: UserFunction, records: Sequence[dict[str, Any]] | None) -> ScoredJudge:
    """The scorer's judge for a python evaluator: the user's function, its failures kept to their sample."""

    def judge(prediction: str, gold: str, sample: dict[str, Any]) -> Verdict:
        index = sample.get("index", -1)
        record = records[index] if records is not None and isinstance(index, int) and 0 <= index < len(records) else {}
        try:
            return _verdict(fn(dict(record), prediction, gold))
        except Exception as e:  # the user's code: its failure is this sample's
            return Verdict(None, False, {"accuracy": 0.0}, {"error": "evaluator", "why": f"{type(e).__name__}: {e}"[:ERROR_CHARS]})

    return judge


def _verdict(out: Any) -> Verdict:
    extra: dict[str, Any] = {}
    extracted = None
    if isinstance(out, dict):
        if "value" not in out:
            raise ValueError(f"returned a dict without 'value' (its keys: {', '.join(map(str, out)) or 'none'})")
        if out.get("explanation") is not None:
            extra["explanation"] = str(out["explanation"])[:4000]
        extracted = None if out.get("answer") is None else str(out["answer"])
        out = out["value"]
    if isinstance(out, bool):
        value = 1.0 if out else 0.0
    elif isinstance(out, (int, float)) and 0 <= out <= 1:
        value = float(out)
    else:
        raise ValueError(f"returned {out!r}: a bool, a number from 0 to 1, or a dict with 'value'")
    return Verdict(extracted, value >= 1.0, {"accuracy": value}, extra)
