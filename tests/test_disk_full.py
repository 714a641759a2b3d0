"""A disk that fills up mid-run (RELIABILITY.md §3): a real small filesystem, not a mock.

The work dir is on a tmpfs mounted by the test (root only; skipped with the reason elsewhere)
that a filler file leaves ~150 kB of, so the checkpoint fills it after some dozens of samples.
The run must stop with a message saying what happened and that the finished samples are kept,
no traceback; every complete checkpoint line must still be there; and once the filler is
deleted, running the same command again must ask only the samples not on disk and reach the
exact score of an uninterrupted run. The free space left is varied so that the first write to
find the disk full is, in turn, the resolved plan, the log, the status files and the checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from planmaker import gsm_dataset, key_for, lightllm, write_jsonl, write_plan
from workfiles import checkpoint_entries

from evaltui.sim import ModelProfile, SimConfig
from evaltui.sim.answers import answers_correctly

pytestmark = pytest.mark.reliability

N = 300
#: Free space left on the disk: the resolved plan.toml, then the log, the status files, then
#: the checkpoint some dozens of samples in are the first write that finds it full.
FREE_KB = (8, 12, 24, 150)
MID_RUN_KB = 150


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mountpoint)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, timeout=30)


def _evaltui(plan: Path, work_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--work-dir", str(work_dir)],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )


def _fill(disk: Path, leave_kb: int) -> Path:
    st = os.statvfs(disk)
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (st.f_bavail * st.f_frsize - leave_kb * 1024))
    return filler


@pytest.mark.parametrize("free_kb", FREE_KB)
def test_a_disk_that_fills_stops_the_run_clearly_loses_nothing_and_a_rerun_reaches_the_exact_score(tmp_path: Path, small_disk: Path, sim_factory, free_kb: int) -> None:  # type: ignore[no-untyped-def]
    pad = "x" * 1000  # ~2 kB per checkpoint line: the free space lasts some dozens of samples
    rows = [{"question": f"Q{i}: what is {i} + 7? {pad}", "answer": f"#### {i + 7}"} for i in range(N)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.7)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=[gsm_dataset("d", data)])

    # what an uninterrupted run scores: the simulator's answers are a known function of the prompt
    score = f"scored, accuracy = {100 * sum(answers_correctly('m', r['question'], 0.7) for r in rows) / N:.2f}"

    work_dir = small_disk / "out"
    filler = _fill(small_disk, free_kb)
    sim.reset_stats()
    full = _evaltui(plan, work_dir)
    printed = full.stdout + full.stderr
    assert "Traceback" not in printed
    assert full.returncode in (1, 2) and "No space left on device" in printed and "run again" in printed, printed
    checkpoint = work_dir / "predictions" / "m" / "tmp_d.jsonl"
    kept = {e["index"]: e for e in checkpoint_entries(checkpoint)} if checkpoint.exists() else {}
    if free_kb == MID_RUN_KB:
        assert full.returncode == 1 and "finished samples are kept" in printed, printed
        assert 10 < len(kept) < N, len(kept)  # it filled mid-run

    filler.unlink()  # the user frees space
    print(f"\n{free_kb} kB free: exit {full.returncode}, {len(kept)} of {N} samples kept")
    sim.reset_stats()
    again = _evaltui(plan, work_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"m/d: {score}" in again.stdout  # the exact score of the uninterrupted run
    assert sim.stats.requests_total == N - len(kept)  # nothing that was on disk was asked again
    after = {e["index"]: e for e in checkpoint_entries(checkpoint)}
    assert all(after[i] == entry for i, entry in kept.items())  # nothing lost


def test_a_disk_that_fills_while_scoring_says_the_predictions_are_kept(tmp_path: Path, sim_factory, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The scorer's own write finding the disk full (the real disk's timing cannot be aimed at
    that moment, so the scorer raises what the write would)."""
    import errno

    import evaltui.engine.run.scorer as watch
    from evaltui.cli import main

    rows = [{"question": f"{i} + 1", "answer": f"#### {i + 1}"} for i in range(4)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=1.0)}))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])

    def full(*args: object, **kwargs: object) -> float:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(watch, "score_pair", full)
    assert main([str(plan), "--no-ui"]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if "scoring FAILED" in x)
    assert "No space left on device" in line and "predictions are kept" in line and "free space and run again" in line, line
