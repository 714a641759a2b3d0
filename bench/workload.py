"""The one workload every benchmark here runs, and how to measure a client process against it.

Shared by throughput.py, memory.py and peers/run.py so evaltui and its peers see the same
prompts, the same simulator settings and the same ground truth. Questions have a one-number
answer and are scored by exact match, which every tool's stock scorer can do, so the accuracy
each tool reports must equal the simulator's ground truth exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: The model name every client uses (LightLLM: path prefix; OpenAI: the body's "model"); the
#: simulator decides right or wrong from (model, prompt), so all tools must use the same one.
MODEL = "bench"

# As a user runs it: bytecode caching on (some sandboxes set PYTHONDONTWRITEBYTECODE, which makes
# every start-up compile from source). No proxies: all traffic goes to 127.0.0.1.
ENV = {k: v for k, v in os.environ.items()
       if k != "PYTHONDONTWRITEBYTECODE" and not k.lower().endswith("_proxy")}
ENV["NO_PROXY"] = ENV["no_proxy"] = "127.0.0.1,localhost"

#: How a user starts it (the console script's own entry point, with this interpreter).
EVALTUI = [sys.executable, "-m", "evaltui"]

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def question(i: int) -> str:
    return f"Question {i}: what is {i} + {i + 7}? Reply with the number only."


def answer(i: int) -> str:
    return str(2 * i + 7)


def write_data(folder: Path, n: int) -> tuple[Path, Path]:
    """(data.jsonl with question/answer records, the simulator's answer key)."""
    data, key = folder / "data.jsonl", folder / "key.jsonl"
    with open(data, "w") as d, open(key, "w") as k:
        for i in range(n):
            q, a = question(i), answer(i)
            d.write(json.dumps({"question": q, "answer": a}) + "\n")
            k.write(json.dumps({"prompt": q, "answer": a}) + "\n")
    return data, key


def ground_truth(n: int, accuracy: float) -> float:
    """The accuracy in percent a correct client must report: the simulator's own decision rule."""
    from evaltui.sim.answers import answers_correctly

    return 100.0 * sum(answers_correctly(MODEL, question(i), accuracy) for i in range(n)) / n


@dataclass
class Sim:
    proc: subprocess.Popen[str]
    url: str

    def stats(self) -> dict:
        with _NO_PROXY.open(f"{self.url}/sim/stats?log=0", timeout=60) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.url}/sim/reset", method="POST", data=b"")
        _NO_PROXY.open(req, timeout=60).read()

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen) -> None:
    """Ask a helper process to leave, and make it if it has not within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def start_sim(key: Path, latency: float, jitter: float, seed: int, accuracy: float,
              extra: list[str] | None = None) -> Sim:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.sim", "--port", "0", "--latency", str(latency),
         "--jitter", str(jitter), "--seed", str(seed), "--accuracy", str(accuracy),
         "--answer-key", str(key), "--parent-pid", str(os.getpid()), *(extra or [])],
        stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.kill()
        raise SystemExit(f"simulator did not start: {line!r}")
    return Sim(proc, line.split("listening on ", 1)[1].strip())


@dataclass
class Measure:
    """One client run, seen from outside: the process's own clocks and the server's window."""

    tool: str
    n: int
    c: int
    floor: float
    wall: float
    first_request: float  # seconds from spawn to the first request the server saw
    window: float  # first request received to last reply done, at the server
    requests: int
    max_in_flight: int
    cpu: float  # user+sys seconds of the client process tree
    maxrss_mb: float  # peak RSS (VmHWM) of the largest process in the client's tree
    accuracy: float | None = None

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000.0 * self.cpu / max(self.n, 1)


def run_client(tool: str, argv: list[str], sim: Sim, n: int, c: int, mean_latency: float,
               cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 3600, ok: tuple[int, ...] = (0,)) -> tuple[Measure, str]:
    """Spawn `argv`, wait for it with wait4 (its own rusage, not the simulator's), read the window.

    CPU comes from the kernel's accounting of the child and the descendants it waited for, so
    worker processes a tool forks are counted too; peak RSS is the largest VmHWM seen in its
    process tree while it ran (tree_peak_rss_kb).
    """
    sim.reset()
    out_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-{os.getpid()}-{tool}.out"
    with open(out_path, "w+") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True,
                                cwd=cwd, env=env or ENV)
        deadline = t0 + timeout
        peak_kb = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_kb = max(peak_kb, tree_peak_rss_kb(proc.pid))
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"{tool} did not finish within {timeout:.0f} s")
            time.sleep(0.005)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    out_path.unlink(missing_ok=True)
    if proc.returncode not in ok:
        raise SystemExit(f"{tool} failed ({proc.returncode}):\n{text[-4000:]}")
    st = sim.stats()
    first, last = st["first_received"], st["last_done"]
    return Measure(
        tool=tool, n=n, c=c, floor=n * mean_latency / c, wall=wall,
        first_request=(first - t0) if first else float("nan"),
        window=(last - first) if first and last else float("nan"),
        requests=st["requests_total"], max_in_flight=st["max_in_flight"],
        cpu=usage.ru_utime + usage.ru_stime, maxrss_mb=peak_kb / 1024,
    ), text


def tree_peak_rss_kb(pid: int) -> int:
    """The largest peak resident set (VmHWM) among `pid` and its descendants, in kB.

    Not wait4's ru_maxrss: a child's ru_maxrss starts at its parent's resident set at the fork
    (the exec does not reset it), so a benchmark script that had grown to 130 MB reported every
    client it spawned as at least that big. VmHWM belongs to the process's own memory map, which
    the exec replaced. Read while the process runs; the last few milliseconds before it exits
    are not seen, which for a peak reached during the run does not matter."""
    peak, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
                        break
            with open(f"/proc/{p}/task/{p}/children", "rb") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue  # gone meanwhile
    return peak


HEADER = (f"{'tool':<16} {'N':>7} {'C':>4} {'floor':>7} {'wall':>7} {'fl/wall':>7} {'1st req':>7} "
          f"{'window':>7} {'fl/win':>6} {'CPU s/1k':>8} {'RSS MB':>7} {'reqs':>7} {'in-fl':>5} {'acc %':>7}")


def row(m: Measure) -> str:
    acc = f"{m.accuracy:7.2f}" if m.accuracy is not None else f"{'-':>7}"
    return (f"{m.tool:<16} {m.n:>7} {m.c:>4} {m.floor:7.2f} {m.wall:7.2f} {m.floor / m.wall:7.2f} "
            f"{m.first_request:7.2f} {m.window:7.2f} {m.floor / m.window:6.2f} "
            f"{m.cpu_ms_per_request:8.3f} {m.maxrss_mb:7.0f} {m.requests:>7} {m.max_in_flight:>5} {acc}")


def evaltui_plan(folder: Path, data: Path, url: str, c: int, work_dir: Path | None = None) -> Path:
    """evaltui's plan for the workload: LightLLM /generate, exact match."""
    plan = folder / "plan.toml"
    plan.write_text(f"""
[run]
work_dir = "{work_dir or folder / 'out'}"

[[models]]
abbr = "{MODEL}"
type = "lightllm"
url = "{url}/{MODEL}/generate"
max_workers = {c}
generation_kwargs = {{ max_new_tokens = 16 }}

[[datasets]]
abbr = "arith"
path = "{data}"
prompt = "{{question}}"
target = "{{answer}}"
[datasets.evaluator]
type = "exact"
""")
    return plan


def evaltui_accuracy(work_dir: Path) -> float:
    return float(json.loads((work_dir / "results" / MODEL / "arith.json").read_text())["accuracy"])


def run_evaltui(folder: Path, data: Path, sim: Sim, n: int, c: int, mean_latency: float,
                evaltui: list[str] | None = None, env: dict[str, str] | None = None) -> Measure:
    """`env`: the run's environment (e.g. a PYTHONPATH of another checkout); ENV by default.

    Run from `folder`: `python -m` puts its working directory first on sys.path, so a bench
    started from a checkout's root would import that checkout's evaltui before PYTHONPATH's."""
    plan = evaltui_plan(folder, data, sim.url, c)
    argv = (evaltui or EVALTUI) + [str(plan), "--no-ui", "--fresh"]
    m, _ = run_client("evaltui", argv, sim, n, c, mean_latency, cwd=folder, env=env)
    m.accuracy = evaltui_accuracy(folder / "out")
    return m
