"""A benchmark dataset in the plan: its own keys checked, what the plan changed of its entry, and the exact_match evaluator's settings.

The catalog (evaltui.benchmarks) is imported inside these functions only, so a plan that names
no benchmark never loads it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from evaltui.backends import BACKENDS
from evaltui.backends.openai import OpenAIChatBackend
from evaltui.plan.evaluator import EvaluatorConfig
from evaltui.plan.schema import DatasetConfig, ModelConfig

#: The plan's keys an entry fills, compared with the entry's to tell a changed entry.
FILLED_KEYS = ("prompt", "system", "system_join", "target", "mode", "choices", "stop", "max_tokens", "temperature")


def check_benchmark(ds: DatasetConfig, models: Sequence[ModelConfig] = ()) -> list[str]:
    """split, subsets, num_fewshot and fewshot_as_multiturn against what the entry has (and the models)."""
    from evaltui.benchmarks.catalog import lookup

    assert ds.benchmark is not None
    entry = lookup(ds.benchmark)
    problems: list[str] = []
    splits = sorted(set(entry.hub.files) | set(entry.local.files if entry.local else ()))
    if ds.split is not None and ds.split not in splits:
        problems.append(f"split: {entry.name} has no split {ds.split!r} (it has: {', '.join(splits)})")
    if ds.subsets is not None:
        problems += _check_subsets(entry.name, list(entry.parts), ds.subsets)
    if ds.num_fewshot and entry.fewshot_split is None and ds.num_fewshot > entry.fixed_examples:
        have = f"only {entry.fixed_examples} fixed examples" if entry.fixed_examples else "no few-shot examples"
        problems.append(f"num_fewshot: {entry.name} has {have} (got {ds.num_fewshot})")
    if ds.fewshot_as_multiturn:
        problems += _check_multiturn(ds, models)
    return problems


def _check_multiturn(ds: DatasetConfig, models: Sequence[ModelConfig]) -> list[str]:
    """lm-eval's flag, for chat models, on the turns made from the entry's own prompt."""
    if ds.messages is None or ds.prompt:
        return ["fewshot_as_multiturn: the turns are made from the entry's prompt and system: leave out the plan's prompt, system and messages"]
    text = [f"{m.abbr} ({m.type})" for m in models if not issubclass(BACKENDS[m.type], OpenAIChatBackend)]
    if text:
        return [f"fewshot_as_multiturn: the examples go as turns to chat models only (lm-eval's flag with a chat template); "
                f"models {', '.join(text)} take one text: give them a dataset without it"]
    return []


def benchmark_keys_unused(ds: DatasetConfig) -> list[str]:
    """The keys that only a benchmark dataset reads."""
    return [f"{key}: only used with `benchmark`" for key in ("split", "subsets", "num_fewshot") if getattr(ds, key) is not None] + (
        ["fewshot_as_multiturn: only used with `benchmark`"] if ds.fewshot_as_multiturn else []
    )


def check_filters(ev: EvaluatorConfig) -> list[str]:
    """exact_match's and loglikelihood's settings: compiled patterns, and each on its evaluator only."""
    return _misplaced(ev) + (_check_pipelines(ev) if ev.type == "exact_match" else [])


def _misplaced(ev: EvaluatorConfig) -> list[str]:
    """Settings of one evaluator given to another; loglikelihood's metrics that do not go together."""
    named = [k for k in ("filters", "regexes_to_ignore") if getattr(ev, k) is not None] + [k for k in ("ignore_case", "ignore_punctuation") if getattr(ev, k)]
    problems = [f"evaluator.{k}: only used by the exact_match evaluator (type is {ev.type!r})" for k in named if ev.type != "exact_match"]
    mine = (["metrics"] if ev.metrics is not None else []) + (["target_delimiter"] if ev.target_delimiter != " " else [])
    problems += [f"evaluator.{k}: only used by the loglikelihood evaluator (type is {ev.type!r})" for k in mine if ev.type != "loglikelihood"]
    if (ev.type == "opencompass") != (ev.postprocess is not None):
        problems.append("evaluator.postprocess: the opencompass evaluator needs one (gsm8k, answer_pattern), and only it takes one")
    problems += [f"evaluator.{k}: only used by the {t} evaluator (type is {ev.type!r})" for k, t, used in (
        ("program", "code_exec", ev.program is not None), ("completion", "code_exec", ev.completion != "cleaned"), ("extract", "math", ev.extract != "answer"),
    ) if used and ev.type != t]
    if ev.metrics is not None and (not ev.metrics or ("mc2" in ev.metrics and len(ev.metrics) > 1)):
        problems.append("evaluator.metrics: one or more of acc, acc_norm; or mc2 alone (TruthfulQA's, reported as acc)")
    return problems


