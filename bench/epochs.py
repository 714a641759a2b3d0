"""Epochs cost no more per request than samples: N samples × K epochs against N·K samples × 1.

    python bench/epochs.py                        # N=1000, K=4, C=64, L=20 ms, 3 rounds
    python bench/epochs.py --main /work/main      # also the code before epochs, interleaved
    python bench/epochs.py --main /work/main --no-log   # this tree without its per-sample log

Three `evaltui PLAN --no-ui --fresh` runs per round against one simulator, interleaved so load
drift on a shared machine hits them alike, each sending the same N·K requests:

  samples   this tree, N·K samples × 1 epoch
  epochs    this tree, N samples × K epochs (the simulator sees each prompt K times)
  main      --main's tree (PYTHONPATH), N·K samples × 1 epoch: the code before epochs existed

The floor is N·K·L/C. Reported per tool: the median over rounds of wall, floor/wall and the
evaltui process's CPU ms per request (its own rusage, not the simulator's), and the ratio of
each to `samples`. The figure that matters is CPU per request: epochs must not raise it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import workload as w


def write_epochs_data(folder: Path, n: int) -> Path:
    """The first n questions of the workload: the epochs runs send each of them K times."""
    data = folder / "epochs.jsonl"
    with open(data, "w") as d:
        for i in range(n):
            d.write(json.dumps({"question": w.question(i), "answer": w.answer(i)}) + "\n")
    return data


def plan_for(folder: Path, name: str, data: Path, url: str, c: int, epochs: int, sample_log: bool) -> Path:
    sub = folder / name
    sub.mkdir(exist_ok=True)
    plan = w.evaltui_plan(sub, data, url, c, work_dir=sub / "out")
    text = plan.read_text()
    if epochs > 1:
        text = text.replace("[datasets.evaluator]", f"epochs = {epochs}\n[datasets.evaluator]")
    if not sample_log and name != "main":  # the code before has no such key
        text = text.replace("[run]\n", "[run]\nsample_log = false\n", 1)
    plan.write_text(text)
    return plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="samples of the epochs runs (default 1000)")
    ap.add_argument("--k", type=int, default=4, help="epochs (default 4)")
    ap.add_argument("--c", type=int, default=64, help="max_workers (default 64)")
    ap.add_argument("--latency", type=float, default=0.02, help="server latency, s (default 0.02)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--main", type=Path, help="a checkout of the code before epochs, run with PYTHONPATH")
    ap.add_argument("--no-log", action="store_true", help="this tree's runs with [run] sample_log = false")
    args = ap.parse_args()
    units = args.n * args.k

    with tempfile.TemporaryDirectory(prefix="evaltui-epochs-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, units)
        small = write_epochs_data(folder, args.n)
        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
        tools = {"samples": (data, 1, None), "epochs": (small, args.k, None)}
        if args.main:
            tools["main"] = (data, 1, str(args.main.resolve()))
        seen: dict[str, list[w.Measure]] = {name: [] for name in tools}
        try:
            for _ in range(args.rounds):
                for name, (path, epochs, pythonpath) in tools.items():
                    plan = plan_for(folder, name, path, sim.url, args.c, epochs, not args.no_log)
                    env = {**w.ENV, "PYTHONPATH": pythonpath} if pythonpath else None
                    m, _ = w.run_client(name, w.EVALTUI + [str(plan), "--no-ui", "--fresh"], sim, units, args.c, args.latency, env=env)
                    if m.requests != units or w.evaltui_accuracy(folder / name / "out") != 100.0:
                        raise SystemExit(f"{name}: {m.requests} requests for {units}, or a wrong score")
                    seen[name].append(m)
        finally:
            sim.stop()

    floor = units * args.latency / args.c
    base = statistics.median(m.cpu_ms_per_request for m in seen["samples"])
    print(f"N={args.n} × K={args.k} = {units} requests, C={args.c}, L={args.latency * 1000:.0f} ms, floor {floor:.2f} s; "
          f"median of {args.rounds} interleaved rounds; per-sample log {'off' if args.no_log else 'on'} in this tree")
    print(f"{'tool':<8} {'wall s':>7} {'floor/wall':>10} {'CPU ms/req':>10} {'vs samples':>10}")
    for name, runs in seen.items():
        wall = statistics.median(m.wall for m in runs)
        cpu = statistics.median(m.cpu_ms_per_request for m in runs)
        print(f"{name:<8} {wall:7.2f} {floor / wall:10.2f} {cpu:10.3f} {cpu / base:10.2f}   (CPU ms/req per round: "
              + ", ".join(f"{m.cpu_ms_per_request:.3f}" for m in runs) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
