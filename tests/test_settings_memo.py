"""Versions made once for each set of settings (plan/strict.settings_key): a plan of 10,000
datasets of a few settings hashes each dataset's own parts only. Each memo must give exactly what
the general way gives (the values are on disk in every work dir), and tell apart settings that
differ only in a value's type (1, 1.0 and true are three JSON texts)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import tomli_w

from evaltui.engine.disk import versions
from evaltui.engine.disk.versions import dataset_fingerprint, evaluator_version
from evaltui.fsutil import real_path_text
from evaltui.plan import DatasetConfig, Plan, load_plan
from evaltui.plan.strict import settings_key, values_key
from evaltui.scoring import dataset_version
from evaltui.scoring.score import JUDGE_REVISIONS
from evaltui.scoring.summary import RunSummary

RECORDS = '{"question": "one", "answer": "1"}\n{"question": "two", "answer": "2"}\n'

# Datasets alike but for one setting (or its type), and some exactly alike: each gets its own versions.
VARIANTS: list[dict[str, Any]] = [
    {},
    {},
    {"epochs": 3},
    {"limit": 1},
    {"sample_ids": [0]},
    {"sample_ids": [1]},
    {"fail_on_error": 2},
    {"fail_on_error": 0.5},
    {"fail_on_error": 0},
    {"choices": ["a", "b"], "mode": "gen", "steps": ["multiple_choice", "generate"]},
    {"prompt": "Q: {question}"},
    {"system": "Be brief."},
    {"evaluator": {"type": "gsm8k"}},
    {"evaluator": {"type": "exact", "reducer": "max"}},
    {"evaluator": {"type": "exact", "timeout": 5.0}},
    {"evaluator": {"type": "regex", "pattern": "(\\d+)"}},
    {"evaluator": {"type": "model_graded_qa", "judge": "j"}},
    {"evaluator": {"type": "exact_match", "filters": [{"name": "strict", "steps": [{"function": "regex", "pattern": "(\\d+)"}]}]}},
    {"evaluator": {"type": "exact_match", "filters": [{"name": "strict", "steps": [{"function": "regex", "pattern": "(\\d)"}]}]}},
]


def make_plan(folder: Path, epochs: int = 1) -> Plan:
    datasets = []
    for i, extra in enumerate(VARIANTS):
        (folder / f"d{i}.jsonl").write_text(RECORDS if i % 2 else RECORDS + RECORDS, encoding="utf-8")
        datasets.append({"abbr": f"d{i}", "path": f"d{i}.jsonl", "prompt": "{question}", "target": "{answer}", **extra})
    models = [
        {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"},
        {"abbr": "j", "type": "lightllm", "url": "http://127.0.0.1:1/generate", "role": "judge"},
    ]
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps({"run": {"epochs": epochs}, "models": models, "datasets": datasets}), encoding="utf-8")
    return load_plan(path)


def general_evaluator_version(ds: DatasetConfig) -> str:
    keys = ds.evaluator.versioned_dump()
    revision = JUDGE_REVISIONS.get(keys["type"])
    if revision is not None:
        keys["revision"] = revision
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]


def general_dataset_fingerprint(plan: Plan, ds: DatasetConfig, data: str) -> str:
    keys = {
        "dataset": ds.model_dump(mode="json", include={"columns", "prompt", "system", "target", "mode", "choices", "limit", "sample_ids"}),
        "epochs": plan.epochs(ds).count,
        "evaluator": general_evaluator_version(ds),
        "data": data,
    }
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]


def general_row_version(plan: Plan, ds: DatasetConfig) -> str:
    data = {**ds.versioned_dump(), "path": real_path_text(plan.dataset_path(ds), {})}
    data.pop("epochs", None)
    count = plan.epochs(ds).count
    if count != 1:
        data["epochs"] = count
    return dataset_version(data)


def test_versions_made_once_for_each_settings_are_those_made_for_each_dataset(tmp_path: Path) -> None:
    for epochs in (1, 2):
        folder = tmp_path / str(epochs)
        folder.mkdir()
        plan = make_plan(folder, epochs)
        for memo in (versions._EVALUATORS, versions._DATASETS, versions._EVALUATOR_VALUES, versions._FINGERPRINTED_JSON):
            memo.clear()
        for ds in plan.datasets:
            data = hashlib.sha256(plan.dataset_path(ds).read_bytes()).hexdigest()[:16]
            assert evaluator_version(ds) == general_evaluator_version(ds), ds.abbr
            assert dataset_fingerprint(plan, ds) == general_dataset_fingerprint(plan, ds, data), ds.abbr
        assert [row.version for row in RunSummary(plan).rows()] == [general_row_version(plan, ds) for ds in plan.datasets]
        # copies of the same settings (other objects, as a plan read again makes them) share the memo
        again = load_plan(plan.source)
        assert [dataset_fingerprint(again, ds) for ds in again.datasets] == [dataset_fingerprint(plan, ds) for ds in plan.datasets]
        assert [row.version for row in RunSummary(again).rows()] == [row.version for row in RunSummary(plan).rows()]


def test_settings_keys_tell_values_and_types_apart(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    keys = [settings_key(ds, ("abbr", "path")) for ds in plan.datasets]
    texts = [json.dumps(ds.model_dump(mode="json", exclude={"abbr", "path"}), sort_keys=True) for ds in plan.datasets]
    for i in range(len(keys)):  # the same key exactly when the same settings, as JSON writes them (types and all)
        assert [keys[j] == keys[i] for j in range(len(keys))] == [texts[j] == texts[i] for j in range(len(keys))], VARIANTS[i]
    assert keys[0] == keys[1] and len(set(keys)) == len(keys) - 2  # alike but for abbr and path; fail_on_error = 0 is read as 0.0
    assert settings_key(plan.datasets[0]) != settings_key(plan.datasets[1])  # abbr and path counted when not skipped
    assert values_key((1,)) != values_key((1.0,)) != values_key((True,))
    assert values_key((2**70,)) is None  # beyond what orjson writes: nothing is kept, the version is made anew


def test_a_plans_problems_found_once_for_each_kind_of_settings_are_those_found_for_each_dataset(tmp_path: Path, monkeypatch: Any) -> None:
    """check_semantics checks each kind of dataset settings once (and check_judges each kind's
    evaluator): every dataset still gets each of its problems, under its own index, in order,
    as when each dataset is checked on its own (settings_key None: no memo)."""
    import pytest

    from evaltui.plan import PlanError, checks

    (tmp_path / "ok.jsonl").write_text(RECORDS, encoding="utf-8")
    bad_kinds: list[dict[str, Any]] = [
        {"prompt": "{0}"},  # a template that names no field
        {"evaluator": {"type": "regex"}},  # no pattern
        {"mode": "ppl", "choices": ["a"], "evaluator": {"type": "ppl"}},  # too few choices
        {"epochs": 2, "evaluator": {"type": "exact", "reducer": "pass_at_k"}},  # no k
        {"evaluator": {"type": "model_graded_qa", "judge": "nobody"}},  # no such judge
        {"evaluator": {"type": "gsm8k", "baseline": "m"}},  # a pairwise key elsewhere
        {"fail_on_error": 0.5, "score_on_error": True},
        {},
    ]
    datasets = []
    for i in range(24):
        path = "ok.jsonl" if i % 5 else f"missing{i}.jsonl"  # a path's problem is each dataset's own
        datasets.append({"abbr": f"d{i}", "path": path, "prompt": "{question}", "target": "{answer}", **bad_kinds[i % len(bad_kinds)]})
    plan = tmp_path / "plan.toml"
    plan.write_text(tomli_w.dumps({"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": datasets}), encoding="utf-8")

    def problems() -> list[str]:
        with pytest.raises(PlanError) as e:
            load_plan(plan)
        return e.value.problems

    calls: list[str] = []
    check_settings = checks._check_settings
    monkeypatch.setattr(checks, "_check_settings", lambda plan, ds: calls.append(ds.abbr) or check_settings(plan, ds))
    memo = problems()
    assert len(calls) == len(bad_kinds)  # once a kind
    monkeypatch.setattr(checks, "settings_key", lambda model, skip=(): None)
    alone = problems()
    assert len(calls) == len(bad_kinds) + len(datasets)  # once a dataset
    assert memo == alone
    assert len(memo) == 26 and sum(p.startswith("plan.toml: datasets[22].") for p in memo) == 1
