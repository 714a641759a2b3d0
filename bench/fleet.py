"""Replicas, adaptive concurrency and token pacing, measured end to end (`evaltui --no-ui`
subprocesses against simulators in their own processes), as ratios to what should be reached.

    python bench/fleet.py adaptive   [--n 2000] [--repeat 2]   # vs fixed 64, a server refusing above 16
    python bench/fleet.py tokens     [--budget 60000] [--seconds 60] [--max-new-tokens 16]   # token rate vs budget
    python bench/fleet.py overhead   [--n 20000] [--repeat 3]  # CPU per request at 1 URL: main vs this tree
    python bench/fleet.py replicas   [--n 20000] [--c 128]     # two simulators as replicas, against the floor
    python bench/fleet.py sessions   [--n 20000] [--c 128]     # raw aiohttp: one session for 2 replicas or 2

adaptive: the server answers in L = 50 ms and refuses above 16 in flight with 429 (Retry-After:
0, so only the client's limit decides); the floor is N·L/16. Fixed 64 runs with the default
retry (4, backoff 1 s) and with retry 20; adaptive with max_workers = 64. Columns: wall, floor /
wall, requests the server saw, their 429 share (all, and after the first quarter), failed samples.
tokens: an openai-chat model with `tokens_per_minute` against a 20 ms server that reports usage;
the server's own token count over its request window, per minute, against the budget.
overhead: a 1-URL fixed model, the code of /work/main (PYTHONPATH) and of this tree alternating,
and this tree with concurrency = "adaptive"; CPU of the evaltui process per request.
replicas: one model with two simulator URLs at C = 128; floor = N·L/C.
Run by hand; the machine is noisy, so A/B runs alternate in the same minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tomli_w
import workload as w

MAIN = Path("/work/main")


def plan(folder: Path, data: Path, urls: list[str], c: int, **model: Any) -> Path:
    m: dict[str, Any] = {"abbr": w.MODEL, "type": "lightllm", "url": urls if len(urls) > 1 else urls[0], "max_workers": c,
                         "generation_kwargs": {"max_new_tokens": 16}, **model}
    p = folder / "plan.toml"
    p.write_text(tomli_w.dumps({
        "run": {"work_dir": str(folder / "out")},
        "models": [m],
        "datasets": [{"abbr": "arith", "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "exact"}}],
    }))
    return p


def run(folder: Path, p: Path, sim: w.Sim, n: int, c: int, latency: float, env: dict[str, str] | None = None) -> tuple[w.Measure, dict[str, Any]]:
    argv = [*w.EVALTUI, str(p), "--no-ui", "--fresh", "--json"]
    m, text = w.run_client("evaltui", argv, sim, n, c, latency, env=env, ok=(0, 1))
    summary = json.loads(text[text.index("{\n"):])
    return m, summary


def failed(summary: dict[str, Any]) -> int:
    return sum(p["failed"] for p in summary["pairs"])


def share_after_first_quarter(sim: w.Sim) -> float:
    with w._NO_PROXY.open(f"{sim.url}/sim/stats", timeout=60) as r:
        log = sorted(json.loads(r.read())["log"], key=lambda rec: rec["t_received"])
    later = log[len(log) // 4:]
    return sum(1 for rec in later if rec["status"] == 429) / max(1, len(later))


def adaptive(args: argparse.Namespace) -> None:
    latency, n = 0.05, args.n
    print(f"server: L = {latency * 1000:.0f} ms, refuses above 16 in flight; N = {n}; floor N·L/16 = {n * latency / 16:.2f} s")
    print(f"{'client':<24} {'wall s':>7} {'fl/wall':>7} {'fl/win':>6} {'requests':>8} {'429 %':>6} {'429 % after 1/4':>15} {'failed':>6}")
    variants = [("fixed 64, retry 4", {}), ("fixed 64, retry 20", {"retry": 20}), ("adaptive ≤64, retry 4", {"concurrency": "adaptive"})]
    with tempfile.TemporaryDirectory(prefix="evaltui-fleet-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sim = w.start_sim(key, latency, 0.0, 1, 0.8, ["--max-in-flight", "16", "--retry-after", "0"])
        try:
            for _ in range(args.repeat):
                for name, extra in variants:
                    p = plan(folder, data, [f"{sim.url}/{w.MODEL}/generate"], 64, **extra)
                    m, summary = run(folder, p, sim, n, 64, latency)
                    st = sim.stats()
                    busy = st["faults"].get("busy", 0)
                    floor = n * latency / 16
                    print(f"{name:<24} {m.wall:7.2f} {floor / m.wall:7.2f} {floor / m.window:6.2f} {st['requests_total']:>8} "
                          f"{100 * busy / st['requests_total']:6.1f} {100 * share_after_first_quarter(sim):15.1f} {failed(summary):>6}", flush=True)
        finally:
            sim.stop()


def tokens(args: argparse.Namespace) -> None:
    latency = 0.02
    per_request = 14  # about: the simulator's count of a workload question and its answer
    n = int(args.budget / per_request * args.seconds / 60)
    with tempfile.TemporaryDirectory(prefix="evaltui-fleet-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sim = w.start_sim(key, latency, 0.0, 1, 0.8)
        try:
            p = plan(folder, data, [f"{sim.url}/v1"], 32, type="openai-chat", model=w.MODEL, tokens_per_minute=float(args.budget),
                     generation_kwargs={"max_new_tokens": args.max_new_tokens})
            m, summary = run(folder, p, sim, n, 32, latency)
            st = sim.stats()
        finally:
            sim.stop()
    window = st["last_done"] - st["first_received"]
    rate = 60.0 * st["tokens"] / window
    print(f"budget {args.budget:,.0f} tokens/min, max_new_tokens {args.max_new_tokens}; N = {n}; "
          f"{st['requests_total']} requests, {st['tokens']:,} tokens in {window:.1f} s "
          f"(wall {m.wall:.1f} s): {rate:,.0f} tokens/min = {rate / args.budget:.3f} of the budget; failed {failed(summary)}")


def overhead(args: argparse.Namespace) -> None:
    latency, n, c = 0.05, args.n, 64
    env_main = dict(w.ENV, PYTHONPATH=str(MAIN))
    variants = [("main (1 url, fixed)", env_main, {}), ("this (1 url, fixed)", None, {}), ("this (1 url, adaptive)", None, {"concurrency": "adaptive"})]
    results: dict[str, list[w.Measure]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory(prefix="evaltui-fleet-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sim = w.start_sim(key, latency, 0.0, 1, 0.8)
        try:
            for _ in range(args.repeat):
                for name, env, extra in variants:
                    p = plan(folder, data, [f"{sim.url}/{w.MODEL}/generate"], c, **extra)
                    m, _ = run(folder, p, sim, n, c, latency, env=env)
                    results[name].append(m)
                    print(f"  {name:<24} wall {m.wall:6.2f} s  CPU {m.cpu_ms_per_request:.3f} ms/request  floor/window {m.floor / m.window:.2f}", flush=True)
        finally:
            sim.stop()
    for name, runs in results.items():
        cpu = [r.cpu_ms_per_request for r in runs]
        print(f"{name:<24} CPU ms/request {', '.join(f'{x:.3f}' for x in cpu)} (median {statistics.median(cpu):.3f}); "
              f"wall median {statistics.median(r.wall for r in runs):.2f} s")


def replicas(args: argparse.Namespace) -> None:
    latency, n, c = 0.05, args.n, args.c
    with tempfile.TemporaryDirectory(prefix="evaltui-fleet-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, n)
        sims = [w.start_sim(key, latency, 0.0, 1, 0.8) for _ in range(2)]
        try:
            for _ in range(args.repeat):
                sims[1].reset()
                p = plan(folder, data, [f"{s.url}/{w.MODEL}/generate" for s in sims], c)
                m, summary = run(folder, p, sims[0], n, c, latency)
                stats = [s.stats() for s in sims]
                window = max(s["last_done"] for s in stats) - min(s["first_received"] for s in stats)
                floor = n * latency / c
                print(f"N = {n}, C = {c}, two replicas: wall {m.wall:.2f} s, floor {floor:.2f} s: floor/wall {floor / m.wall:.2f}, "
                      f"floor/window {floor / window:.2f}; requests {stats[0]['requests_total']} + {stats[1]['requests_total']}; "
                      f"CPU {m.cpu_ms_per_request:.3f} ms/request; failed {failed(summary)}", flush=True)
        finally:
            for s in sims:
                s.stop()


def sessions(args: argparse.Namespace) -> None:
    """Raw aiohttp, C in flight spread over two simulators: one session for both, or one each."""
    latency, n, c = 0.05, args.n, args.c
    with tempfile.TemporaryDirectory(prefix="evaltui-fleet-") as tmp:
        data, key = w.write_data(Path(tmp), 1)
        sims = [w.start_sim(key, latency, 0.0, 1, 0.8) for _ in range(2)]
        try:
            for _ in range(args.repeat):
                for shared in (True, False):
                    cpu, wall = asyncio.run(_raw(n, c, [f"{s.url}/{w.MODEL}/generate" for s in sims], shared))
                    print(f"{'one session ' if shared else 'two sessions'}: CPU {1000 * cpu / n:.3f} ms/request, wall {wall:.2f} s "
                          f"(floor {n * latency / c:.2f})", flush=True)
        finally:
            for s in sims:
                s.stop()


async def _raw(n: int, c: int, urls: list[str], shared: bool) -> tuple[float, float]:
    import aiohttp

    body = json.dumps({"inputs": w.question(0), "parameters": {"max_new_tokens": 16}}).encode()
    headers = {"content-type": "application/json"}
    made = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c if shared else c // 2, limit_per_host=0)) for _ in range(1 if shared else 2)]
    left = iter(range(n))

    async def worker(k: int) -> None:
        session, url = made[0 if shared else k % 2], urls[k % 2]
        for _ in left:
            async with session.post(url, data=body, headers=headers) as r:
                json.loads(await r.read())

    try:
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(c)))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), time.perf_counter() - t0
    finally:
        for s in made:
            await s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("adaptive", "tokens", "overhead", "replicas", "sessions"))
    ap.add_argument("--n", type=int, default=None, help="samples (default: 2000 for adaptive, 20000 otherwise)")
    ap.add_argument("--c", type=int, default=128, help="replicas, sessions: requests in flight (default 128)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--budget", type=float, default=60_000.0, help="tokens: tokens_per_minute (default 60000)")
    ap.add_argument("--seconds", type=float, default=60.0, help="tokens: about how long the run lasts (default 60)")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="tokens: what each request is charged besides its prompt until corrected (default 16)")
    args = ap.parse_args()
    args.n = args.n or (2000 if args.what == "adaptive" else 20000)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}")
    {"adaptive": adaptive, "tokens": tokens, "overhead": overhead, "replicas": replicas, "sessions": sessions}[args.what](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
