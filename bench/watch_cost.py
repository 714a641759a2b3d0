"""What following a run costs: `evaltui watch --no-ui` beside a 200,000-sample run, CPU against CPU.

    python bench/watch_cost.py                  # N=200000, C=64, latency 1 ms
    python bench/watch_cost.py --n 20000        # quicker look

1. run    — `evaltui PLAN --no-ui` against the simulator (a process of its own, not counted).
2. watch  — `evaltui watch WORK_DIR --no-ui`, started once the run has begun, following it to
            its end: its CPU (its own rusage, from wait4), per second of following, and against
            the run's own CPU.
3. floor  — the physical floor of following: reading, once, every byte the run wrote to its
            checkpoints and counting their lines (what any follower must at least do).
4. idle   — the follower over the finished work dir, one look after another: the cost of a
            look that finds nothing new (the stat loop's price), per look and per second at
            the follow interval.

Run it by hand, briefly, with nothing else running (see RESULTS.md on the host's drift).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import workload as w

from evaltui.engine.follow.follower import FOLLOW_INTERVAL, Follower, open_view


def wait_all(procs: dict[str, subprocess.Popen[str]], started: dict[str, float], timeout: float) -> dict[str, tuple[int, float, float]]:
    """name -> (exit code, wall s from its start to its exit, CPU s), by wait4 (each child's own rusage)."""
    done: dict[str, tuple[int, float, float]] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(procs):
        for name, proc in procs.items():
            if name in done:
                continue
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                done[name] = (os.waitstatus_to_exitcode(status), time.monotonic() - started[name], usage.ru_utime + usage.ru_stime)
        if time.monotonic() > deadline:
            for proc in procs.values():
                proc.kill()
            raise SystemExit(f"not finished within {timeout:.0f} s")
        time.sleep(0.01)
    return done


def floor_cpu(work: Path) -> tuple[float, int]:
    """CPU s to read every checkpoint once and count its lines; the bytes read."""
    start = time.process_time()
    total = 0
    for path in sorted((work / "predictions").rglob("tmp_*.jsonl")):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
                chunk.count(b"\n")
    return time.process_time() - start, total


def idle_looks(work: Path, looks: int) -> float:
    """CPU s per look of a follower over a finished work dir, after its first (the attach)."""
    follower = Follower(open_view(work))
    follower.look()
    start = time.process_time()
    for _ in range(looks):
        follower.look()
    return (time.process_time() - start) / looks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.001)
    ap.add_argument("--looks", type=int, default=200, help="idle looks to time (default 200)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="evaltui-watch-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, args.n)
        work = folder / "out"
        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
        try:
            plan = w.evaltui_plan(folder, data, sim.url, args.c, work_dir=work)
            started = {"run": time.monotonic()}
            log = open(folder / "run.log", "w")
            procs = {"run": subprocess.Popen(w.EVALTUI + [str(plan), "--no-ui"], stdout=log, stderr=subprocess.STDOUT, text=True, env=w.ENV)}
            while not (work / "plan.toml").exists():  # the run has begun: follow it from here
                time.sleep(0.01)
            started["watch"] = time.monotonic()
            watch = w.EVALTUI + ["watch", str(work), "--no-ui"]
            procs["watch"] = subprocess.Popen(watch, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True, env=w.ENV)
            ended = wait_all(procs, started, 3600)
        finally:
            sim.stop()
        (run_code, run_wall, run_cpu), (watch_code, watch_wall, watch_cpu) = ended["run"], ended["watch"]
        if run_code != 0 or watch_code != 0:
            raise SystemExit(f"exit codes: run {run_code}, watch {watch_code}\n{(folder / 'run.log').read_text()[-2000:]}")
        floor, read = floor_cpu(work)
        per_look = idle_looks(work, args.looks)
        pairs = sum(1 for _ in (work / "infer_status").rglob("*.json"))

    print(f"N={args.n} C={args.c} latency={args.latency * 1000:.0f} ms, {read / 1e6:.1f} MB of checkpoints, {pairs} status files; "
          f"python {sys.version.split()[0]}, maxrss of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"run:    wall {run_wall:7.2f} s   CPU {run_cpu:7.2f} s")
    print(f"watch:  wall {watch_wall:7.2f} s   CPU {watch_cpu:7.3f} s   = {watch_cpu / watch_wall:.4f} CPU s per second of following, "
          f"{100 * watch_cpu / run_cpu:.2f} % of the run's CPU")
    print(f"floor:  {floor:.3f} CPU s to read {read / 1e6:.1f} MB once and count its lines: watch / floor = {watch_cpu / max(floor, 1e-9):.1f}")
    print(f"idle:   {per_look * 1e6:.0f} µs CPU per look over the finished dir = "
          f"{per_look / FOLLOW_INTERVAL:.5f} CPU s per second at one look every {FOLLOW_INTERVAL} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
