"""Small datasets end in batches (engine/run/ending.py, BATCH_WAIT): a dataset whose samples are
all answered waits a moment to end with the others, and none is ever left unended by that wait —
not at the pool's end, not when a model stops (cost_limit), not on Ctrl-C, not on a full disk.

Each test sets BATCH_WAIT to an hour, so that no batch ends on its own during the run: every
dataset's ending is the one the pool's end, its stop or its cancellation makes."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.engine.run import ending
from evaltui.engine.stream import events as ev
from evaltui.sim import ModelProfile, SimConfig

N, PER = 12, 3


@pytest.fixture
def datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setattr(ending, "BATCH_WAIT", 3600.0)
    return [gsm_dataset(f"d{k}", write_jsonl(tmp_path / f"d{k}.jsonl", arithmetic(PER, f"D{k}-"))) for k in range(N)]


def _sim(sim_factory: Any, latency: float = 0.0) -> Any:
    return sim_factory(SimConfig(answer_key=key_for(*(arithmetic(PER, f"D{k}-") for k in range(N))), default=ModelProfile(latency=latency)))


def _status(root: Path, d: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "infer_status" / "m" / f"{d}.json").read_text())
    return data


def test_small_datasets_end_together_and_the_pools_end_ends_the_last_batch(tmp_path: Path, sim_factory: Any, datasets: list[dict[str, Any]]) -> None:
    sim = _sim(sim_factory)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets))
    assert code == 0
    last_answer = max(i for i, e in enumerate(events) if isinstance(e, ev.SampleFinished))
    inferred = [i for i, e in enumerate(events) if isinstance(e, ev.DatasetInferred)]
    assert len(inferred) == N and min(inferred) > last_answer  # none ended on its own within the hour: all at the pool's end
    assert [e.dataset for e in events if isinstance(e, ev.DatasetInferred)] == [f"d{k}" for k in range(N)]  # in the order they finished
    for k in range(N):
        assert _status(runner.workdir.root, f"d{k}")["status"] == "done"
        assert len(json.loads(runner.workdir.predictions_file("m", f"d{k}").read_text())) == PER
        assert runner.workdir.read_result("m", f"d{k}")["accuracy"] == 100.0


def test_a_model_stopped_by_its_cost_limit_ends_its_answered_datasets_done_not_failed(
    tmp_path: Path, sim_factory: Any, datasets: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    sim = _sim(sim_factory)
    one = (15 * 2.5 + 12 * 10.0) / 1e6  # about what one sample costs (as tests/test_cost.py)
    price = {"input": 2.5, "output": 10.0}
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=2, price=price)], datasets=datasets, run={"cost_limit": 16 * one, "sample_log": False})
    assert main([str(plan), "--json"]) == 1
    pairs = {p["dataset"]: p for p in json.loads(capsys.readouterr().out)["pairs"]}
    answered = [d for d, p in pairs.items() if p["completed"] == PER]
    assert len(answered) >= 3, pairs
    for d in answered:  # waiting for its batch as the model stopped: ended `done` and scored, not failed with the rest
        assert pairs[d]["status"] == "scored" and pairs[d]["score"] == 100.0, pairs[d]
        assert _status(tmp_path / "out", d)["status"] == "done"
    stopped = [p for p in pairs.values() if p["status"] == "fail"]
    assert stopped and all("cost_limit" in p["error"] for p in stopped)


def test_ctrl_c_ends_the_datasets_waiting_for_their_batch(tmp_path: Path, sim_factory: Any, datasets: list[dict[str, Any]]) -> None:
    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    sim = _sim(sim_factory, latency=0.005)
    answered: list[str] = []

    def sink(e: ev.Event) -> None:
        if isinstance(e, ev.SampleFinished):
            answered.append(e.dataset)
            if len(answered) == 5 * PER:
                runner.cancel()

    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=1)], datasets=datasets)), sink=sink)

    async def run() -> int:
        with anyio.fail_after(60):
            return await runner.run()

    assert anyio.run(run) == 130
    whole = [d for d in dict.fromkeys(answered) if answered.count(d) == PER]
    assert len(whole) >= 5
    for d in whole:  # all its samples in before the Ctrl-C: ended `done`, its predictions written
        assert _status(runner.workdir.root, d)["status"] == "done"
        assert len(json.loads(runner.workdir.predictions_file("m", d).read_text())) == PER
    left = [f"d{k}" for k in range(N) if f"d{k}" not in whole]
    assert left and all(_status(runner.workdir.root, d)["status"] in ("pending", "fail") for d in left if (runner.workdir.root / "infer_status" / "m" / f"{d}.json").exists())


def test_a_full_disk_as_a_batch_ends_stops_the_run_and_a_rerun_finishes_each_dataset(
    tmp_path: Path, sim_factory: Any, datasets: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = _sim(sim_factory)
    merge = ending.merge_checkpoints

    def full(paths: list[Path], total: int, out: Path, **kw: Any) -> int:
        if out.name == "d5.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(out))
        return merge(paths, total, out, **kw)

    monkeypatch.setattr(ending, "merge_checkpoints", full)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets)
    code, events, runner = run_plan(plan)
    assert code != 0
    said = " ".join(e.message for e in events if isinstance(e, ev.Notice)) + " ".join(str(e) for e in events if isinstance(e, ev.RunFinished))
    assert "No space left on device" in said
    root = runner.workdir.root
    assert _status(root, "d5")["status"] != "done" and not runner.workdir.predictions_file("m", "d5").exists()
    for k in (*range(5), *range(6, N)):  # the others of its batch: ended done all the same (those after it as the pool stops)
        assert _status(root, f"d{k}")["status"] == "done" and runner.workdir.predictions_file("m", f"d{k}").exists()
    monkeypatch.setattr(ending, "merge_checkpoints", merge)
    sim.reset_stats()
    code, _, runner = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0  # every answer was kept: nothing asked again
    for k in range(N):
        assert runner.workdir.read_result("m", f"d{k}")["accuracy"] == 100.0


def test_one_dataset_whose_end_fails_leaves_the_others_of_its_batch_said(
    tmp_path: Path, sim_factory: Any, datasets: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Their files written, what is said of them (their status in the run, DatasetInferred, the
    # scorer woken) is said of each, whatever one of them raised (its `fail` on a full disk).
    sim = _sim(sim_factory)
    said = ending.PairEnding._ended

    def failing(self: ending.PairEnding, run: Any, shard: Any, end: Any) -> None:
        if run.cfg.abbr == "d5":
            raise OSError(errno.ENOSPC, "No space left on device")
        said(self, run, shard, end)

    monkeypatch.setattr(ending.PairEnding, "_ended", failing)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=datasets))
    assert code != 0
    assert {e.dataset for e in events if isinstance(e, ev.DatasetInferred)} == {f"d{k}" for k in range(N) if k != 5}
    assert all(_status(runner.workdir.root, f"d{k}")["status"] == "done" for k in range(N))  # (d5's files were written before)
