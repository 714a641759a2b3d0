"""Server faults (SPEC §4, §5): a rate-limiting, failing, garbling, hanging server; one that is down
at the start; one that goes away mid-run. Every run ends, every sample is accounted for (succeeded,
or failed with its reason in the checkpoint, logs/failures.jsonl and the status counts), no sample
is tried more than `retry + 1` times by the server's own count, and a re-run finishes the rest.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan
from workfiles import account, failure_log, index_of

from evaltui.engine.run.runner import Runner
from evaltui.plan import load_plan
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig, SimThread

pytestmark = [pytest.mark.reliability, pytest.mark.faults]

RUN_DEADLINE = 60.0  # s; a run that takes longer is hanging

# 10 % mixed faults, 2 % non-retryable 400s; replies that are "slow" never come within the timeout.
MIXED = Faults(rate_429=0.02, rate_500=0.02, rate_malformed=0.02, rate_drop=0.02, rate_slow=0.02, rate_400=0.02,
               slow_seconds=30.0, retry_after=0.05, seed=11)


def _key(rows: list[dict[str, Any]]) -> AnswerKey:
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    return key


def run(plan: Path, work_dir: Path) -> int:
    """One in-process run, which must end by itself well within RUN_DEADLINE."""

    async def bounded() -> int:
        with anyio.fail_after(RUN_DEADLINE):
            return await Runner(load_plan(plan), work_dir=work_dir).run()

    return anyio.run(bounded)


def everything_accounted_for(work_dir: Path, model: str, dataset: str, total: int, log_from: int = 0, *, stopped: bool = False) -> dict[int, dict[str, Any]]:
    """Each sample succeeded or failed with a reason, the same in checkpoints, status files and
    logs/failures.jsonl (from its line `log_from`: the log keeps earlier runs' failures);
    returns the failed ones (index -> error).

    `stopped`: the model was stopped early (no server answered its first samples), so samples
    it never sent are allowed — each shard then ends `fail` with the reason in its status file.
    """
    acc = account(work_dir, model, dataset)
    unrun = set(range(total)) - acc.succeeded - set(acc.failed)
    if stopped:
        assert set(acc.statuses) == {"fail"} and all("stopped" in e for e in acc.errors), acc.errors
    else:
        assert not unrun, f"samples neither succeeded nor failed: {sorted(unrun)[:10]}"
    assert (acc.completed, acc.failed_count) == (len(acc.succeeded), len(acc.failed)), "status counts disagree with the checkpoints"
    assert set(acc.statuses) <= {"done", "fail"}, acc.statuses
    for error in acc.failed.values():
        assert error["message"] and error["type"], error
    logged = {index_of(f): f for f in failure_log(work_dir)[log_from:] if f["model"] == model and f["dataset"] == dataset}
    assert set(logged) == set(acc.failed), "logs/failures.jsonl does not list exactly the failed samples"
    for i, f in logged.items():
        assert f["message"] == acc.failed[i]["message"]
    return acc.failed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def when(condition: Callable[[], bool], action: Callable[[], Any], deadline: float = RUN_DEADLINE) -> threading.Thread:
    """Do `action` in a thread once `condition()` holds (polled; given up after `deadline`)."""

    def watch() -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if condition():
                action()
                return
            time.sleep(0.005)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def started(work_dir: Path) -> bool:
    return any(p.read_text().find('"running"') >= 0 for p in (work_dir / "infer_status").rglob("*.json"))


def lines(work_dir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in (work_dir / "predictions").rglob("tmp_*.jsonl"))


def test_mixed_faults_every_sample_accounted_for_retries_bounded_and_rerun_finishes(tmp_path: Path, sim_factory) -> None:
    n = 400
    rows = arithmetic(n)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    # One server per model so each server's fault counts belong to one retry setting.
    sims = {m: sim_factory(SimConfig(answer_key=_key(rows), faults=MIXED)) for m in ("a", "b")}
    retry = {"a": 3, "b": 0}
    plan = write_plan(
        tmp_path,
        models=[lightllm(m, sims[m].url, max_workers=32, retry=retry[m], timeout=2.0) for m in ("a", "b")],
        datasets=[gsm_dataset("d", data, shards=2)],
        run={"max_num_workers": 2},
    )
    wd = tmp_path / "out"
    assert run(plan, wd) == 1  # some samples failed for good: not every pair is scored

    failed = {}
    for m in ("a", "b"):
        failed[m] = everything_accounted_for(wd, m, "d", n)
        attempts = sims[m].stats.attempts
        assert len(attempts) == n
        assert max(attempts.values()) <= retry[m] + 1, f"{m}: a sample was tried more than retry + 1 times"
        for i, error in failed[m].items():
            if error["status"] == 400:  # not retryable: no attempt after it
                assert attempts[(m, rows[i]["question"])] <= error["attempts"]
    # With retries, the 2 % of 400s are what fails; the rest of the 10 % was retried away.
    assert failed["a"] and {e["status"] for e in failed["a"].values()} == {400}
    # Without retries every fault is a failure, with the server's status or a transport reason.
    faults = sims["b"].stats.faults
    statuses = [e["status"] for e in failed["b"].values()]
    assert statuses.count(429) == faults["429"] > 0
    assert statuses.count(500) == faults["500"] > 0
    assert statuses.count(400) == faults["400"] > 0
    assert statuses.count(200) == faults["malformed"] > 0  # a 200 whose body is cut off
    assert statuses.count(None) >= faults["drop"] + faults["slow"] > 0  # dropped or no reply in time

    print(f"\nfaults: a (retry 3): {len(failed['a'])} failed of {n}, server faults {dict(sims['a'].stats.faults)}, "
          f"max attempts {max(sims['a'].stats.attempts.values())}; b (retry 0): {len(failed['b'])} failed, server faults {dict(faults)}")
    for sim in sims.values():
        sim.call(lambda s: setattr(s.config, "faults", Faults()))
        sim.reset_stats()
    logged = len(failure_log(wd))
    assert run(plan, wd) == 0
    for m in ("a", "b"):
        assert everything_accounted_for(wd, m, "d", n, logged) == {}
        # Only the failed samples were asked again, once each.
        assert sum(sims[m].stats.attempts.values()) == len(failed[m])
        assert (wd / "results" / m / "d.json").exists()


def _plan_at(tmp_path: Path, url: str, n: int, **model: Any) -> Path:
    rows = arithmetic(n)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    return write_plan(tmp_path, models=[lightllm("m", url, **model)], datasets=[gsm_dataset("d", data)])


def _sim_config(n: int, latency: float = 0.0, port: int = 0) -> SimConfig:
    return SimConfig(port=port, answer_key=_key(arithmetic(n)), models={"m": ModelProfile(latency=latency)})


def test_a_server_down_at_the_start_that_comes_up_within_the_retry_budget(tmp_path: Path, sim_factory) -> None:
    n, port = 60, free_port()
    url = f"http://127.0.0.1:{port}"
    # retry 8 with backoff 0.1 s: at least 0.05·(2⁸−1) ≈ 12.8 s of waiting before a sample gives up.
    plan = _plan_at(tmp_path, url, n, retry=8, backoff=0.1, max_workers=8)
    wd = tmp_path / "out"
    came_up: list[SimThread] = []
    # The server starts only once the run is under way (its first attempts were refused).
    when(lambda: started(wd), lambda: (time.sleep(0.3), came_up.append(sim_factory(_sim_config(n, port=port)))))
    assert run(plan, wd) == 0
    assert came_up, "the server never came up"
    assert everything_accounted_for(wd, "m", "d", n) == {}
    assert failure_log(wd) == []


def test_a_server_down_beyond_the_retry_budget_fails_samples_and_a_rerun_finishes(tmp_path: Path, sim_factory) -> None:
    n, port = 60, free_port()
    plan = _plan_at(tmp_path, f"http://127.0.0.1:{port}", n, retry=2, backoff=0.01, max_workers=8)
    wd = tmp_path / "out"
    assert run(plan, wd) == 1
    # The first samples fail with the connection error after all their attempts; the model is
    # then stopped with the reason rather than grinding every sample through its retries.
    failed = everything_accounted_for(wd, "m", "d", n, stopped=True)
    assert failed and all(e["status"] is None and e["attempts"] == 3 for e in failed.values())  # no HTTP status: no server

    sim = sim_factory(_sim_config(n, port=port))
    logged = len(failure_log(wd))
    assert run(plan, wd) == 0
    assert everything_accounted_for(wd, "m", "d", n, logged) == {}
    assert sum(sim.stats.attempts.values()) == n


def test_a_server_that_goes_away_mid_run_then_a_rerun_completes(tmp_path: Path, sim_factory) -> None:
    n = 300
    sim = sim_factory(_sim_config(n, latency=0.01))
    port = sim.port
    # one url is a fleet of one (issue 23): its requests wait down_timeout for it to come back
    plan = _plan_at(tmp_path, sim.url, n, retry=2, backoff=0.01, max_workers=8, down_timeout=1.0)
    wd = tmp_path / "out"
    when(lambda: lines(wd) >= 60, sim.stop)
    assert run(plan, wd) == 1
    failed = everything_accounted_for(wd, "m", "d", n, stopped=True)  # down for down_timeout: the model stopped
    assert 0 < len(failed) < n - 50
    assert all(e["status"] is None for e in failed.values())  # connection refused or cut, no reply
    done = len(account(wd, "m", "d").succeeded)

    back = sim_factory(_sim_config(n, port=port))
    logged = len(failure_log(wd))
    assert run(plan, wd) == 0
    assert everything_accounted_for(wd, "m", "d", n, logged) == {}
    assert sum(back.stats.attempts.values()) == n - done  # only what had not been answered was asked again (the stop left some unsent)
