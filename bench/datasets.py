"""Many small datasets against one large one (issue 23): 10,000 datasets of 3 samples against 1
dataset of 30,000, the same requests to the same simulated server, `evaltui --no-ui` as a user
runs it. Goal: within 2× the time. Scheduling cost must not grow with the number of datasets, so
a middle size (3,000 × 3) shows the per-dataset cost staying put.

    python bench/datasets.py [--datasets 10000] [--per 3] [--repeat 1] [--middle 3000] [--dir DIR]

Each plan: one lightllm model on `sim://?latency=0.001` (the bundled simulator, 1 ms a reply),
max_workers 64, timeout 5 s; gsm8k-scored questions. Runs alternate (many, one, middle) `--repeat`
times. Columns: wall, CPU of the evaltui process tree (wait4), per dataset (wall over datasets),
failures (a timeout the loop caused would show here). Then the physical floor of the many: the
files SPEC §6 asks of each dataset (statuses, checkpoint, sample log, predictions, result),
written one after another on the same disk by a loop doing nothing else — what 1 × N plus those
files would take. Run by hand; the machine is noisy.

`--dir`: where the plans, data and work dirs go (default: the system's temporary folder). A
disk's own cost per file differs by orders of magnitude (this VM's ext4 is mounted `discard`: a
create and rename costs 50–700 µs, on tmpfs ~10 µs), so the engine's own cost per dataset is
best seen on a RAM disk (`mount -t tmpfs tmpfs /mnt/ramds`, then `--dir /mnt/ramds`), and the
disk's beside it in the floor line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomli_w

ENV = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "PYTHONDONTWRITEBYTECODE"}


def make_plan(folder: Path, datasets: int, per: int) -> Path:
    """`datasets` data files of `per` questions each (the same questions in all, numbered apart)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    entries = []
    for d in range(datasets):
        path = data / f"d{d}.jsonl"
        path.write_text("".join(json.dumps({"question": f"D{d} Q{i}: what is {i} + {d}?", "answer": f"#### {i + d}"}) + "\n" for i in range(per)))
        entries.append({"abbr": f"d{d}", "path": str(path), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}})
    plan = {
        "run": {"work_dir": str(folder / "out")},
        "models": [{"abbr": "m", "type": "lightllm", "url": "sim://?latency=0.001", "max_workers": 64, "timeout": 5.0}],
        "datasets": entries,
    }
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def file_floor(folder: Path, datasets: int) -> float:
    """Seconds this disk takes for the files a dataset of a few samples needs, whoever writes
    them, `datasets` times: its status written pending, running and done, its checkpoint and
    sample log made and a line appended, its predictions and result (each JSON file written
    whole to a temporary and renamed into place, as SPEC §6 asks). One thread, nothing else."""
    from evaltui.fsutil import atomic_write_bytes

    shutil.rmtree(folder, ignore_errors=True)
    for sub in ("infer_status", "predictions", "results", "samples"):
        (folder / sub).mkdir(parents=True)
    line = b'{"index": 0, "prediction": "#### 3"}\n'
    t0 = time.monotonic()
    for d in range(datasets):
        for status in (b"pending", b"running", b"done"):
            atomic_write_bytes(folder / "infer_status" / f"d{d}.json", b'{"status": "%s", "total": 3}\n' % status)
        for log in (folder / "predictions" / f"tmp_d{d}.jsonl", folder / "samples" / f"d{d}.jsonl"):
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, line * 3)
            os.close(fd)
        atomic_write_bytes(folder / "predictions" / f"d{d}.json", b"{%s}\n" % line)
        atomic_write_bytes(folder / "results" / f"d{d}.json", b'{"accuracy": 100.0, "details": [%s]}\n' % line)
    wall = time.monotonic() - t0
    shutil.rmtree(folder, ignore_errors=True)
    return wall


def run(plan: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the process tree, exit code, the last lines it printed)."""
    shutil.rmtree(plan.parent / "out", ignore_errors=True)
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=out, stderr=subprocess.STDOUT, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        out.seek(0)
        text = out.read()
    failed = sum(1 for line in text.splitlines() if "failed" in line and "0 failed" not in line)
    tail = "\n".join(text.splitlines()[-3:])
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), f"{failed} lines saying failed; {tail[-200:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=10_000)
    ap.add_argument("--per", type=int, default=3)
    ap.add_argument("--middle", type=int, default=3_000, help="a middle number of datasets (0: none)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", default=None, help="where plans and work dirs go (default: the temporary folder)")
    args = ap.parse_args()
    total = args.datasets * args.per
    with tempfile.TemporaryDirectory(prefix="evaltui-datasets-", dir=args.dir) as tmp:
        root = Path(tmp)
        plans = {f"{args.datasets} × {args.per}": (make_plan(root / "many", args.datasets, args.per), args.datasets),
                 f"1 × {total}": (make_plan(root / "one", 1, total), 1)}
        if args.middle:
            plans[f"{args.middle} × {args.per}"] = (make_plan(root / "middle", args.middle, args.per), args.middle)
        walls: dict[str, list[float]] = {name: [] for name in plans}
        for _ in range(args.repeat):
            for name, (plan, datasets) in plans.items():
                wall, cpu, code, said = run(plan)
                walls[name].append(wall)
                print(f"{name:>14}: wall {wall:8.1f} s  CPU {cpu:7.1f} s  {1000 * wall / datasets:8.2f} ms/dataset  exit {code}  ({said})", flush=True)
        many, one = (statistics.median(walls[n]) for n in list(plans)[:2])
        print(f"\n{list(plans)[0]} took {many / one:.2f}× the time of {list(plans)[1]} (goal: ≤ 2.00)")
        floor = file_floor(root / "floor", args.datasets)
        print(f"the files {args.datasets} datasets need (SPEC §6), written one after another on this disk: {floor:.1f} s "
              f"({1000 * floor / args.datasets:.2f} ms a dataset); 1 × {total} plus them: {(one + floor) / one:.2f}× the time of 1 × {total}; "
              f"{list(plans)[0]} took {many / (one + floor):.2f}× that")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
