"""A model's `price` and `[run] cost_limit`: the run's cost from the tokens its servers counted,
per model and dataset (`--json`, the summary files), and no new request once the limit is
reached — what is out finishes, the pairs end failed saying why, and a re-run continues."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.sim import SimConfig

PRICE = {"input": 2.5, "output": 10.0}


def _usage(root: Path, model: str, dataset: str) -> tuple[int, int]:
    lines = (root / "logs" / "samples" / model / f"{dataset}.jsonl").read_text().splitlines()[1:]
    usage = [json.loads(line).get("usage", {}) for line in lines]
    return sum(u.get("prompt_tokens", 0) for u in usage), sum(u.get("completion_tokens", 0) for u in usage)


def test_the_cost_per_model_and_dataset(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    models = [lightllm("m", sim.url, price=PRICE), lightllm("free", sim.url)]
    plan = write_plan(tmp_path, models=models, datasets=[gsm_dataset("d", data), gsm_dataset("e", data)])
    assert main([str(plan), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    root = tmp_path / "out"
    spent = {d: _usage(root, "m", d) for d in ("d", "e")}
    expected = {d: (p * 2.5 + c * 10.0) / 1e6 for d, (p, c) in spent.items()}
    datasets = out["models"]["m"]["datasets"]
    assert {d: (v["prompt_tokens"], v["completion_tokens"]) for d, v in datasets.items()} == spent and all(p and c for p, c in spent.values())
    assert {d: v["cost"] for d, v in datasets.items()} == pytest.approx(expected)
    assert out["models"]["m"]["cost"] == pytest.approx(sum(expected.values())) == out["cost"]
    assert "cost" not in out["models"]["free"]  # no price, no cost
    (cost_csv,) = (root / "summary").glob("cost_*.csv")
    lines = cost_csv.read_text().splitlines()
    assert lines[0] == "model,dataset,prompt_tokens,completion_tokens,cost" and [line.split(",")[:4] for line in lines[1:]] == [
        ["m", d, str(p), str(c)] for d, (p, c) in spent.items()
    ]
    (txt,) = (root / "summary").glob("summary_*.txt")
    assert "Cost of this run's tokens" in txt.read_text() and f"{sum(expected.values()):.4f}" in txt.read_text()
    page = tmp_path / "report.html"  # the report: each model×dataset's tokens and cost, from the per-sample log
    assert main(["report", str(root), "-o", str(page)]) == 0
    summary = json.loads(re.search(r'id="report-data">(.*?)</script>', page.read_text()).group(1))  # type: ignore[union-attr]
    costs = {(p["model"], p["dataset"]): (tuple(p["tokens"]), p["cost"]) for p in summary["pairs"]}
    assert costs[("m", "d")] == (spent["d"], pytest.approx(expected["d"])) and costs[("free", "e")][1] is None


def test_cost_limit_stops_new_requests_and_a_re_run_continues(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = arithmetic(200)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    one = (15 * 2.5 + 12 * 10.0) / 1e6  # about what one sample costs (its prompt and answer tokens)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, price=PRICE, max_workers=4)], datasets=[gsm_dataset("d", data)],
                      run={"cost_limit": 30 * one, "sample_log": False})
    assert main([str(plan), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    (pair,) = out["pairs"]
    assert pair["status"] == "fail" and "cost_limit" in pair["error"] and "a re-run continues" in pair["error"]
    first, limit = pair["completed"], 30 * one
    average = out["cost"] / first
    assert out["cost"] >= limit and (first - 4 - 1) * average < limit  # the limit's worth, and no more than max_workers out besides
    assert first < 200 and sim.stats.requests_total == first  # nothing failed, nothing sent in vain
    assert not (tmp_path / "out" / "logs" / "samples").exists()  # priced units are traced for their usage, the log stays off
    assert main([str(plan), "--json"]) == 1  # a re-run continues, with this limit again
    again = json.loads(capsys.readouterr().out)["pairs"][0]
    assert first < again["completed"] and sim.stats.requests_total == again["completed"]  # nothing asked twice


@pytest.mark.parametrize(
    ("model", "run", "said"),
    [
        ({"price": {"input": -1.0, "output": 1.0}}, {}, "models[0].price.input"),
        ({"price": {"input": 1.0, "outptu": 1.0}}, {}, "models[0].price.outptu: unknown key"),
        ({"price": 3.0}, {}, "models[0].price"),
        ({}, {"cost_limit": -5.0}, "run.cost_limit"),
    ],
)
def test_bad_prices_and_limits_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: dict[str, Any], run: dict[str, Any], said: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(2))
    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9", **model)], datasets=[gsm_dataset("d", data)], run=run)
    assert main([str(plan), "--no-ui"]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_the_strip_s_cost_is_the_priced_models_so_far() -> None:
    """RunState.cost (what the strip shows): the priced models' ModelLoad costs added up; None when none is priced."""
    from evaltui.engine.stream import events as ev
    from evaltui.engine.stream.state import RunState

    state = RunState()
    assert state.cost() is None
    state.apply(ev.ModelLoad("free", 0, 4, 0, 10))
    assert state.cost() is None
    state.apply(ev.ModelLoad("a", 0, 4, 0, 10, cost=0.25, usage=(("d", 1000, 200, 0.25),)))
    state.apply(ev.ModelLoad("b", 0, 4, 0, 10, cost=1.5))
    state.apply(ev.ModelLoad("a", 0, 4, 0, 12, cost=0.5))  # a later report of the same model replaces the earlier
    assert state.cost() == pytest.approx(2.0)
