"""Adaptive concurrency against a server that serves K requests at a time (issue 23): does the
adaptive limit find the knee? `evaltui --no-ui` subprocesses against the simulator in its own
process playing llama.cpp with K slots (`serve-sim --serve-at-once K`: K requests worked on at
once, the rest waiting in line).

    python bench/adaptive.py [--n 2000] [--latency 0.032] [--jitter 0.016] [--k 1 8] [--repeat 1] [--main]

For each K: fixed max_workers settings (1, 2, 4, K, K+1, 2K, 16, 64) and `concurrency =
"adaptive"` (max_workers = 64), interleaved, `--repeat` rounds; with `--main`, main's adaptive
too (PYTHONPATH=/work/main). Throughput is the server's (requests over its window, first
received to last done), latency the server's (received to done: the wait in line included),
p50 over every request. The best fixed setting is the fastest, and among the settings within
2 % of it the one with the lowest p50 (the knee). Goal: adaptive within 10 % of its throughput,
its p50 at most 2× the best's. Run by hand; the machine is noisy, so the rounds interleave.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import tomli_w
import workload as w

MAIN = Path("/work/main")


def plan(folder: Path, data: Path, url: str, **model: Any) -> Path:
    m = {"abbr": w.MODEL, "type": "lightllm", "url": url, "generation_kwargs": {"max_new_tokens": 16}, **model}
    p = folder / "plan.toml"
    p.write_text(tomli_w.dumps({
        "run": {"work_dir": str(folder / "out")},
        "models": [m],
        "datasets": [{"abbr": "arith", "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "exact"}}],
    }))
    return p


def server_view(sim: w.Sim) -> tuple[float, float, int]:
    """(requests per second over the server's window, p50 latency at the server in s, requests)."""
    with w._NO_PROXY.open(f"{sim.url}/sim/stats", timeout=60) as r:
        st = json.loads(r.read())
    log = [rec for rec in st["log"] if rec["status"] == 200]
    window = st["last_done"] - st["first_received"]
    return len(log) / window, statistics.median(rec["t_done"] - rec["t_received"] for rec in log), st["requests_total"]


def one_k(k: int, args: argparse.Namespace, folder: Path, data: Path, key: Path) -> None:
    settings: list[tuple[str, dict[str, Any], dict[str, str] | None]] = [
        (f"fixed {c}", {"max_workers": c}, None) for c in sorted({1, 2, 4, k, k + 1, 2 * k, 16, 64})
    ]
    settings.append(("adaptive ≤64", {"max_workers": 64, "concurrency": "adaptive"}, None))
    if args.main:
        settings.append(("adaptive ≤64 (main)", {"max_workers": 64, "concurrency": "adaptive"}, dict(w.ENV, PYTHONPATH=str(MAIN))))
    floor = args.n * args.latency / k
    print(f"\nK = {k}: the server works on {k} at a time, {args.latency * 1000:.0f} ms ± {args.jitter * 1000:.0f} ms each; "
          f"N = {args.n}; floor N·L/K = {floor:.1f} s")
    sim = w.start_sim(key, args.latency - args.jitter, 2 * args.jitter, 1, 0.8, ["--serve-at-once", str(k)])
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in settings}
    try:
        for _ in range(args.repeat):
            for name, model, env in settings:
                c = model["max_workers"]
                m, _ = w.run_client("evaltui", [*w.EVALTUI, str(plan(folder, data, f"{sim.url}/{w.MODEL}/generate", **model)), "--no-ui", "--fresh"],
                                    sim, args.n, c, args.latency, env=env, ok=(0, 1))
                rate, p50, requests = server_view(sim)
                seen[name].append((rate, p50))
                print(f"  {name:<22} wall {m.wall:6.2f} s  {rate:7.1f} req/s  p50 {p50 * 1000:7.1f} ms  requests {requests}", flush=True)
    finally:
        sim.stop()
    med = {name: (statistics.median(r for r, _ in runs), statistics.median(p for _, p in runs)) for name, runs in seen.items()}
    fixed = {name: v for name, v in med.items() if name.startswith("fixed")}
    fastest = max(rate for rate, _ in fixed.values())
    best = min((v for v in fixed.values() if v[0] >= 0.98 * fastest), key=lambda v: v[1])
    best_name = next(name for name, v in fixed.items() if v == best)
    print(f"  best fixed: {best_name} ({best[0]:.1f} req/s, p50 {best[1] * 1000:.1f} ms); fastest fixed {fastest:.1f} req/s")
    for name in (n for n in med if n.startswith("adaptive")):
        rate, p50 = med[name]
        ok = rate >= 0.9 * best[0] and p50 <= 2 * best[1]
        verdict = "meets" if ok else "MISSES"
        print(f"  {name:<22} throughput {rate / best[0]:.2f} of the best fixed, p50 {p50 / best[1]:.2f}× its: {verdict} the goal (≥ 0.90, ≤ 2.00)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.032, help="mean service time of one request, s (default 0.032)")
    ap.add_argument("--jitter", type=float, default=0.016, help="± this around it, uniform (default 0.016)")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--main", action="store_true", help="also main's adaptive (PYTHONPATH=/work/main)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="evaltui-adaptive-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, args.n)
        for k in args.k:
            one_k(k, args, folder, data, key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
