"""End-to-end throughput of `evaltui --no-ui` against the simulated server, as a ratio to the floor.

    python bench/throughput.py                 # N=2000, C=64, L=50 ms (the peers' setting)
    python bench/throughput.py --n 20000 --repeat 1

The physical floor of API evaluation is N·L/C: N samples, a server latency of L, C requests in
flight. The simulator runs as its own process (the other core) and the run is a real
`evaltui PLAN --no-ui` subprocess — start-up, plan validation, inference, checkpoints, scoring,
summary files — timed from spawn to exit. Client CPU is the evaltui process's own user+system
time (the simulator's is not counted). Run by hand; the machine is noisy, so take the median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PEERS = "peers measured on this machine (N=2000, C=64, L=50 ms): lm-evaluation-harness 9 s, OpenCompass 21 s, Inspect AI 30 s"


def write_data(folder: Path, n: int) -> tuple[Path, Path]:
    data, key = folder / "data.jsonl", folder / "key.jsonl"
    with open(data, "w") as d, open(key, "w") as k:
        for i in range(n):
            q = f"Question {i}: what is {i} + {i + 7}?"
            a = f"{i} + {i + 7} = {2 * i + 7}\n#### {2 * i + 7}"
            d.write(json.dumps({"question": q, "answer": a}) + "\n")
            k.write(json.dumps({"prompt": q, "answer": a}) + "\n")
    return data, key


def write_plan(folder: Path, data: Path, url: str, c: int) -> Path:
    plan = folder / "plan.toml"
    plan.write_text(
        f"""
[run]
work_dir = "{folder / 'out'}"

[[models]]
abbr = "bench"
type = "lightllm"
url = "{url}/generate"
max_workers = {c}
generation_kwargs = {{ max_new_tokens = 64 }}

[[datasets]]
abbr = "arith"
path = "{data}"
prompt = "{{question}}"
target = "{{answer}}"
[datasets.evaluator]
type = "gsm8k"
"""
    )
    return plan


def start_sim(key: Path, latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.sim", "--port", "0", "--latency", str(latency), "--answer-key", str(key)],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split("listening on ", 1)[1].strip()


def sim_stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/sim/stats", timeout=30) as r:
        return json.loads(r.read())


def reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{url}/sim/reset", method="POST", data=b""), timeout=30).read()


# As a user runs it: bytecode caching on (some sandboxes set PYTHONDONTWRITEBYTECODE, which makes
# every start-up compile evaltui from source).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def one_run(plan: Path, url: str, n: int) -> dict:
    reset(url)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--fresh"], capture_output=True, text=True, env=ENV)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"evaltui failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    stats = sim_stats(url)
    first = min(rec["t_received"] for rec in stats["log"]) if stats["log"] else float("nan")
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "first_request": first - t0,
        "requests": stats["requests_total"],
        "max_in_flight": stats["max_in_flight"],
        "maxrss_mb": after.ru_maxrss / 1024,
    }


def raw_floor(url: str, n: int, c: int) -> float:
    """Wall time of a minimal raw-socket client (no HTTP library, no checkpoints) on the same server.

    What the simulator plus the OS allow at best; the gap to it is evaltui's own overhead.
    """
    import asyncio

    host, port = url.split("//", 1)[1].rsplit(":", 1)

    async def worker(queue: list[int]) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        while queue:
            i = queue.pop()
            body = json.dumps({"inputs": f"Question {i}: what is {i} + {i + 7}?", "parameters": {"max_new_tokens": 64}}).encode()
            writer.write(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            await reader.readexactly(length)
        writer.close()

    async def run() -> float:
        queue = list(range(n))
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(queue) for _ in range(c)))
        return time.perf_counter() - t0

    return statistics.median(asyncio.run(run()) for _ in range(3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="samples (default 2000)")
    ap.add_argument("--c", type=int, default=64, help="max_workers: requests in flight (default 64)")
    ap.add_argument("--latency", type=float, default=0.05, help="server latency in seconds (default 0.05)")
    ap.add_argument("--repeat", type=int, default=5, help="runs; the median is reported (default 5)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        data, key = write_data(folder, args.n)
        sim, url = start_sim(key, args.latency)
        try:
            plan = write_plan(folder, data, url, args.c)
            one_run(plan, url, args.n)  # warm-up: bytecode caches, page cache
            runs = [one_run(plan, url, args.n) for _ in range(args.repeat)]
            raw = raw_floor(url, args.n, args.c)
        finally:
            sim.terminate()
            sim.wait(timeout=10)

    floor = args.n * args.latency / args.c
    wall = statistics.median(r["wall"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    first = statistics.median(r["first_request"] for r in runs)
    print(f"N={args.n}  C={args.c}  L={args.latency * 1000:.0f} ms  runs={args.repeat} (median)")
    print(f"floor N·L/C      {floor:.2f} s")
    walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
    print(f"wall (end to end) {wall:.2f} s   [all: {walls}]")
    print(f"floor/wall       {floor / wall:.2f}")
    print(f"raw-socket client {raw:.2f} s on the same simulator (what server + OS allow; inference only)")
    print(f"first request    {first:.2f} s after spawn")
    print(f"client CPU       {cpu:.2f} s = {cpu / args.n * 1000:.3f} ms per request")
    print(f"server saw       {runs[-1]['requests']} requests, max in flight {runs[-1]['max_in_flight']}")
    print(f"max RSS (evaltui) {max(r['maxrss_mb'] for r in runs):.0f} MB")
    print(PEERS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
