"""The report of a large run: how long `evaltui report` takes, how big the page is, how long a
browser takes to show it, to page and to search it.

    python bench/report.py                 # N = 200,000 samples (one model, one dataset)
    python bench/report.py --n 20000       # quicker look
    python bench/report.py --shots 5       # every prompt led by 5 worked examples (~1.3 kB), as few-shot prompts are
    python bench/report.py --work-dir DIR  # report an existing work dir instead of making one

1. A real run (`evaltui PLAN --no-ui`, the simulator at 1 ms) writes the work dir: the
   workload of bench/workload.py, with --accuracy right so that the page has right and wrong.
2. `evaltui report` of it (a subprocess): wall, CPU, peak RSS, the page's size and what each
   part of it takes (the samples' packed chunks, the summary, style and script).
3. Debian's chromium, headless, driven over the DevTools protocol (aiohttp's websocket client),
   in real time: it navigates to the page and is asked every 20 ms whether the sample browser
   has drawn (`data-samples-ms`); printed: the ms from navigation to the end of the script's
   first drawing of everything (`data-rendered-ms`, performance.now()), to the first page of
   samples shown, and the wall time to that from the navigation. Then page 2,000 of the wrong
   samples (by the link: #filter=w&page=1999) and a search over all of them (#q=Question N-3:,
   which one sample matches), each the same way in a new tab of the same browser.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import workload as w

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import CHROMIUM, FLAGS  # noqa: E402

SHOT = "Question: Tom has {a} apples and buys {b} more. How many apples does he have now?\nAnswer: {a} + {b} = {c}. The answer is {c}.\n\n"


def write_data(folder: Path, n: int, shots: int) -> tuple[Path, Path]:
    preamble = "".join(SHOT.format(a=k + 3, b=2 * k + 5, c=3 * k + 8) for k in range(shots))
    data, key = folder / "data.jsonl", folder / "key.jsonl"
    with open(data, "w") as d, open(key, "w") as k:
        for i in range(n):
            q, a = preamble + w.question(i), w.answer(i)
            d.write(json.dumps({"question": q, "answer": a}) + "\n")
            k.write(json.dumps({"prompt": q, "answer": a}) + "\n")
    return data, key


async def browse(urls: list[str]) -> list[tuple[float, dict[str, str]]]:
    """For each url, in a new tab of one headless chromium: (seconds from navigation until the
    sample browser has drawn, the page's data-* timings then)."""
    import aiohttp

    out = []
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.exists() or not port_file.read_text().strip():
                if time.monotonic() > deadline:
                    raise SystemExit("chromium did not open its DevTools port")
                time.sleep(0.05)
            port = int(port_file.read_text().split()[0])
            async with aiohttp.ClientSession() as http:
                for url in urls:
                    async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as r:
                        target = await r.json()
                    async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                        out.append(await _measure(ws, url))
        finally:
            proc.terminate()
            proc.wait(30)
    return out


async def _measure(ws: Any, url: str) -> tuple[float, dict[str, str]]:
    ids = iter(range(1, 1 << 30))

    async def call(method: str, **params: Any) -> Any:
        n = next(ids)
        await ws.send_json({"id": n, "method": method, "params": params})
        while True:
            msg = await ws.receive_json(timeout=600)
            if msg.get("id") == n:
                return msg.get("result", {})

    t0 = time.monotonic()
    await call("Page.navigate", url=url)
    while time.monotonic() - t0 < 600:
        got = await call("Runtime.evaluate", expression="JSON.stringify(document.documentElement ? document.documentElement.dataset : {})", returnByValue=True)
        marks = json.loads(got.get("result", {}).get("value") or "{}")
        if marks.get("samplesMs"):
            return time.monotonic() - t0, marks
        await asyncio.sleep(0.02)
    raise SystemExit(f"{url}: not drawn within 600 s")


def sizes(page: Path) -> dict[str, int]:
    text = page.read_bytes()
    chunks = sum(len(m) for m in re.findall(rb'<script type="application/x-evaltui-chunk"[^>]*>.*?</script>\n', text, re.S))
    summary = len(re.search(rb'<script type="application/json" id="report-data">.*?</script>', text, re.S).group(0))  # type: ignore[union-attr]
    return {"page": len(text), "chunks": chunks, "summary": summary, "rest": len(text) - chunks - summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--shots", type=int, default=0, help="worked examples before every question (default 0)")
    ap.add_argument("--accuracy", type=float, default=0.8)
    ap.add_argument("--work-dir", type=Path, help="report this work dir instead of making one")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="evaltui-report-") as tmp:
        folder = Path(tmp)
        root = args.work_dir
        if root is None:
            data, key = write_data(folder, args.n, args.shots)
            sim = w.start_sim(key, 0.001, 0.0, 0, args.accuracy)
            try:
                plan = w.evaltui_plan(folder, data, sim.url, 256)
                run, _ = w.run_client("run", w.EVALTUI + [str(plan), "--no-ui"], sim, args.n, 256, 0.0)
            finally:
                sim.stop()
            root = folder / "out"
            print(f"the run: N={args.n}, {args.shots} shots, wall {run.wall:.1f} s")
        page = folder / "report.html"
        t0 = time.monotonic()
        proc = subprocess.Popen([*w.EVALTUI, "report", str(root), "-o", str(page)], stdout=subprocess.PIPE, text=True, env=w.ENV)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, w.tree_peak_rss_kb(proc.pid))
            time.sleep(0.01)
        wall = time.monotonic() - t0
        out = proc.stdout.read() if proc.stdout else ""
        if proc.returncode != 0:
            raise SystemExit(f"evaltui report failed: {out}")
        s = sizes(page)
        print(f"evaltui report      wall {wall:6.2f} s   peak RSS {peak / 1024:5.0f} MB   {out.strip()}")
        print(f"the page            {s['page'] / 2**20:6.1f} MB: samples {s['chunks'] / 2**20:.1f} MB ({s['chunks'] / max(args.n, 1):.0f} B/sample), "
              f"summary {s['summary'] / 1024:.0f} kB, style and script {s['rest'] / 1024:.0f} kB")
        views = (("opened", ""), ("wrong, page 2,000", "#filter=w&page=1999"), ("searched", f"#q=Question {args.n - 3}:"))
        for (label, _), (took, marks) in zip(views, asyncio.run(browse([page.as_uri() + fragment for _, fragment in views])), strict=True):
            print(f"chromium, {label:<18} {took:6.2f} s from navigation: everything drawn at {marks.get('renderedMs', '?')} ms, "
                  f"{marks.get('samplesShown', '?')} samples shown at {marks.get('samplesMs', '?')} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
