"""What a run leaves behind from its first line to its last, cancellation included."""

from __future__ import annotations

from pathlib import Path

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.sim import SimConfig


def setup(tmp_path: Path, sim_factory, n: int = 20):  # type: ignore[no-untyped-def]
    rows = arithmetic(n)
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key))
    return rows, sim, write_jsonl(tmp_path / "d.jsonl", rows)


def test_run_log_starts_with_the_run_started_line_each_run(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    for _ in range(2):
        code, _, runner = run_plan(plan)
        assert code == 0
    lines = (runner.workdir.logs_dir / "run.log").read_text().splitlines()
    started = [i for i, line in enumerate(lines) if "run started: m × d" in line]
    finished = [i for i, line in enumerate(lines) if "run finished" in line]
    assert started[0] == 0 and len(started) == 2 and len(finished) == 2
    assert finished[0] < started[1]  # the second run's lines follow the first's


@pytest.mark.parametrize("small", [True, False], ids=["merged-on-the-loop", "merged-in-a-thread"])
def test_cancelled_during_the_final_merge_no_shard_is_left_running_and_a_rerun_finishes(tmp_path: Path, sim_factory, monkeypatch, small: bool) -> None:
    import json

    import anyio

    from evaltui.engine.run import ending, pool
    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=2)])
    runner = Runner(load_plan(plan))
    merge = ending.PairEnding._merge
    merges = []

    def cancelled_merge(self, run):  # type: ignore[no-untyped-def]
        merges.append(run.cfg.abbr)
        runner.cancel()  # Ctrl-C as the checkpoints are about to be merged
        return merge(self, run)

    monkeypatch.setattr(ending.PairEnding, "_merge", cancelled_merge)
    monkeypatch.setattr(pool, "is_small", lambda run, data: small)  # 20 samples: small, unless said otherwise

    async def main() -> int:
        with anyio.fail_after(60):
            return await runner.run()

    assert anyio.run(main) == 130
    assert len(merges) == 1
    statuses = [json.loads(p.read_text())["status"] for p in runner.workdir.status_files("m", "d")]
    assert len(statuses) == 2 and "running" not in statuses
    monkeypatch.setattr(ending.PairEnding, "_merge", merge)
    sim.reset_stats()
    code, _, runner = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert len(json.loads(runner.workdir.predictions_file("m", "d").read_text())) == 20
    assert runner.workdir.read_result("m", "d")["accuracy"] == 100.0


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_a_model_whose_server_is_down_stops_early_with_the_reason_and_a_rerun_resumes(tmp_path: Path, sim_factory) -> None:
    import json

    from planmaker import of_type

    from evaltui.engine.stream import events as ev

    rows = arithmetic(200)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    datasets = [gsm_dataset("d", data), gsm_dataset("e", data, limit=50)]
    down = {"abbr": "m", "type": "lightllm", "url": f"http://127.0.0.1:{_closed_port()}/generate", "max_workers": 4, "retry": 1, "backoff": 0.0, "timeout": 5.0}
    code, events, runner = run_plan(write_plan(tmp_path, models=[down], datasets=datasets))
    assert code == 1
    failed = of_type(events, ev.SampleFailed)
    assert 0 < len(failed) < 20  # it stopped after a few, not after 250 refused samples
    inferred = {e.dataset: e for e in of_type(events, ev.DatasetInferred)}
    assert set(inferred) == {"d", "e"} and all(e.status == "fail" for e in inferred.values())
    assert all("server did not answer (connect: " in e.error for e in inferred.values())
    for dataset in ("d", "e"):
        status = runner.workdir.read_status("m", dataset)
        assert status["status"] == "fail" and "server did not answer" in status["error"]
    lines = (runner.workdir.logs_dir / "run.log").read_text()
    assert "none was answered; stopping this model" in lines and down["url"] in lines

    # The server is up (at another address): the run carries on where it stopped.
    key = key_for(rows)
    sim = sim_factory(SimConfig(answer_key=key))
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=datasets))
    assert code == 0 and sim.stats.requests_total == 250  # the refused samples and those never sent
    assert len(json.loads(runner.workdir.predictions_file("m", "d").read_text())) == 200


def test_a_wrong_url_path_stops_the_model_with_a_hint(tmp_path: Path, sim_factory) -> None:
    from planmaker import chat, of_type

    from evaltui.engine.stream import events as ev

    _, sim, data = setup(tmp_path, sim_factory, n=40)
    wrong = chat("m", sim.url, max_workers=2, url=f"{sim.url}/m")  # the base URL without its /v1
    code, events, _ = run_plan(write_plan(tmp_path, models=[wrong], datasets=[gsm_dataset("d", data)]))
    assert code == 1
    assert sim.stats.requests_total < 40
    (notice,) = [e for e in of_type(events, ev.Notice) if "stopping this model" in e.message]
    assert f"{sim.url}/m" in notice.message and "http://host:8000/v1" in notice.message
    assert "http 404" in of_type(events, ev.DatasetInferred)[0].error
