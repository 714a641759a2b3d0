"""Does the interactive session slow the engine? Same plan, headless vs under the Textual app.

Run by hand: `python bench/ui_overhead.py [--samples 20000] [--workers 64] [--rounds 3] [--datasets 1]`; with
`--synthetic 3000`, the app's own main-thread CPU at 3,000 samples/s of a scripted stream instead.

One `sim://` model at zero latency (the bundled simulator, its own process): the engine is then
the bottleneck, which is where a UI that takes CPU from it would show. Each round runs the plan
twice in fresh work dirs, interleaved so the machine's drift hits both alike: once headless (the
`--no-ui` renderer, output thrown away) and once under the app (`EvalApp.run(headless=True)`:
the real app, its 0.2 s repaint timer and all, without a terminal). Throughput is samples per
second from the first answer to the last, so simulator start-up and scoring are not in it. The
ratio app/headless is printed per round, then the median; the goal is >= 0.95. The app thread's
CPU time per sample is printed too: on a busy machine it is steadier than the ratio, and it is
what the UI takes from the engine (both share one interpreter lock).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tomli_w

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.headless import run_headless
from evaltui.plan import load_plan


class Stopwatch:
    """A sink that notes when the first and the last sample finished: nothing else, so it costs
    both sides the same."""

    def __init__(self) -> None:
        self.first = self.last = 0.0
        self.count = 0

    def __call__(self, e: ev.Event) -> None:
        if type(e) is ev.SampleFinished or type(e) is ev.SampleFailed:
            now = time.perf_counter()
            if not self.count:
                self.first = now
            self.last = now
            self.count += 1

    def rate(self) -> float:
        return (self.count - 1) / (self.last - self.first) if self.count > 1 and self.last > self.first else 0.0


def write_plan(folder: Path, samples: int, workers: int, datasets: int = 1) -> Path:
    """`samples` questions over `datasets` data files (the first one `arith`)."""
    entries = []
    for d in range(datasets):
        data = folder / f"data{d}.jsonl"
        with data.open("w", encoding="utf-8") as f:
            for i in range(d * samples // datasets, (d + 1) * samples // datasets):
                f.write(json.dumps({"question": f"Q{i}: what is {i} + {i + 7}?", "answer": f"#### {2 * i + 7}"}) + "\n")
        abbr = "arith" if d == 0 else f"arith{d}"
        entries.append({"abbr": abbr, "path": str(data), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}})
    plan = {
        "title": "ui overhead",
        "run": {"work_dir": "out", "heartbeat_interval": 1.0, "poll_interval": 0.2, "watch_interval": 0.5, "log_interval": 600.0},
        "models": [{"abbr": "sim", "type": "lightllm", "url": "sim://?latency=0", "max_workers": workers}],
        "datasets": entries,
    }
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(plan), encoding="utf-8")
    return path


def headless_rate(plan: Path, work_dir: Path) -> float:
    watch = Stopwatch()
    runner = Runner(load_plan(plan), work_dir=work_dir, sink=watch)
    code = run_headless(runner, out=io.StringIO())
    assert code == 0, f"headless run ended with {code}"
    return watch.rate()


def app_rate(plan: Path, work_dir: Path) -> tuple[float, float]:
    """(samples/s, the app thread's CPU seconds per 1,000 samples)."""
    os.environ.setdefault("EVALTUI_CONFIG_DIR", str(work_dir.parent / "config"))  # never the user's
    from evaltui.ui.app import EvalApp

    watch = Stopwatch()
    runner = Runner(load_plan(plan), work_dir=work_dir, sink=watch)
    app = EvalApp(runner, theme="evaltui-dark", exit_when_done=True)
    cpu = time.thread_time()
    app.run(headless=True, size=(160, 40))
    cpu = time.thread_time() - cpu
    assert app.exit_code == 0, f"app run ended with {app.exit_code}"
    return watch.rate(), 1000 * cpu / max(1, watch.count)


def synthetic_cost(rate: int, seconds: float, size: tuple[int, int]) -> float:
    """The app's own cost, steadier than the ratio on a busy machine: its main thread's CPU, as a
    share of a core, while a thread feeds it `rate` samples a second of a scripted stream (no
    engine, no simulator) — what the session takes from the interpreter the engine shares."""
    import asyncio
    import threading

    from evaltui.ui.app import EvalApp

    folder = Path(tempfile.mkdtemp())
    os.environ.setdefault("EVALTUI_CONFIG_DIR", str(folder / "config"))
    plan = write_plan(folder, 100, 16)
    app = EvalApp(Runner(load_plan(plan), work_dir=folder / "out"), theme="evaltui-dark", start=False)
    sink = app.run_screen.sink

    async def run() -> float:
        async with app.run_test(size=size) as pilot:
            for e in (ev.RunStarted(str(folder / "out"), ("sim",), ("arith",), "ui cost"), ev.DatasetPlanned("sim", "arith", 10**9, 1),
                      ev.DatasetStarted("sim", "arith", 10**9, 10**9)):
                sink(e)
            await pilot.pause(0.5)
            stop = time.monotonic() + seconds

            def feed() -> None:
                i = 0
                while time.monotonic() < stop:
                    for _ in range(rate // 100):
                        sink(ev.SampleFinished("sim", "arith", 0, i))
                        i += 1
                    time.sleep(0.01)

            feeder = threading.Thread(target=feed)
            cpu, wall = time.thread_time(), time.monotonic()
            feeder.start()
            while feeder.is_alive():
                await asyncio.sleep(0.05)
            return (time.thread_time() - cpu) / (time.monotonic() - wall)

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--datasets", type=int, default=1, help="the samples spread over this many datasets (the session's cost of many rows)")
    ap.add_argument("--synthetic", type=int, metavar="RATE", help="measure instead the app's main-thread CPU at RATE samples/s of a scripted stream")
    args = ap.parse_args()
    if args.synthetic is not None:
        for r in range(args.rounds):
            shares = [synthetic_cost(args.synthetic, 8.0, size) for size in ((80, 24), (160, 40))]
            print(f"round {r + 1}: app main thread at {args.synthetic:,} samples/s: {100 * shares[0]:.1f} % of a core at 80x24, "
                  f"{100 * shares[1]:.1f} % at 160x40", flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plan = write_plan(folder, args.samples, args.workers, args.datasets)
        ratios, heads, apps, cpus = [], [], [], []
        for r in range(args.rounds):
            h = headless_rate(plan, folder / f"h{r}")
            a, cpu = app_rate(plan, folder / f"a{r}")
            ratios.append(a / h)
            heads.append(h)
            apps.append(a)
            cpus.append(cpu)
            print(f"round {r + 1}: headless {h:,.0f} samples/s   app {a:,.0f} samples/s   ratio {a / h:.3f}   "
                  f"app thread {cpu * 1000:.0f} µs CPU per sample", flush=True)
        print(f"median of {args.rounds}: app/headless = {statistics.median(ratios):.3f} (goal >= 0.95); "
              f"best app / best headless = {max(apps) / max(heads):.3f}; "
              f"app thread {statistics.median(cpus) * 1000:.0f} µs CPU per sample")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
