"""Issue 27: every metric's standard error and 95 % interval — against values computed by hand —
in the result file, the events, the leaderboard (`71.00 ±2.03`), the summary files and `--json`."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.plan.evaluator import Epochs
from evaltui.scoring import MetricSums, Reduction, score
from evaltui.scoring.leaderboard import build_leaderboard
from evaltui.scoring.stats import Interval, MeanSpread, t_quantile
from evaltui.scoring.summary import render_csv, render_md, render_txt
from evaltui.sim import ModelProfile, SimConfig


class Ev:
    def __init__(self, type: str = "exact", reducer: str = "mean", ks: tuple[int, ...] = ()):
        self.type, self.reducer, self._ks = type, reducer, ks

    def ks(self) -> tuple[int, ...]:
        return self._ks


# Student's t at 0.975 from a printed table (Abramowitz & Stegun 26.10): df → t
T_TABLE = {1: 12.706, 2: 4.303, 5: 2.571, 9: 2.262, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_t_quantile_matches_the_printed_table(df: int) -> None:
    assert t_quantile(0.975, df) == pytest.approx(T_TABLE[df], abs=5e-4)


def test_t_quantile_does_not_depend_on_mpmaths_shared_precision() -> None:
    """Two datasets are scored at once in two threads, each asking for its own t quantile: with
    mpmath's shared context, whose working precision findroot raises and lowers, one thread's
    root search broke the other's (scoring FAILED by chance, seen in the crash suite). What another
    thread (or sympy, under math-verify) leaves in that shared precision must change nothing."""
    import mpmath  # type: ignore[import-untyped]

    compute = t_quantile.__wrapped__  # past the cache: each call searches its root
    expected = {df: compute(0.975, df) for df in (2, 9, 33, 120)}
    before = mpmath.mp.prec
    try:
        for prec in (6, 12, 400):
            mpmath.mp.prec = prec
            assert {df: compute(0.975, df) for df in expected} == expected, prec
    finally:
        mpmath.mp.prec = before


def test_seven_right_of_ten_by_hand() -> None:
    """p = 0.7; sd = √((7·0.3² + 3·0.7²) / 9); se = sd / √10; half = t(9) · se."""
    result = score(Ev(), [{"index": i, "prediction": "a", "gold": "a" if i < 7 else "b"} for i in range(10)])
    sd = math.sqrt((7 * 0.3**2 + 3 * 0.7**2) / 9)
    se = sd / math.sqrt(10)
    half = 2.2621571627 * se
    u = result["uncertainty"]["accuracy"]
    assert result["accuracy"] == 70.0
    assert u["stderr"] == pytest.approx(100 * se, abs=1e-4)  # 15.2753
    assert u["ci95"] == pytest.approx([100 * (0.7 - half), 100 * (0.7 + half)], abs=1e-4)
    assert u["n"] == 10


def test_epochs_are_clustered_by_sample_as_inspects_clustered_stderr() -> None:
    """Three samples × two epochs. Inspect's clustered standard error over the six epoch verdicts
    (cluster = the sample), with its C / (C − 1) correction, computed here from its formula, is
    the one evaltui reports — not the naive one over six independent verdicts."""
    verdicts = {0: [1, 1], 1: [1, 0], 2: [0, 0]}
    predictions = [{"index": i, "prediction": "a", "gold": "a", "predictions": ["a" if v else "x" for v in vs]} for i, vs in verdicts.items()]
    result = score(Ev(), predictions, epochs=Epochs(2))
    values = [v for vs in verdicts.values() for v in vs]
    mean = sum(values) / len(values)
    clusters = len(verdicts)
    clustered = math.sqrt(sum(sum(v - mean for v in vs) ** 2 for vs in verdicts.values()) * clusters / (clusters - 1)) / len(values)
    naive = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    u = result["uncertainty"]["accuracy"]
    assert u["stderr"] == pytest.approx(100 * clustered, abs=1e-4)  # 28.8675
    assert abs(u["stderr"] - 100 * naive) > 5  # 22.36: epochs are not independent samples
    assert u["n"] == 3 and u["ci95"][0] == pytest.approx(100 * (mean - 4.302652729 * clustered), abs=1e-3)


def test_pass_at_k_gets_an_interval_over_the_reduced_values() -> None:
    predictions = [
        {"index": 0, "prediction": "a", "gold": "a", "predictions": ["a", "x", "x"]},
        {"index": 1, "prediction": "x", "gold": "a", "predictions": ["x", "x", "x"]},
        {"index": 2, "prediction": "a", "gold": "a", "predictions": ["a", "a", "a"]},
    ]
    result = score(Ev(), predictions, epochs=Epochs(3, "pass_at_k", (1, 2)))
    for metric, values in (("pass@1", [1 / 3, 0.0, 1.0]), ("pass@2", [2 / 3, 0.0, 1.0])):
        m = sum(values) / 3
        se = math.sqrt(sum((v - m) ** 2 for v in values) / 2 / 3)
        assert result["uncertainty"][metric]["stderr"] == pytest.approx(100 * se, abs=1e-4), metric


def test_a_ratio_metric_gets_the_delta_method_stderr() -> None:
    """[right, of] values (a ratio of sums): se = √(n/(n−1) · Σ(rᵢ − R·oᵢ)²) / Σoᵢ."""
    spread = MeanSpread()
    pairs = [(1.0, 2.0), (0.0, 1.0), (3.0, 4.0), (1.0, 3.0)]
    for r, o in pairs:
        spread.add(r, o)
    ratio = sum(r for r, _ in pairs) / sum(o for _, o in pairs)
    se = math.sqrt(4 / 3 * sum((r - ratio * o) ** 2 for r, o in pairs)) / sum(o for _, o in pairs)
    interval = spread.interval()
    assert interval is not None and interval.stderr == pytest.approx(100 * se, abs=1e-4)


def test_one_sample_has_no_interval() -> None:
    assert "uncertainty" not in score(Ev(), [{"index": 0, "prediction": "a", "gold": "a"}])
    assert MeanSpread().interval() is None


def test_metric_sums_streams_the_same_interval_as_score() -> None:
    reduction = Reduction(Ev().type)
    sums = MetricSums(reduction)
    for correct in (True, False, True, True):
        sums.add({"correct": correct})
    assert sums.intervals()["accuracy"] == Interval.from_json(score(Ev(), [{"index": i, "prediction": "a", "gold": "a" if c else "b"} for i, c in enumerate((1, 0, 1, 1))])["uncertainty"]["accuracy"])


# ---------------------------------------------------------------------------- the leaderboard and its files


def _board() -> Any:
    intervals = {("m", "d1", "accuracy"): Interval(1.0, 68.0, 72.0, 100), ("m", "d2", "accuracy"): Interval(1.5, 47.0, 53.0, 100)}
    return build_leaderboard([("d1", "v1", "accuracy", "gen"), ("d2", "v2", "accuracy", "gen")], ["m", "n"], {("m", "d1"): 70.0, ("m", "d2"): 50.0, ("n", "d1"): 10.0}, intervals=intervals)


def test_leaderboard_cells_say_the_half_width_and_the_average_combines_them() -> None:
    board = _board()
    rows = board.rows()
    assert rows[0][4:] == ["70.00 ±2.00", "10.00"]  # n has no interval: its score alone
    assert rows[1][4:] == ["50.00 ±3.00", "-"]
    assert rows[2][4] == f"60.00 ±{math.sqrt(2.0**2 + 3.0**2) / 2:.2f}"  # √(Σh²)/k = 1.80
    assert board.rows(intervals=False)[0][4] == "70.00"


def test_summary_files_carry_the_intervals() -> None:
    board = _board()
    assert "70.00 ±2.00" in render_txt(board) and "70.00 ±2.00" in render_md(board)
    table = list(csv.reader(io.StringIO(render_csv(board))))
    assert table[0] == ["dataset", "version", "metric", "mode", "m", "n", "m ±95%", "n ±95%"]
    assert table[1][4:] == ["70.00", "10.00", "2.00", ""]  # the scores stay numbers
    assert table[3][6] == "1.80"


def test_a_board_without_intervals_renders_as_before() -> None:
    board = build_leaderboard([("d1", "v1", "accuracy", "gen")], ["m"], {("m", "d1"): 70.0})
    assert render_csv(board).splitlines()[0] == "dataset,version,metric,mode,m"
    assert board.rows()[0][4] == "70.00"


# ---------------------------------------------------------------------------- a run end to end


def _run(tmp_path: Path, sim_factory: Any) -> tuple[Path, list[ev.Event], Any]:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.6)}))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("g", write_jsonl(tmp_path / "g.jsonl", rows))])
    code, events, runner = run_plan(plan)
    assert code == 0
    return plan, events, runner


def _by_hand(result: dict[str, Any]) -> tuple[float, float, float]:
    right = [1.0 if d["correct"] else 0.0 for d in result["details"]]
    n = len(right)
    mean = sum(right) / n
    se = math.sqrt(sum((v - mean) ** 2 for v in right) / (n - 1) / n)
    return 100 * se, 100 * (mean - t_quantile(0.975, n - 1) * se), 100 * (mean + t_quantile(0.975, n - 1) * se)


def test_a_run_writes_the_interval_and_every_front_end_shows_it(tmp_path: Path, sim_factory: Any) -> None:
    plan, events, runner = _run(tmp_path, sim_factory)
    wd = WorkDir(tmp_path / "out")
    result = json.loads(wd.result_file("m", "g").read_text())
    se, low, high = _by_hand(result)
    assert 0 < result["accuracy"] < 100
    assert result["uncertainty"]["accuracy"] == {"stderr": pytest.approx(se, abs=1e-4), "ci95": [pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4)], "n": 40}
    assert wd.read_result("m", "g")["uncertainty"] == result["uncertainty"]  # the head read alone has it
    scored = of_type(events, ev.DatasetScored)[0]
    assert dict(scored.intervals)["accuracy"].stderr == pytest.approx(se, abs=1e-4)
    half = f"±{(high - low) / 2:.2f}"
    assert runner.leaderboard().rows()[0][4] == f"{result['accuracy']:.2f} {half}"
    finished = of_type(events, ev.RunFinished)[0]
    txt = Path(finished.summary_files["txt"]).read_text()
    assert f"{result['accuracy']:.2f} {half}" in txt
    # a re-run keeps the score, and its interval, from the result file
    code, again, runner2 = run_plan(plan)
    planned = [e for e in of_type(again, ev.DatasetPlanned) if e.status == ev.PairStatus.SCORED]
    assert code == 0 and dict(planned[0].intervals)["accuracy"].stderr == pytest.approx(se, abs=1e-4)
    assert runner2.leaderboard().rows()[0][4].endswith(half)


def test_json_and_the_follower_report_the_interval(tmp_path: Path, sim_factory: Any) -> None:
    plan, _, _ = _run(tmp_path, sim_factory)
    result = json.loads(WorkDir(tmp_path / "out").result_file("m", "g").read_text())
    se, low, high = _by_hand(result)
    r = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(r.stdout)
    row = data["leaderboard"]["datasets"][0]
    assert row["uncertainty"]["m"]["ci95"] == [pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4)]
    assert data["pairs"][0]["uncertainty"]["accuracy"]["stderr"] == pytest.approx(se, abs=1e-4)
    assert data["leaderboard"]["average_half95"]["m"] == pytest.approx((high - low) / 2, abs=1e-3)
    w = subprocess.run([sys.executable, "-m", "evaltui", "watch", str(tmp_path / "out"), "--no-ui"], capture_output=True, text=True, timeout=120)
    assert f"±{(high - low) / 2:.2f}" in w.stdout
    shown = subprocess.run([sys.executable, "-m", "evaltui", "show", str(tmp_path / "out"), "--limit", "0"], capture_output=True, text=True, timeout=120)
    assert f"accuracy {result['accuracy']:.2f} ±{(high - low) / 2:.2f}" in shown.stdout
    exported = json.loads(subprocess.run([sys.executable, "-m", "evaltui", "show", str(tmp_path / "out"), "--export", "json"], capture_output=True, text=True, timeout=120).stdout)
    assert exported["pairs"][0]["uncertainty"]["accuracy"]["stderr"] == pytest.approx(se, abs=1e-4)


def test_each_part_of_a_grouped_benchmark_and_their_mean_get_intervals() -> None:
    from evaltui.scoring.reference.parts import PartSums, mean_of_parts

    parts = PartSums(Reduction("exact"), lambda i: "a" if i < 4 else "b")
    right = [1, 1, 0, 1, 0, 0, 1, 0, 0, 0]
    for i, r in enumerate(right):
        parts.add({"index": i, "correct": bool(r)})
    by_part = parts.result()
    se = {}
    for name, values in (("a", right[:4]), ("b", right[4:])):
        m = sum(values) / len(values)
        se[name] = 100 * math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))
        assert by_part[name]["uncertainty"]["accuracy"]["stderr"] == pytest.approx(se[name], abs=1e-4)
    means = mean_of_parts(by_part, ("accuracy",))
    combined = parts.mean_intervals(means)["accuracy"]
    assert combined.stderr == pytest.approx(math.sqrt(se["a"] ** 2 + se["b"] ** 2) / 2, abs=1e-3)
    assert combined.low < means["accuracy"] < combined.high
