"""Per-request throughput of conversations against single prompts, interleaved, as ratios.

    python bench/conversations.py                    # N=2000 requests, C=64, L=50 ms, 5 runs each
    python bench/conversations.py --n 4000 --turns 4 --repeat 3

Issue 25: a conversation's requests go one after the other, each checkpointed (its turn line on
disk before the next is sent), and the per-request path must not be slower than the single-turn
one. Both runs send N requests to the simulator (its own process) through openai-chat with C
workers: `single` N one-prompt samples, `turns` N/T samples of T user turns. The physical floor is
the same for both, N·L/C: a conversation holds its worker for T requests in a row, so C requests
are still in flight. Each run is a real `evaltui PLAN --no-ui --fresh` subprocess, the two kinds
alternating run by run (which goes first too), so the machine's drift hits both alike. Columns
as bench/throughput.py's; then turns/single for the median wall and CPU per 1,000 requests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import workload as w


def write(folder: Path, n: int, turns: int) -> tuple[Path, Path, Path]:
    """(single-prompt data, conversation data, the simulator's answer key): N questions either way."""
    single, talks, key = folder / "single.jsonl", folder / "turns.jsonl", folder / "key.jsonl"
    with open(single, "w") as s, open(key, "w") as k:
        for i in range(n):
            s.write(json.dumps({"question": w.question(i), "answer": w.answer(i)}) + "\n")
            k.write(json.dumps({"prompt": w.question(i), "answer": w.answer(i)}) + "\n")
    with open(talks, "w") as t:
        for j in range(n // turns):
            asked = [w.question(j * turns + k) for k in range(turns)]
            t.write(json.dumps({"turns": asked, "answer": w.answer(j * turns + turns - 1)}) + "\n")
    return single, talks, key


def plan(folder: Path, kind: str, data: Path, url: str, c: int) -> Path:
    asks = 'turns = "turns"' if kind == "turns" else 'prompt = "{question}"'
    path = folder / f"{kind}.toml"
    path.write_text(f"""
[run]
work_dir = "{folder / ('out-' + kind)}"

[[models]]
abbr = "{w.MODEL}"
type = "openai-chat"
url = "{url}/{w.MODEL}/v1"
model = "{w.MODEL}"
max_workers = {c}
generation_kwargs = {{ max_new_tokens = 16 }}

[[datasets]]
abbr = "arith"
path = "{data}"
{asks}
target = "{{answer}}"
[datasets.evaluator]
type = "exact"
""")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="requests per run (default 2000)")
    ap.add_argument("--turns", type=int, default=2, help="user turns per conversation (default 2)")
    ap.add_argument("--c", type=int, default=64, help="max_workers (default 64)")
    ap.add_argument("--latency", type=float, default=0.05, help="server latency in seconds (default 0.05)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kind; medians reported (default 5)")
    args = ap.parse_args()
    n = args.n - args.n % args.turns
    seen: dict[str, list[w.Measure]] = {"single": [], "turns": []}
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        single, talks, key = write(folder, n, args.turns)
        sim = w.start_sim(key, args.latency, 0.0, 0, 1.0)
        try:
            plans = {"single": plan(folder, "single", single, sim.url, args.c), "turns": plan(folder, "turns", talks, sim.url, args.c)}
            w.run_client("warm-up", [*w.EVALTUI, str(plans["single"]), "--no-ui", "--fresh"], sim, n, args.c, args.latency)
            for i in range(args.repeat):
                for kind in ("single", "turns") if i % 2 == 0 else ("turns", "single"):
                    m, _ = w.run_client(kind, [*w.EVALTUI, str(plans[kind]), "--no-ui", "--fresh"], sim, n, args.c, args.latency)
                    if m.requests != n:
                        raise SystemExit(f"{kind}: {m.requests} requests for {n}")
                    m.accuracy = float(json.loads((folder / f"out-{kind}" / "results" / w.MODEL / "arith.json").read_text())["accuracy"])
                    seen[kind].append(m)
        finally:
            sim.stop()
    print(f"N={n} requests, C={args.c}, L={args.latency * 1000:.0f} ms, {args.turns} turns a conversation; {args.repeat} runs of each, interleaved")
    print(w.HEADER)
    for runs in seen.values():
        mid = sorted(runs, key=lambda m: m.wall)[len(runs) // 2]
        print(w.row(mid) + "   walls: " + ", ".join(f"{r.wall:.2f}" for r in runs))
    wall = {k: statistics.median(r.wall for r in runs) for k, runs in seen.items()}
    cpu = {k: statistics.median(r.cpu for r in runs) for k, runs in seen.items()}
    print(f"turns/single: wall {wall['turns'] / wall['single']:.3f}, CPU {cpu['turns'] / cpu['single']:.3f} (per request: both sent {n})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
