"""End-to-end throughput of `evaltui --no-ui` against the simulated server, as ratios to the floor.

    python bench/throughput.py                          # N=2000, C=64, L=50 ms (the peers' setting)
    python bench/throughput.py --n 20000 --repeat 1
    python bench/throughput.py --sweep                  # C in {16, 64, 256} x N in {2000, 20000}
    python bench/throughput.py --latency 0.04 --jitter 0.02 --seed 1   # 50 ms +- 20 %
    python bench/throughput.py --base /work/wt/old     # also another checkout, interleaved run by run

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

First, start-up on its own: a 1-sample plan, spawn to first request, and that whole run's CPU
(which bounds the CPU spent before the first request; on a loaded machine the wall figure
mostly measures the wait for a core). Run by hand; the machine is noisy, so each cell is the
median of --repeat runs. With `--base DIR`, each run of this tree is followed by one of DIR's
(PYTHONPATH: the code before a change), alternating which goes first, and a `base` row and the
ratios this/base follow: load drift on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import tempfile
from pathlib import Path

import workload as w


def median_measure(runs: list[w.Measure]) -> w.Measure:
    """The run with the median wall time; CPU and RSS medians over all runs (the runs left as measured)."""
    mid = sorted(runs, key=lambda m: m.wall)[len(runs) // 2]
    return dataclasses.replace(mid, cpu=statistics.median(m.cpu for m in runs), maxrss_mb=max(m.maxrss_mb for m in runs))


def measure(n: int, c: int, args: argparse.Namespace) -> dict[str, tuple[w.Measure, list[w.Measure]]]:
    """The runs of this tree (and, with --base, of the base's, interleaved), by tree."""
    trees = ["this", "base"] if args.base else ["this"]
    seen: dict[str, list[w.Measure]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sim = w.start_sim(key, args.latency, args.jitter, args.seed, args.accuracy)
        try:
            mean_latency = args.latency + args.jitter / 2
            for i in range(args.repeat):
                for name in (trees if i % 2 == 0 else trees[::-1]):
                    env = base_env(args) if name == "base" else None
                    seen[name].append(w.run_evaltui(folder, data, sim, n, c, mean_latency, env=env))
        finally:
            sim.stop()
    truth = w.ground_truth(n, args.accuracy)
    for r in (r for runs in seen.values() for r in runs):
        if abs((r.accuracy or 0) - truth) > 0.01 or r.requests != n:
            raise SystemExit(f"wrong run: accuracy {r.accuracy} (truth {truth:.2f}), {r.requests} requests for {n}")
    return {name: (median_measure(runs), runs) for name, runs in seen.items()}


def base_env(args: argparse.Namespace) -> dict[str, str]:
    return {**w.ENV, "PYTHONPATH": str(args.base.resolve())}


def imported_from(env: dict[str, str]) -> str:
    """Where a run with this environment imports evaltui from (run from an empty folder, as the runs are)."""
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        code = "import evaltui, os; print(os.path.dirname(evaltui.__file__))"
        return subprocess.run([*w.EVALTUI[:1], "-c", code], cwd=tmp, env=env, capture_output=True, text=True, check=True).stdout.strip()


def startup(args: argparse.Namespace) -> list[w.Measure]:
    """Runs of a 1-sample plan: their whole CPU bounds the CPU spent before the first request.

    Also the warm-up of everything after it (bytecode and page caches), the base's too."""
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, 1)
        sim = w.start_sim(key, 0.0, 0.0, args.seed, args.accuracy)
        try:
            w.run_evaltui(folder, data, sim, 1, 1, 0.0)
            if args.base:
                w.run_evaltui(folder, data, sim, 1, 1, 0.0, env=base_env(args))
            return [w.run_evaltui(folder, data, sim, 1, 1, 0.0) for _ in range(max(args.repeat, 5))]
        finally:
            sim.stop()


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
    ap.add_argument("--base", type=Path, help="another checkout (the code before a change), run with PYTHONPATH, interleaved")
    args = ap.parse_args()

    cells = [(n, c) for n in (2000, 20000) for c in (16, 64, 256)] if args.sweep else [(args.n, args.c)]
    print(f"L={args.latency * 1000:.0f} ms + jitter [0, {args.jitter * 1000:.0f}] ms, seed {args.seed}, "
          f"accuracy {args.accuracy}; median of {args.repeat} runs per row (wall-median run; CPU median; RSS max)")
    if args.base:
        here, there = imported_from(w.ENV), imported_from(base_env(args))
        if here == there:
            raise SystemExit(f"--base {args.base}: its runs would import evaltui from {there}, as this tree's do")
        print(f"this: {here}; base: {there}")
    starts = startup(args)
    first = statistics.median(m.first_request for m in starts)
    cpu = statistics.median(m.cpu for m in starts)
    print(f"start-up (N=1 plan, median of {len(starts)}): first request {first:.3f} s after spawn; "
          f"whole-run CPU {cpu:.3f} s (an upper bound of the CPU before the first request); "
          f"peak RSS {max(m.maxrss_mb for m in starts):.0f} MB")
    print(w.HEADER)
    for n, c in cells:
        measured = measure(n, c, args)
        for name, (m, runs) in measured.items():
            label = f"{name:<5}" if args.base else ""
            print(label + w.row(m) + "   walls: " + ", ".join(f"{r.wall:.2f}" for r in runs)
                  + "   1st req: " + ", ".join(f"{r.first_request:.2f}" for r in runs)
                  + "   CPU s/1k: " + ", ".join(f"{r.cpu_ms_per_request:.3f}" for r in runs), flush=True)
        if args.base:
            (this, _), (base, _) = measured["this"], measured["base"]
            first = [statistics.median(r.first_request for r in measured[t][1]) for t in ("this", "base")]
            print(f"this/base: wall {this.wall / base.wall:.3f}, CPU {this.cpu / base.cpu:.3f}, 1st req {first[0] / first[1]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
