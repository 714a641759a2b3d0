"""What the unit key's one home (engine/disk/units.py) costs a resume: a function call per line.

Run by hand: `python bench/unit_key.py [--n 200000] [--epochs 4]`.

A resume indexes every checkpoint line by its unit key (`LineIndex`, `index * epochs + epoch`).
Since issue 22 that key comes from `unit_key()` rather than the expression written inline in six
modules. The floor is the same loop with the expression inline; the row that matters is the
share of the whole index build the calls take.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evaltui.engine.disk.checkpoint import LineIndex, scan_checkpoint
from evaltui.engine.disk.units import unit_key


def best_of(fn: Callable[[], object], rounds: int = 7) -> float:
    """Seconds of the fastest of `rounds` calls (on a shared machine the fastest is the code's cost)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="samples (default 200,000)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs of each (default 4)")
    args = ap.parse_args()
    n, k = args.n, args.epochs
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        path = Path(tmp) / "tmp_d.jsonl"
        with open(path, "w") as f:
            for i in range(n):
                for e in range(k):
                    f.write(f'{{"index": {i}, "epoch": {e}, "prediction": "{2 * i + 7}", "gold": "{2 * i + 7}"}}\n')
        lines = list(scan_checkpoint(path))

        def inline() -> None:
            for line in lines:
                line.sample * k + line.epoch

        def called() -> None:
            for line in lines:
                unit_key(line.sample, line.epoch, k)

        index = best_of(lambda: LineIndex([path], n, epochs=k), rounds=3)
        floor, calls = best_of(inline), best_of(called)
    units = n * k
    print(f"{units:,} units ({n:,} samples × {k} epochs)")
    print(f"LineIndex build (a resume's scan)   {index * 1e9 / units:7.1f} ns a unit")
    print(f"key inline (floor)                  {floor * 1e9 / units:7.1f} ns a unit")
    print(f"key by unit_key()                   {calls * 1e9 / units:7.1f} ns a unit   {calls / floor:4.1f}× floor")
    print(f"the call's extra, of the whole build {100 * (calls - floor) / index:6.2f} %")


if __name__ == "__main__":
    main()
