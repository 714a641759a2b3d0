"""What one code_exec sample costs, as a ratio to the floor: starting a bare interpreter.

    python bench/sandbox.py                 # 30 samples, 3 rounds
    PYTHONPATH=/work/main python bench/sandbox.py   # the same against another checkout

The floor of running model code in a fresh interpreter is the interpreter's own start-up
(`python -I -B -c pass`, spawned from this process). A sample costs that plus the sandbox: the
keeper and program forks, the namespaces and mounts, Landlock, the limits (its children's CPU),
and in this process the cgroup, the watch and the verdict (evaltui's CPU). CPU is measured with
getrusage, which a loaded machine changes least; wall time is the median over the samples.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from evaltui.scoring.code.sandbox import PASSED, run_program

PROGRAM = "def inc(x):\n    return x + 1\nassert inc(1) == 2\n"


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def measure(run: object, n: int) -> tuple[float, float, float]:
    """(children's CPU, this process's CPU, median wall) per call, in ms."""
    walls = []
    c0, s0 = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
    for _ in range(n):
        t = time.perf_counter()
        run()  # type: ignore[operator]
        walls.append(time.perf_counter() - t)
    c1, s1 = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
    return (c1 - c0) / n * 1e3, (s1 - s0) / n * 1e3, statistics.median(walls) * 1e3


def bare() -> None:
    subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True)


def sample() -> None:
    assert run_program(PROGRAM) == PASSED


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sample()  # warm: imports, the first cgroup
    print(f"{'round':>5}  {'floor ms':>8}  {'sample ms':>9}  {'evaltui ms':>10}  {'ratio':>5}  {'wall ms':>7}")
    for r in range(args.rounds):
        floor, _, _ = measure(bare, args.n)
        child, own, wall = measure(sample, args.n)
        print(f"{r + 1:>5}  {floor:8.1f}  {child:9.1f}  {own:10.1f}  {(child + own) / floor:5.2f}  {wall:7.0f}")


if __name__ == "__main__":
    main()
