"""What knowing a data file by its contents costs a run: hashing it, once per run.

Run by hand: `python bench/fingerprint.py [--mb 512]`.

A pair's version includes the sha256 of its data file's bytes, so the same file named another
way keeps its work. The floor is reading the file's bytes in the same 1 MiB chunks without
hashing them (page cache warm, as it is right after the plan check read every record); the
ratio says how far above that the first fingerprint is. Every later fingerprint of the same
(path, size, mtime) in the run - one per model - comes from the cache.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from evaltui import datasets
from evaltui.plan import DatasetConfig, EvaluatorConfig, Plan, RunConfig


def read_floor(path: Path) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=512, help="size of the data file in MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        line = b'{"question": "' + b"x" * 1000 + b'", "answer": "#### 1"}\n'
        with open(path, "wb") as f:
            for _ in range(args.mb * (1 << 20) // len(line)):
                f.write(line)
        ds = DatasetConfig(abbr="big", path=str(path), prompt="{question}", target="{answer}", evaluator=EvaluatorConfig(type="gsm8k"))
        plan = Plan.model_construct(source=Path(tmp) / "plan.toml", run=RunConfig(), models=[], datasets=[ds])  # no check: it would parse every record
        size = os.path.getsize(path) / (1 << 20)
        floor = read_floor(path)
        datasets.kept._FINGERPRINTS.clear()
        t = time.perf_counter()
        datasets.file_fingerprint(plan, ds)
        first = time.perf_counter() - t
        t = time.perf_counter()
        datasets.file_fingerprint(plan, ds)
        cached = time.perf_counter() - t
    print(f"file: {size:.0f} MiB")
    print(f"read floor:          {floor:.3f} s ({size / floor:.0f} MiB/s)")
    print(f"first fingerprint:   {first:.3f} s ({size / first:.0f} MiB/s)  {first / floor:.2f}x the floor")
    print(f"cached fingerprint:  {cached * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
