"""kill -9 at several moments, then a plain re-run: same predictions as an uninterrupted run, no duplicates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from planmaker import arithmetic, gsm_dataset, lightllm, run_plan, write_jsonl, write_plan

from evaltui.engine.workdir import WorkDir, scan_checkpoint
from evaltui.sim import AnswerKey, ModelProfile, SimConfig

N = 300


def _evaltui(plan: Path, work_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--work-dir", str(work_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _kill_when(proc: subprocess.Popen[bytes], ready, deadline: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    """SIGKILL the process once `ready()` holds; False if it exited first."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            return True
        time.sleep(0.002)
    proc.kill()
    raise AssertionError("the run neither reached the kill point nor finished in time")


def test_sigkill_at_several_points_then_rerun_matches_an_uninterrupted_run(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(N)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.7, latency=0.01, jitter=0.02)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=16)],
        datasets=[gsm_dataset("d", data), gsm_dataset("s", data, shards=3)],
    )

    reference = WorkDir(tmp_path / "reference")
    code, _, _ = run_plan(plan, work_dir=reference.root)
    assert code == 0

    crashed = WorkDir(tmp_path / "crashed")
    cp_d = crashed.checkpoint_file("m", "d")
    cp_s = [crashed.checkpoint_file("m", "s", k, 3) for k in range(3)]
    kill_points = [
        lambda: _lines(cp_d) >= 1,  # right after the first checkpoint line
        lambda: _lines(cp_d) >= 120,  # mid-dataset
        lambda: crashed.predictions_file("m", "d").exists(),  # between datasets, maybe mid-scoring
        lambda: sum(_lines(p) for p in cp_s) >= 150,  # mid-way through a sharded dataset
    ]
    sim.reset_stats()
    kills = 0
    for ready in kill_points:
        proc = _evaltui(plan, crashed.root)
        kills += _kill_when(proc, ready)
    assert kills >= 3, "the run finished before most kill points; make it slower"

    proc = _evaltui(plan, crashed.root)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()

    for ds in ("d", "s"):
        want = json.loads(reference.predictions_file("m", ds).read_text())
        got = json.loads(crashed.predictions_file("m", ds).read_text())
        assert got == want
        assert json.loads(crashed.result_file("m", ds).read_text())["accuracy"] == json.loads(reference.result_file("m", ds).read_text())["accuracy"]
    for path in [cp_d, *cp_s]:
        indices = [index for index, ok, _ in scan_checkpoint(path) if ok]
        assert len(indices) == len(set(indices)), f"duplicate sample in {path.name}"
    # A kill loses at most the requests in flight: each prompt was sent at most once per run per dataset.
    per_prompt = sim.stats.attempts
    assert max(per_prompt.values()) <= 2 * (kills + 1)
    assert sum(per_prompt.values()) <= 2 * N + kills * 16


def test_the_bundled_simulator_dies_with_a_killed_evaltui(tmp_path: Path) -> None:
    from conftest import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui", str(REPO / "sample_configs" / "demo.toml"), "--no-ui", "--work-dir", str(tmp_path / "w")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:  # bounded by the run itself (the demo ends) and the deadline
        if "simulator: listening on" in line or time.monotonic() > deadline:
            break
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    sim_pids = [int(p) for p in children if "evaltui.sim" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(sim_pids) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    end = time.monotonic() + 10
    while time.monotonic() < end and _alive(sim_pids[0]):
        time.sleep(0.02)
    assert not _alive(sim_pids[0]), "the simulator outlived the evaltui that started it"


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for init to reap it."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
