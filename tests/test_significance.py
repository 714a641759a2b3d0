"""Issue 27: `evaltui compare` says whether a difference is more than chance — McNemar's exact
test on right/wrong samples, a paired bootstrap on other scores — checked against values
computed by hand and against the normal approximation, and end to end on two runs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.scoring.stats import mcnemar_exact, paired_bootstrap
from evaltui.sim import ModelProfile, SimConfig, answers_correctly


def _exact(b: int, c: int) -> float:
    """2 · Σ_{i ≤ min(b, c)} C(n, i) / 2ⁿ in integers (each C(n, i) from the one before: math.comb
    afresh for each i would take a minute at n = 20,000)."""
    n, total, term = b + c, 0, 1
    for i in range(min(b, c) + 1):
        if i:
            term = term * (n - i + 1) // i
        total += term
    assert n > 100 or total == sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * total / 2**n)


@pytest.mark.parametrize(("b", "c", "p"), [(0, 5, 0.0625), (1, 9, 2 * 11 / 1024), (3, 3, 1.0), (0, 0, 1.0), (7, 0, 2 / 128)])
def test_mcnemar_by_hand(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c).p_value == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(c, b).p_value == pytest.approx(p, rel=1e-12)  # two-sided: the direction does not matter


@pytest.mark.parametrize(("b", "c"), [(12, 38), (400, 460), (9_990, 10_011), (9_000, 11_001)])
def test_mcnemar_agrees_with_the_binomial_summed_in_integers(b: int, c: int) -> None:
    """(9,990 + 10,011 and 9,000 + 11,001 flips are past the exact-integer bound: the float sum must agree.)"""
    assert mcnemar_exact(b, c).p_value == pytest.approx(_exact(b, c), rel=1e-9, abs=1e-300)


def test_the_bootstrap_is_seeded_and_finds_no_difference_where_there_is_none() -> None:
    rng = random.Random(5)
    a = [rng.random() for _ in range(300)]
    b = list(a)
    assert paired_bootstrap(a, b).p_value == 1.0
    b = [x + rng.choice((-0.1, 0.1)) for x in a]  # noise around no shift
    first = paired_bootstrap(a, b)
    assert first == paired_bootstrap(a, b) and first.test == "bootstrap"
    assert not first.significant


def test_the_bootstrap_agrees_with_the_normal_approximation_on_a_large_sample() -> None:
    """At n = 400 the bootstrap's distribution of the mean difference is close to normal: its
    p-value is the paired z-test's, within the resampling's noise."""
    rng = random.Random(11)
    a = [rng.random() for _ in range(400)]
    b = [x + 0.02 + rng.gauss(0, 0.25) for x in a]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    normal = 2 * (1 - NormalDist().cdf(abs(mean) / se))
    assert 0.01 < normal < 0.5  # a case where the p-value is neither 0 nor 1
    assert paired_bootstrap(a, b).p_value == pytest.approx(normal, abs=0.03)


def test_a_clear_difference_is_significant() -> None:
    rng = random.Random(3)
    a = [rng.random() * 0.5 for _ in range(200)]
    b = [x + 0.3 + rng.gauss(0, 0.1) for x in a]
    result = paired_bootstrap(a, b)
    assert result.significant and result.p_value == pytest.approx(1 / 2001)


# ---------------------------------------------------------------------------- end to end

ROWS = arithmetic(60)


def _run(tmp_path: Path, sim_factory: Any, model: str, accuracy: float, **kw: Any) -> Path:
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={model: ModelProfile(accuracy=accuracy)}))
    folder = tmp_path / model
    folder.mkdir()
    ds = gsm_dataset("gsm", write_jsonl(tmp_path / "data.jsonl", ROWS), **kw.pop("dataset", {}))
    code, _, runner = run_plan(write_plan(folder, models=[lightllm(model, sim.url, **kw)], datasets=[ds]))
    assert code == 0
    return runner.workdir.root


def test_compare_tests_right_wrong_samples_with_mcnemar(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, sim_factory, "weak", 0.3), _run(tmp_path, sim_factory, "strong", 0.9)
    right_a = [answers_correctly("weak", r["question"], 0.3) for r in ROWS]
    right_b = [answers_correctly("strong", r["question"], 0.9) for r in ROWS]
    flips = sum(x and not y for x, y in zip(right_a, right_b, strict=True)), sum(y and not x for x, y in zip(right_a, right_b, strict=True))
    assert main(["compare", str(a), str(b), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["test"] == "mcnemar" and row["p_value"] == pytest.approx(_exact(*flips), rel=1e-12)
    assert row["significant"] is True
    assert main(["compare", str(a), str(b)]) == 0
    line = capsys.readouterr().out.splitlines()[2].split()
    assert line[-1] == "yes" and line[-2] == ("<0.0001" if _exact(*flips) < 1e-4 else f"{_exact(*flips):.4f}")
    assert main(["compare", str(a), str(a), "--json"]) == 0  # a run against itself: nothing flipped
    (same,) = json.loads(capsys.readouterr().out)["rows"]
    assert (same["p_value"], same["significant"]) == (1.0, False)


def test_compare_bootstraps_scores_that_are_not_right_or_wrong(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Three sampled epochs by mean: a sample's score is 0, ⅓, ⅔ or 1."""
    sampled = {"generation_kwargs": {"do_sample": True, "seed": 1, "max_new_tokens": 64}}
    a = _run(tmp_path, sim_factory, "m1", 0.5, dataset={"epochs": 3}, **sampled)
    b = _run(tmp_path, sim_factory, "m2", 0.5, dataset={"epochs": 3}, **sampled)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    details = [json.loads(Path(root, "results", m, "gsm.json").read_text())["details"] for root, m in ((a, "m1"), (b, "m2"))]
    values = [[d["scores"]["accuracy"] for d in found] for found in details]
    assert any(0 < v < 1 for v in values[0] + values[1])
    assert row["test"] == "bootstrap" and row["p_value"] == paired_bootstrap(*values).p_value
    assert 0 < row["p_value"] <= 1