def _check_pipelines(ev: EvaluatorConfig) -> list[str]:
    problems = []
    for i, f in enumerate(ev.filters or ()):
        for j, step in enumerate(f.pipeline()):
            where = f"evaluator.filters[{i}]" + (f".steps[{j}]" if f.steps is not None else "")
            if step.function == "regex" and step.pattern is None:
                problems.append(f"{where}.pattern: the regex step needs a pattern")
            problems += [f"{where}.pattern: invalid regular expression: {e}" for e in _regex_errors(step.pattern or "")]
    for i, r in enumerate(ev.regexes_to_ignore or ()):
        problems += [f"evaluator.regexes_to_ignore[{i}]: invalid regular expression: {e}" for e in _regex_errors(r)]
    names = [f.name for f in ev.filters or ()]
    if len(set(names)) != len(names):
        problems.append("evaluator.filters: each filter needs its own name (it names a metric)")
    return problems


def _regex_errors(pattern: str) -> list[str]:
    try:
        re.compile(pattern)
    except re.error as e:
        return [str(e)]
    return []


def _check_subsets(name: str, parts: list[str], subsets: list[str]) -> list[str]:
    if not parts:
        return [f"subsets: {name} is not a grouped benchmark (it has no parts)"]
    if not subsets:
        return ["subsets: lists no part; leave it out for all of them"]
    problems = []
    for s in subsets:
        if s not in parts:
            close = difflib.get_close_matches(s, parts, n=3, cutoff=0.5)
            hint = f"close names: {', '.join(close)}" if close else f"{len(parts)} parts, e.g. {', '.join(parts[:3])}"
            problems.append(f"subsets: {name} has no part {s!r} ({hint}; `evaltui benchmarks show {name}` lists them)")
    if len(set(subsets)) != len(subsets):
        problems.append("subsets: lists a part twice")
    return problems


def changes(ds: DatasetConfig) -> dict[str, Any]:
    """What the plan changed of its benchmark's entry: each key whose value is not the entry's
    (the evaluator's settings as one), and the benchmark's own keys where they are not its defaults."""
    from evaltui.benchmarks.catalog import lookup
    from evaltui.benchmarks.fill import entry_fields

    assert ds.benchmark is not None
    entry, fields = lookup(ds.benchmark), entry_fields(ds.benchmark)
    mine = ds.model_dump(mode="json")
    turned = ("prompt", "system") if ds.fewshot_as_multiturn else ()  # made into messages: the flag below says so
    out = {k: mine[k] for k in FILLED_KEYS if k not in turned and mine[k] != fields.get(k, _plain(k))}
    if ds.evaluator.model_dump(mode="json") != EvaluatorConfig.model_validate(fields["evaluator"]).model_dump(mode="json"):
        out["evaluator"] = ds.evaluator.versioned_dump()
    if ds.split not in (None, entry.split):
        out["split"] = ds.split
    if ds.subsets is not None and list(ds.subsets) != list(entry.parts):
        out["subsets"] = list(ds.subsets)
    if ds.num_fewshot not in (None, entry.num_fewshot):
        out["num_fewshot"] = ds.num_fewshot
    if ds.fewshot_as_multiturn:
        out["fewshot_as_multiturn"] = True
    return out


def _plain(key: str) -> Any:
    return DatasetConfig.model_fields[key].get_default(call_default_factory=True)


def version_label(ds: DatasetConfig) -> str:
    """The leaderboard's version of a benchmark dataset: the reference's task and version
    (`lm-eval gsm8k_cot v3`), then `+` and a hash of what the plan changed, if anything."""
    from evaltui.benchmarks.catalog import lookup

    assert ds.benchmark is not None
    label = lookup(ds.benchmark).label
    changed = changes(ds)
    if not changed:
        return label
    digest = hashlib.sha256(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:6]
    return f"{label}+{digest}"
