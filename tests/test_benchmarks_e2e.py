"""A benchmark dataset through everything a dataset goes through: `--samples`, `limit`, epochs,
resume, retry, `show`, `compare`, the export and `watch`, against the simulator on loopback.

The simulator is given the plan's answer key (what evaltui's sim:// gives it: the entry's right
reply in the form its reference scores) and fails each prompt's first request where a test asks.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from benchkit import shared
from planmaker import lightllm, run_plan, write_plan
from test_ui_app import until, until_run_ends

from evaltui.engine.run.runner import Runner
from evaltui.engine.run.simproc import write_answer_key
from evaltui.plan import load_plan, select
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig


def _key(plan_path: Path) -> AnswerKey:
    out = io.StringIO()
    write_answer_key(load_plan(plan_path), out)
    key = AnswerKey()
    for line in out.getvalue().splitlines():
        rec = json.loads(line)
        key.add_gen(rec["prompt"], rec["answer"])
    return key


def _dataset(**kw: Any) -> dict[str, Any]:
    return {"abbr": "gsm", "benchmark": "gsm8k_cot", "path": str(shared("gsm8k", "test.jsonl")), "limit": 12, **kw}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui", *args], capture_output=True, text=True, timeout=120)


def test_samples_epochs_resume_and_retry_on_a_benchmark(tmp_path: Path, sim_factory: Any) -> None:
    plan_path = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}], datasets=[_dataset()])
    sim = sim_factory(SimConfig(answer_key=_key(plan_path), faults=Faults(fail_first=1, fail_first_kind="500")))
    sampled = {"temperature": 0.8, "epochs": 2, "evaluator": {"reducer": "pass_at_k", "k": [1, 2]}}
    plan_path = write_plan(tmp_path, models=[lightllm("m", sim.url, retry=0)], datasets=[_dataset(**sampled)])
    plan = select(load_plan(plan_path), None, None, [1, 4, 7])
    runner = Runner(plan)

    async def main() -> tuple[int, int]:
        first = await runner.run()  # each prompt's first request fails: one epoch of each sample
        return first, await runner.retry(runner.failed_pairs())

    try:
        assert anyio.run(main) == (1, 0)
    finally:
        runner.close()
    assert sim.stats.requests_total == 3 * 2 + 3  # 3 samples × 2 epochs, then the 3 failed epochs again
    result = json.loads(runner.workdir.result_file("m", "gsm").read_text())
    assert result["pass@1"] == 100.0 and result["pass@2"] == 100.0 and result["samples"] == "1,4,7"
    assert [d["index"] for d in result["details"]] == [1, 4, 7]
    row = runner.leaderboard().rows()[0]
    assert row[1].startswith("lm-eval gsm8k_cot v3+") and "subset of 3" in row[2]  # changed (temperature, epochs' reducer), and a subset
    # a re-run of the whole plan (a retry a request now) keeps the three and sends the other nine (limit 12), × 2 epochs
    before = sim.stats.requests_total
    code, _, again = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, retry=1)], datasets=[_dataset(**sampled)]))
    assert code == 0
    assert sim.stats.requests_total - before == 9 * 2 + 9  # each of the nine prompts' first request fails once, then is answered
    assert len(json.loads(again.workdir.predictions_file("m", "gsm").read_text())) == 12


def test_show_compare_export_and_watch_read_a_benchmarks_work_dir(tmp_path: Path) -> None:
    strong, weak = (write_plan(tmp_path, name=f"{n}.toml", run={"work_dir": n},
                               models=[{"abbr": "m", "type": "openai-chat", "url": f"sim://?latency=0&accuracy={a}", "model": "m"}],
                               datasets=[_dataset()]) for n, a in (("strong", 1.0), ("weak", 0.5)))
    for plan in (strong, weak):
        code, _, _ = run_plan(plan)
        assert code == 0
    a, b = tmp_path / "strong", tmp_path / "weak"
    shown = _cli("show", str(a), "--full")
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[0].startswith("m/gsm: scored, exact_match,strict-match 100.00")
    assert shown.stdout.count(" right ") == 12 and "The answer is 18." in shown.stdout
    compared = _cli("compare", str(a), str(b), "--json")
    assert compared.returncode == 0, compared.stderr
    (row,) = json.loads(compared.stdout)["rows"]
    assert row["metric"] == "exact_match,strict-match" and row["a"] == 100.0 and row["b"] < 100.0 and row["right_to_wrong"]
    exported = json.loads(_cli("show", str(b), "--export", "json").stdout)
    (pair,) = exported["pairs"]
    assert pair["metrics"]["exact_match,strict-match"] == row["b"] and pair["leaderboard_version"] == "lm-eval gsm8k_cot v3"
    assert all(set(r["scores"]) == {"exact_match,strict-match", "exact_match,flexible-extract"} for r in pair["records"])
    watched = _cli("watch", str(b), "--no-ui")
    assert watched.returncode == 0
    assert "lm-eval gsm8k_cot v3" in watched.stdout and "exact_match,flexible-extract" in watched.stdout


MMLU_PARTS = ["anatomy", "astronomy", "virology"]


def _mmlu_plan(tmp_path: Path, **kw: Any) -> Path:
    return write_plan(tmp_path, models=[{"abbr": "c", "type": "openai-completions", "url": "sim://?latency=0&accuracy=0.6"},
                                        {"abbr": "l", "type": "lightllm", "url": "sim://?latency=0&accuracy=0.6"}],
                      datasets=[{"abbr": "mmlu", "benchmark": "mmlu", "path": str(shared("mmlu")), "split": "validation", "subsets": MMLU_PARTS, **kw}])


def test_a_grouped_benchmark_is_one_row_with_its_parts_in_show_json_and_the_details(tmp_path: Path) -> None:
    plan = _mmlu_plan(tmp_path)
    r = _cli(str(plan), "--no-ui", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    (row,) = summary["leaderboard"]["datasets"]  # one row: the group's score
    assert row["metric"] == "acc" and row["version"].startswith("lm-eval mmlu v2+")  # (split and subsets are the plan's)
    by_model = {p["model"]: p for p in summary["pairs"]}
    for model in ("c", "l"):
        parts = by_model[model]["parts"]
        assert list(parts) == MMLU_PARTS
        sizes = [parts[p]["samples"] for p in MMLU_PARTS]
        weighted = sum(parts[p]["acc"] * parts[p]["samples"] for p in MMLU_PARTS) / sum(sizes)
        assert abs(weighted - by_model[model]["score"]) < 0.02  # lm-eval's weight_by_size: the mean over every question
        assert 20 < by_model[model]["score"] < 95  # the simulator's 0.6, within noise
    work = tmp_path / "out"
    shown = _cli("show", str(work), "--model", "c", "--limit", "1").stdout.splitlines()
    assert [line.split(":")[0] for line in shown[1:4]] == [f"  part {p}" for p in MMLU_PARTS]
    details = Runner(load_plan(plan)).pair_details("c", "mmlu")
    assert list(details.parts) == MMLU_PARTS and details.parts["virology"]["samples"] == 18


def test_the_details_screen_lists_a_grouped_benchmarks_parts(tmp_path: Path) -> None:
    import asyncio

    from textual.widgets import DataTable

    from evaltui.ui.app import EvalApp
    from evaltui.ui.screens.details import DetailsScreen

    runner = Runner(load_plan(_mmlu_plan(tmp_path, limit=20)))

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until_run_ends(pilot, app, settle=0)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen) and app.screen.query_one("#details-body").display, "the details")
            parts = app.screen.query_one("#details-parts", DataTable)
            assert parts.display
            rows = [[str(c) for c in parts.get_row_at(k)] for k in range(parts.row_count)]
            assert [r[0] for r in rows] == ["anatomy", "astronomy"] and [r[-1] for r in rows] == ["14", "6"]  # limit 20: the first 20 records

    try:
        asyncio.run(scenario())
    finally:
        runner.close()


def test_a_benchmark_by_name_from_the_command_line_killed_mid_run_resumes_with_nothing_lost_or_sent_twice(tmp_path: Path, sim_factory: Any) -> None:
    """`evaltui PLAN --no-ui` as a user runs it — gsm8k_cot by name, limit 10, 2 epochs, against
    the simulator on loopback — SIGKILLed once answers are checkpointed, then run again: the
    re-run sends only what was not answered and scores all 10 samples' 20 answers."""
    dataset = _dataset(limit=10, epochs=2, temperature=0.7)
    plan_path = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}], datasets=[dataset])
    sim = sim_factory(SimConfig(answer_key=_key(plan_path), default=ModelProfile(latency=0.2)))
    plan_path = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=2)], datasets=[dataset])
    wd = tmp_path / "work"
    cmd = [sys.executable, "-m", "evaltui", str(plan_path), "--no-ui", "--work-dir", str(wd)]
    run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lines = 0
        for _ in range(1200):  # at most 60 s
            lines = sum(len(p.read_text().splitlines()) for p in (wd / "predictions" / "m").glob("tmp_*.jsonl"))
            if lines >= 4 or run.poll() is not None:
                break
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before it could be killed"
        assert lines >= 4
    finally:
        run.kill()
        run.wait(timeout=30)
    assert run.returncode == -signal.SIGKILL
    sent_before = sim.stats.requests_total
    assert sent_before < 20
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sim.stats.requests_total <= 20 + 2  # the answers checkpointed are not asked again (at most the 2 in flight were lost)
    predictions = json.loads((wd / "predictions" / "m" / "gsm.json").read_text())
    assert len(predictions) == 10
    result = json.loads((wd / "results" / "m" / "gsm.json").read_text())
    assert result["exact_match,strict-match"] == 100.0 and result["epochs"] == 2
    assert "lm-eval gsm8k_cot v3+" in again.stdout  # its temperature and epochs are not the entry's
