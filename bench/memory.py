"""Memory at scale and resume time: 200,000 samples at C = 256 against a near-zero-latency server.

    python bench/memory.py                      # N=200000, C=256, latency 0
    python bench/memory.py --n 50000            # quicker look
    python bench/memory.py --log-off            # also a full run with [run] sample_log = false
    python bench/memory.py --epochs 5 --skip-full --against /work/main
                                                # 200,000 × 5 units; the resume also by another tree

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

`--epochs K` runs every sample K times (N × K units; --todo samples leave --todo × K units to
resume). `--against TREE` resumes a copy of the same primed work dir with the evaltui of TREE
(PYTHONPATH=TREE) first, then this one, so the two resumes see the same files and load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
        ok: tuple[int, ...] = (0,), sample_log: bool = True, epochs: int = 1, tree: str | None = None) -> w.Measure:
    sub = folder / work
    sub.mkdir(exist_ok=True)
    plan = w.evaltui_plan(sub, data, sim.url, c, work_dir=sub / "out")
    settings = ("" if sample_log else "sample_log = false\n") + (f"epochs = {epochs}\n" if epochs > 1 else "")
    plan.write_text(plan.read_text().replace("[run]\n", "[run]\n" + settings, 1))
    env = None if tree is None else {**w.ENV, "PYTHONPATH": tree}
    m, _ = w.run_client(tool, w.EVALTUI + [str(plan), "--no-ui"], sim, n * epochs, c, 0.0, ok=ok, env=env)
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
    ap.add_argument("--epochs", type=int, default=1, help="epochs of every sample (default 1)")
    ap.add_argument("--skip-full", action="store_true", help="no full run: only prime and resume")
    ap.add_argument("--against", metavar="TREE", help="also resume a copy of the primed work dir with the evaltui of TREE, first")
    args = ap.parse_args()
    k, units = args.epochs, args.n * args.epochs

    with tempfile.TemporaryDirectory(prefix="evaltui-mem-") as tmp:
        folder = Path(tmp)
        data, key, longest = write_data(folder, args.n, args.todo)

        full = quiet = None
        if not args.skip_full:
            sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
            try:
                full = run("full", folder, data, sim, args.n, args.c, "full", epochs=k)
                logged = log_bytes(folder / "full" / "out")
                quiet = run("no log", folder, data, sim, args.n, args.c, "nolog", sample_log=False, epochs=k) if args.log_off else None
            finally:
                sim.stop()

        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0, extra=["--max-prompt-chars", str(longest)])
        try:
            prime = run("prime", folder, data, sim, args.n, args.c, "resume", ok=(0, 1), epochs=k)
            rejected = sim.stats()["requests_total"] - (units - args.todo * k)
        finally:
            sim.stop()
        if args.against:
            (folder / "against").mkdir()
            shutil.copytree(folder / "resume" / "out", folder / "against" / "out", symlinks=True)

        resumes: list[tuple[str, w.Measure, float]] = []
        for label, work, tree in ([("resume (--against)", "against", os.path.abspath(args.against))] if args.against else []) + [("resume", "resume", None)]:
            sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
            try:
                measure = run(label, folder, data, sim, args.n, args.c, work, epochs=k, tree=tree)
            finally:
                sim.stop()
            resumes.append((label, measure, w.evaltui_accuracy(folder / work / "out")))

    print(f"N={args.n}{f' × {k} epochs' if k > 1 else ''}  C={args.c}  latency {args.latency * 1000:.0f} ms")
    if full is not None:
        print(f"full run            wall {full.wall:6.2f} s   CPU {full.cpu:6.2f} s ({full.cpu_ms_per_request:.3f} ms/request)"
              f"   peak RSS {full.maxrss_mb:5.0f} MB   requests {full.requests}  max in flight {full.max_in_flight}"
              f"   per-sample log {logged / 2**20:.0f} MB ({logged / max(units, 1):.0f} B/unit)")
    if quiet is not None:
        print(f"no sample log       wall {quiet.wall:6.2f} s   CPU {quiet.cpu:6.2f} s ({quiet.cpu_ms_per_request:.3f} ms/request)"
              f"   peak RSS {quiet.maxrss_mb:5.0f} MB")
    print(f"prime run           wall {prime.wall:6.2f} s   {units - args.todo * k} checkpointed, {rejected} requests rejected "
          f"(400) for the last {args.todo} samples   peak RSS {prime.maxrss_mb:5.0f} MB")
    for label, resume, accuracy in resumes:
        print(f"{label:<20}wall {resume.wall:6.2f} s   first request {resume.first_request:.2f} s after spawn   "
              f"CPU {resume.cpu:.2f} s   peak RSS {resume.maxrss_mb:5.0f} MB   requests {resume.requests} "
              f"(must be {args.todo * k})   accuracy {accuracy:.2f} % (must be 100)")
        if resume.requests != args.todo * k or accuracy != 100.0:
            raise SystemExit(f"{label} did the wrong work")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
