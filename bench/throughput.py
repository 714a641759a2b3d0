"""End-to-end throughput of `evaltui --no-ui` against the simulated server, as ratios to the floor.

    python bench/throughput.py                          # N=2000, C=64, L=50 ms (the peers' setting)
    python bench/throughput.py --n 20000 --repeat 1
    python bench/throughput.py --sweep                  # C in {16, 64, 256} x N in {2000, 20000}
    python bench/throughput.py --latency 0.04 --jitter 0.02 --seed 1   # 50 ms +- 20 %

The physical floor of API evaluation is N·L/C: N samples, a mean server latency of L (latency +
jitter/2), C requests in flight. The simulator runs as its own process and each run is a real
`evaltui PLAN --no-ui --fresh` subprocess — start-up, plan validation, inference, checkpoints,
scoring, summary files — timed from spawn to exit. Columns:

  floor/wall    end to end against the floor;
  1st req       spawn to the first request the server saw (start-up);
  window        first request received to last reply done, at the server; floor/window is how
                well the client keeps C requests in flight;
  CPU s/1k      the evaltui process's own user+sys seconds per 1,000 requests (wait4 rusage;
                the simulator's CPU is not counted) — the figure that least depends on a noisy box;
  RSS MB        evaltui's peak resident set.

Run by hand; the machine is noisy, so each cell is the median of --repeat runs (and a warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import workload as w


def median_measure(runs: list[w.Measure]) -> w.Measure:
    """The run with the median wall time; CPU and RSS medians over all runs."""
    mid = sorted(runs, key=lambda m: m.wall)[len(runs) // 2]
    mid.cpu = statistics.median(m.cpu for m in runs)
    mid.maxrss_mb = max(m.maxrss_mb for m in runs)
    return mid


def measure(n: int, c: int, args: argparse.Namespace) -> tuple[w.Measure, list[w.Measure]]:
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sim = w.start_sim(key, args.latency, args.jitter, args.seed, args.accuracy)
        try:
            mean_latency = args.latency + args.jitter / 2
            w.run_evaltui(folder, data, sim, n, c, mean_latency)  # warm-up: bytecode and page caches
            runs = [w.run_evaltui(folder, data, sim, n, c, mean_latency) for _ in range(args.repeat)]
        finally:
            sim.stop()
    truth = w.ground_truth(n, args.accuracy)
    for r in runs:
        if abs((r.accuracy or 0) - truth) > 0.01 or r.requests != n:
            raise SystemExit(f"wrong run: accuracy {r.accuracy} (truth {truth:.2f}), {r.requests} requests for {n}")
    return median_measure(runs), runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="samples (default 2000)")
    ap.add_argument("--c", type=int, default=64, help="max_workers: requests in flight (default 64)")
    ap.add_argument("--latency", type=float, default=0.05, help="server latency in seconds (default 0.05)")
    ap.add_argument("--jitter", type=float, default=0.0, help="extra uniform delay in [0, J] s (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed (jitter dice; default 0)")
    ap.add_argument("--accuracy", type=float, default=0.8, help="fraction the simulator answers right (default 0.8)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell; the median is reported (default 5)")
    ap.add_argument("--sweep", action="store_true", help="C in {16, 64, 256} x N in {2000, 20000}")
    args = ap.parse_args()

    cells = [(n, c) for n in (2000, 20000) for c in (16, 64, 256)] if args.sweep else [(args.n, args.c)]
    print(f"L={args.latency * 1000:.0f} ms + jitter [0, {args.jitter * 1000:.0f}] ms, seed {args.seed}, "
          f"accuracy {args.accuracy}; median of {args.repeat} runs per row (wall-median run; CPU median; RSS max)")
    print(w.HEADER)
    for n, c in cells:
        m, runs = measure(n, c, args)
        print(w.row(m) + "   walls: " + ", ".join(f"{r.wall:.2f}" for r in runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
