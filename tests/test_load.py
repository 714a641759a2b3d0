"""Load (issue 8 item 7): 20,000 samples at max_workers = 256 against the simulator.

Each run happens in a process of its own (tests/loadkid.py), which counts its open file
descriptors before and after the run and reports its memory, so the figures belong to that run
alone. The simulator runs in another process: its own bookkeeping (an answer per prompt, a
request log) grows with the dataset by design and must not be counted as evaltui's.

Memory is judged by its growth during the run (peak resident set minus the resident set just
before it) at 2,000 and at 20,000 samples: ten times the data must not cost anywhere near ten
times the memory. The bound is a generous ratio, never a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan
from workfiles import read_strict_json

pytestmark = [pytest.mark.reliability, pytest.mark.load]

HERE = Path(__file__).resolve().parent
WORKERS = 256
SMALL, LARGE = 2_000, 20_000
# Growth at 10× the samples over growth at 1×: 10 if memory followed the dataset, ~1 if it
# followed concurrency alone; what is allowed between is per-sample bookkeeping of a few bytes
# (the resume set, the merge's offsets) and allocator noise.
MAX_GROWTH_RATIO = 2.0


@pytest.fixture
def sim_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.sim", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "evaltui-sim listening on http://127.0.0.1:PORT"
        assert "listening on http://127.0.0.1:" in line, line
        yield line.split()[-1]
    finally:
        proc.kill()
        proc.wait(10)


def measured_run(tmp_path: Path, url: str, n: int) -> dict[str, Any]:
    data = write_jsonl(tmp_path / f"d{n}.jsonl", arithmetic(n))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", url, max_workers=WORKERS, timeout=60.0)],
        datasets=[gsm_dataset("d", data)],
        name=f"plan{n}.toml",
    )
    work_dir = tmp_path / f"out{n}"
    proc = subprocess.run([sys.executable, str(HERE / "loadkid.py"), str(plan), str(work_dir)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["exit"] == 0, figures
    assert len(read_strict_json(work_dir / "predictions" / "m" / "d.json")) == n
    figures["growth_kb"] = figures["peak_rss_kb"] - figures["rss_before_kb"]
    return figures


def test_20000_samples_at_256_workers_no_fd_growth_and_memory_bounded_by_concurrency(tmp_path: Path, sim_url: str) -> None:
    small = measured_run(tmp_path, sim_url, SMALL)
    large = measured_run(tmp_path, sim_url, LARGE)
    print(f"\nload: {SMALL} samples: {small}\n      {LARGE} samples: {large}")
    for figures in (small, large):
        # Every socket, checkpoint, status and log file of the run is closed when it ends.
        assert figures["fds_after"] <= figures["fds_before"], figures
    assert large["growth_kb"] <= MAX_GROWTH_RATIO * max(small["growth_kb"], 1024), (small, large)


def test_a_data_file_cut_short_under_a_running_dataset_fails_the_missing_samples_only(tmp_path: Path, sim_factory) -> None:
    """Records are read as workers take them; a file that loses records mid-run costs those samples only."""
    import threading
    import time

    from planmaker import run_plan

    from evaltui.sim import ModelProfile, SimConfig

    n = 200
    sim = sim_factory(SimConfig(models={"m": ModelProfile(latency=0.01)}))
    rows = arithmetic(n)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=[gsm_dataset("d", data)])
    work_dir = tmp_path / "out"
    checkpoint = work_dir / "predictions" / "m" / "tmp_d.jsonl"

    def cut_when_running() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (checkpoint.exists() and checkpoint.read_bytes().count(b"\n") > 10):
            time.sleep(0.005)
        write_jsonl(data, rows[: n // 2])  # half the records are gone

    cutter = threading.Thread(target=cut_when_running, daemon=True)
    cutter.start()
    code, _, _ = run_plan(plan, work_dir=work_dir)
    cutter.join(10)
    assert code == 1
    from workfiles import account

    acc = account(work_dir, "m", "d")
    assert acc.succeeded | set(acc.failed) == set(range(n))
    # What was read before the cut (a read-ahead buffer's worth) still counts; from there on
    # every sample fails with the reason, none is silently dropped.
    first = min(acc.failed)
    assert n // 2 <= first < n and set(acc.failed) == set(range(first, n))
    # (the cut may fall inside the line being read: then that line is the reason)
    assert all(e["type"] == "dataset" and "d.jsonl" in e["message"] for e in acc.failed.values())
