"""code_exec against the real HumanEval data shipped in shared/datasets (skipped without it)."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from evaltui.scoring import score

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "humaneval" / "HumanEval.jsonl.gz"

pytestmark = pytest.mark.skipif(not DATA.is_file(), reason=f"HumanEval data not found at {DATA}")


@dataclass
class Ev:
    type: str = "code_exec"
    pattern: str | None = None
    timeout: float = 10.0
    memory_mb: int = 1024


@pytest.fixture(scope="module")
def records() -> list[dict]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def as_predictions(records: list[dict], answers: list[str]) -> list[dict]:
    return [
        {"index": i, "origin_prompt": r["prompt"], "prediction": a, "gold": ""}
        for i, (r, a) in enumerate(zip(records, answers, strict=False))
    ]


def test_canonical_solutions_all_pass(records):
    assert len(records) == 164
    result = score(Ev(), as_predictions(records, [r["canonical_solution"] for r in records]), records, workers=4)
    failures = [(d["index"], d["result"]) for d in result["details"] if not d["correct"]]
    assert failures == []
    assert result["pass@1"] == 100.0


def test_solutions_returning_none_all_fail(records):
    result = score(Ev(), as_predictions(records, ["    return None\n"] * len(records)), records, workers=4)
    assert result["pass@1"] == 0.0
    assert all(d["result"].startswith("failed:") for d in result["details"])


def test_sabotaged_canonical_solutions_fail(records):
    subset = records[:24]
    broken = []
    for r in subset:
        # every `return` now returns None, and anything that slips through hits the assert
        body = re.sub(r"\breturn\b[^\n]*", "return None", r["canonical_solution"])
        broken.append("    assert False\n" + body)
    result = score(Ev(), as_predictions(subset, broken), subset, workers=4)
    assert result["pass@1"] == 0.0
    assert {d["result"] for d in result["details"]} == {"failed: AssertionError"}


def test_chat_style_fenced_full_functions_pass(records):
    subset = records[::16]
    replies = [
        "Sure! Here is the implementation:\n\n```python\n" + r["prompt"] + r["canonical_solution"] + "```\n\nIt works."
        for r in subset
    ]
    result = score(Ev(), as_predictions(subset, replies), subset, workers=4)
    assert [(d["index"], d["result"]) for d in result["details"] if not d["correct"]] == []
    assert result["pass@1"] == 100.0
