"""Judges, and the evaluators that need more than the reply: what they must agree on.

A model of `role = "judge"` is sent no dataset; an evaluator that grades by a judge
(`model_graded_qa`, `model_graded_fact`) names one by its abbr in `judge`, and may bring its
own grading `template` (a file: its placeholders are plain names). `pairwise` names its baseline:
a tested model, or a file of its answers read here (plan/baseline.py), so that a file the judge
could not use stops the plan, not the judging. A `python` evaluator names
its function, found here without running any of its code. Each problem is one line naming the
field, as checks.py's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import string
from collections.abc import Sequence
from importlib.metadata import entry_points

from evaltui.plan.baseline import BaselineFileError, read_baseline_file
from evaltui.plan.schema import DatasetConfig, Plan

#: The evaluators graded by a judge model.
JUDGED = ("model_graded_qa", "model_graded_fact", "mt_bench", "pairwise")
#: The keys of Inspect AI's graders (model_graded_qa, model_graded_fact).
INSPECT_KEYS = ("template", "instructions", "grade_pattern")
#: What a grading template may name besides the record's own fields.
PLACEHOLDERS = ("question", "answer", "criterion", "instructions")
#: The entry-point group under which installed packages register evaluators by name.
GROUP = "evaltui.evaluators"
JUDGE_KEYS = ("judge", "template", "instructions", "grade_pattern")
#: The keys only pairwise reads.
PAIRWISE_KEYS = ("baseline", "baseline_file", "scale")

Key = tuple[int, int, int]  # a verdict's (sample, epoch, turn)


def answer_hash(answer: str) -> str:
    """What a verdict records of the answer it graded: a re-answered unit is judged again."""
    return hashlib.sha256(answer.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def check_judges(plan: Plan, kinds: Sequence[bytes | None] | None = None) -> list[str]:
    """The judges' and evaluators' problems; `kinds`: each dataset's settings_key, whose
    evaluator is checked once for each kind (a None kind is checked on its own)."""
    problems: list[str] = []
    if not plan.tested:
        problems.append('models: every model has role = "judge": there is no model to evaluate')
    named = {ds.evaluator.judge for ds in plan.datasets}
    for i, m in enumerate(plan.models):
        if m.role == "judge" and m.abbr not in named:
            problems.append(f"models[{i}].role: {m.abbr!r} is a judge that no evaluator names (judge = {m.abbr!r} in a [datasets.evaluator])")
    memo: dict[bytes, list[str]] = {}
    for i, ds in enumerate(plan.datasets):
        kind = kinds[i] if kinds is not None else None
        found = memo.get(kind) if kind is not None else None
        if found is None:
            found = _check_evaluator(plan, ds)
            if kind is not None:
                memo[kind] = found
        problems += [f"datasets[{i}].evaluator.{p}" for p in found]
    return problems


def _check_evaluator(plan: Plan, ds: DatasetConfig) -> list[str]:
    ev = ds.evaluator
    if ev.type not in JUDGED:
        problems = [f"{key}: only a judge's evaluators ({', '.join(JUDGED)}) read it, not {ev.type}" for key in JUDGE_KEYS if getattr(ev, key) is not None]
    else:
        problems = _check_judge(plan, ev.type, ev.judge)
        if ds.mode != "gen":
            problems.append(f"type: {ev.type} grades generated answers; this dataset's mode is {ds.mode!r}")
        if ev.template is not None and ev.type != "mt_bench":
            problems += [f"template: {p}" for p in _check_template(ev.template)]
    problems += _check_mt_bench(ds) + _check_baseline(plan, ds)
    if ev.type == "python":
        why = "names no function: 'package.module:function', or an entry point of group 'evaltui.evaluators'" if ev.function is None else where_is(ev.function)
        problems += [] if why is None else [f"function: {why}"]
    elif ev.function is not None:
        problems.append(f'function: only type = "python" reads it, not {ev.type}')
    return problems


def _check_baseline(plan: Plan, ds: DatasetConfig) -> list[str]:
    ev = ds.evaluator
    if ev.type != "pairwise":
        return [f'{key}: only type = "pairwise" reads it, not {ev.type}' for key in PAIRWISE_KEYS if getattr(ev, key) is not None]
    tested = [m.abbr for m in plan.tested]
    if ev.baseline is not None and ev.baseline_file is not None:
        return ["baseline_file: the baseline is a model of the plan (baseline) or a file of its answers (baseline_file), not both"]
    if ev.baseline_file is not None:
        try:
            read_baseline_file(ev.baseline_file)
        except BaselineFileError as e:
            return [f"baseline_file: {e}"]
        return []
    if ev.baseline is None:
        models = ", ".join(tested)
        return [f"baseline: pairwise judges each answer against a baseline model's: name one ({models}), or give baseline_file (a file of its answers)"]
    if ev.baseline not in tested:
        return [f"baseline: {ev.baseline!r} is not a tested model of the plan ({', '.join(tested)})"]
    return []


def _check_mt_bench(ds: DatasetConfig) -> list[str]:
    ev = ds.evaluator
    if ev.type != "mt_bench":
        return [] if ev.references is None else [f"references: only type = \"mt_bench\" reads it, not {ev.type}"]
    said = "mt_bench asks with FastChat's prompts; it is for model_graded_qa and model_graded_fact"
    problems = [f"{key}: {said}" for key in INSPECT_KEYS if getattr(ev, key) is not None]
    if ds.turns is None:
        problems.append("type: mt_bench grades two-turn conversations: set the dataset's `turns` (a record field of two user turns)")
    if ev.references is not None:
        try:
            with open(ev.references, encoding="utf-8") as f:
                f.read(1)
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"references: cannot read {ev.references}: {getattr(e, 'strerror', None) or e}")
    return problems


def _check_judge(plan: Plan, kind: str, judge: str | None) -> list[str]:
    judges = [m.abbr for m in plan.models if m.role == "judge"]
    listed = f"judges: {', '.join(judges)}" if judges else 'no model has role = "judge"'
    if judge is None:
        return [f"judge: {kind} is graded by a judge model: name one ({listed})"]
    if judge not in {m.abbr for m in plan.models}:
        return [f"judge: no model named {judge!r} ({listed})"]
    if plan.model(judge).role != "judge":
        return [f'judge: {judge!r} is a tested model; a judge is a model of role = "judge" ({listed})']
    return []


def _check_template(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as e:
        return [f"cannot read {path}: {getattr(e, 'strerror', None) or e}"]
    try:
        names = template_names(text)
    except ValueError as e:
        return [f"{path}: {e}"]
    if "answer" not in names:
        return [f"{path}: names no {{answer}}, so the judge would not see the answer (placeholders: {', '.join(PLACEHOLDERS)}, and the record's fields)"]
    return []


def template_names(template: str) -> list[str]:
    """The placeholders a grading template names (ValueError for one that is not a plain name)."""
    names = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:
        raise ValueError(f"not a template: {e} (write a brace as {{{{ or }}}})") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ValueError(f"{{{field}}}: a grading template's placeholders are plain names ({', '.join(PLACEHOLDERS)}, or a field of the record)")
        names.append(field)
    return names


def where_is(spec: str) -> str | None:
    """Why `spec` names no function evaltui can find (no module of it is run), None when it may."""
    if ":" in spec:
        module, _, attr = spec.partition(":")
        if not all(p.isidentifier() for p in [*module.split("."), *attr.split(".")]):
            return f"{spec!r} is not 'package.module:function'"
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:  # a package above it is missing
            found = None
        except (ImportError, ValueError) as e:
            return f"cannot look for module {module!r}: {e}"
        return None if found is not None else f"no module named {module!r} (is it installed, or on PYTHONPATH?)"
    names = sorted({ep.name for ep in entry_points(group=GROUP)})
    if spec in names:
        return None
    listed = ", ".join(names) if names else "none is installed"
    return f"no evaluator named {spec!r} among the entry points of group {GROUP!r} ({listed}); or give 'package.module:function'"
