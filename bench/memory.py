"""Memory at scale and resume time: 200,000 samples at C = 256 against a near-zero-latency server.

    python bench/memory.py                      # N=200000, C=256, latency 0
    python bench/memory.py --n 50000            # quicker look
    python bench/memory.py --log-off            # also a full run with [run] sample_log = false

Three `evaltui PLAN --no-ui` subprocesses on the same data (four with --log-off):

1. full   — a fresh run of all N samples, the per-sample log on (the default): peak RSS (the
            evaltui process's VmHWM, see workload.tree_peak_rss_kb), wall and CPU. Memory must
            follow concurrency, not dataset size; the log must stay under 150 MB at N = 200,000.
   no log — (--log-off) the same with sample_log = false: what the log costs.
2. prime  — a fresh run into another work dir against a simulator that rejects (HTTP 400, not
            retried) the last --todo prompts, which are padded to be longer than --max-prompt-chars:
            it leaves N - todo answers checkpointed and --todo failed samples (exit code 1).
3. resume — a plain re-run of (2) against a simulator that answers everything: it must send
            exactly --todo requests. Its wall time (spawn to exit: reading the checkpoint,
            planning, the remaining requests, merging N predictions, scoring, summary) is the
            time to resume.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import workload as w

PAD = " Take your time."


def write_data(folder: Path, n: int, todo: int) -> tuple[Path, Path, int]:
    """The workload with the last `todo` prompts padded; returns (data, key, longest unpadded prompt)."""
    data, key = folder / "data.jsonl", folder / "key.jsonl"
    longest = 0
    with open(data, "w") as d, open(key, "w") as k:
        for i in range(n):
            q, a = w.question(i), w.answer(i)
            if i >= n - todo:
                q += PAD
            else:
                longest = max(longest, len(q))
            d.write(json.dumps({"question": q, "answer": a}) + "\n")
            k.write(json.dumps({"prompt": q, "answer": a}) + "\n")
    return data, key, longest


def run(tool: str, folder: Path, data: Path, sim: w.Sim, n: int, c: int, work: str,
        ok: tuple[int, ...] = (0,), sample_log: bool = True) -> w.Measure:
    sub = folder / work
    sub.mkdir(exist_ok=True)
    plan = w.evaltui_plan(sub, data, sim.url, c, work_dir=sub / "out")
    if not sample_log:
        plan.write_text(plan.read_text().replace("[run]\n", "[run]\nsample_log = false\n", 1))
    m, _ = w.run_client(tool, w.EVALTUI + [str(plan), "--no-ui"], sim, n, c, 0.0, ok=ok)
    return m


def log_bytes(work_dir: Path) -> int:
    return sum(p.stat().st_size for p in (work_dir / "logs" / "samples").rglob("*.jsonl"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--c", type=int, default=256)
    ap.add_argument("--todo", type=int, default=1000, help="samples left to do at resume (default 1000)")
    ap.add_argument("--latency", type=float, default=0.001, help="seconds (default 0.001: near zero, but the server still holds C requests)")
    ap.add_argument("--log-off", action="store_true", help="also a full run without the per-sample log")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="evaltui-mem-") as tmp:
        folder = Path(tmp)
        data, key, longest = write_data(folder, args.n, args.todo)

        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
        try:
            full = run("full", folder, data, sim, args.n, args.c, "full")
            logged = log_bytes(folder / "full" / "out")
            quiet = run("no log", folder, data, sim, args.n, args.c, "nolog", sample_log=False) if args.log_off else None
        finally:
            sim.stop()

        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0, extra=["--max-prompt-chars", str(longest)])
        try:
            prime = run("prime", folder, data, sim, args.n, args.c, "resume", ok=(0, 1))
            rejected = sim.stats()["requests_total"] - (args.n - args.todo)
        finally:
            sim.stop()

        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
        try:
            resume = run("resume", folder, data, sim, args.n, args.c, "resume")
        finally:
            sim.stop()
        accuracy = w.evaltui_accuracy(folder / "resume" / "out")

    print(f"N={args.n}  C={args.c}  latency {args.latency * 1000:.0f} ms")
    print(f"full run         wall {full.wall:6.2f} s   CPU {full.cpu:6.2f} s ({full.cpu_ms_per_request:.3f} ms/request)"
          f"   peak RSS {full.maxrss_mb:5.0f} MB   requests {full.requests}  max in flight {full.max_in_flight}"
          f"   per-sample log {logged / 2**20:.0f} MB ({logged / max(args.n, 1):.0f} B/sample)")
    if quiet is not None:
        print(f"no sample log    wall {quiet.wall:6.2f} s   CPU {quiet.cpu:6.2f} s ({quiet.cpu_ms_per_request:.3f} ms/request)"
              f"   peak RSS {quiet.maxrss_mb:5.0f} MB")
    print(f"prime run        wall {prime.wall:6.2f} s   {args.n - args.todo} checkpointed, {rejected} requests rejected "
          f"(400) for the last {args.todo} samples   peak RSS {prime.maxrss_mb:5.0f} MB")
    print(f"resume           wall {resume.wall:6.2f} s   first request {resume.first_request:.2f} s after spawn   "
          f"CPU {resume.cpu:.2f} s   peak RSS {resume.maxrss_mb:5.0f} MB   requests {resume.requests} "
          f"(must be {args.todo})   accuracy {accuracy:.2f} % (must be 100)")
    if resume.requests != args.todo or accuracy != 100.0:
        raise SystemExit("resume did the wrong work")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
