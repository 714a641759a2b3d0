"""What `executor = "ray"` costs: the same workload local and on a local Ray cluster, as ratios to the floor.

    python bench/ray_overhead.py                       # N=20,000, C=256, L=50 ms; a 2-CPU cluster; 1 run each
    python bench/ray_overhead.py --repeat 3 --actors 1 2

The workload is throughput.py's (workload.py: the simulator as its own process, a real
`evaltui PLAN --no-ui --fresh` subprocess each time, exact-match scoring checked against the
simulator's ground truth). The cluster is `ray start --head --block --num-cpus 2` on this
machine (two worker CPUs; its processes end with this script); each Ray run joins it with
`--executor ray --ray-address`, its model spread over `--actors` actors (the dataset's
`shards`). Local and Ray runs alternate, so load drift on a shared machine hits both alike.

Columns, besides workload.py's (floor = N·L/C; floor/wall end to end; window and floor/window
at the server; in-fl the most requests the server had at once, which must stay ≤ C):

  drv CPU     the evaltui process's user+sys seconds (wait4), per 1,000 requests;
  ray CPU     every process of the cluster (GCS, raylet, the actors' workers, Ray's own
              daemons) over the run, per 1,000 requests: the growth of their user+sys time,
              sampled every 0.1 s (an actor's worker counts up to its last sample);
  total/req   both, in ms per request — against the local run's drv CPU, the overhead of
              sending each request through Ray.

On a 2-core machine that also runs the simulator, Ray cannot be faster: its actors compete with
the driver and the server for the same cores. The figures say what a request costs through
Ray, which is what a real cluster of separate machines pays too.

Last, the alternative to the driver holding max_workers (ray_model.py): a limiter actor that
every request would ask twice (acquire, release), measured alone, with no HTTP: its requests
per second bound a model's throughput, its CPU per request adds to every one.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import workload as w

TICK = os.sysconf("SC_CLK_TCK")
ENV = {**w.ENV, "RAY_AUTH_MODE": "token"}  # the cluster's token (~/.ray/auth_token), which an explicit address needs


def tree_cpu(pid: int) -> dict[int, float]:
    """User+sys seconds of `pid` and each of its descendants alive now."""
    seen, todo = {}, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            seen[p] = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue  # gone meanwhile
    return seen


class ClusterCPU:
    """The CPU the cluster's processes spend while it runs: sampled every SAMPLE s, so a worker
    that exits (an actor killed at the end of a run) counts up to its last sample."""

    SAMPLE = 0.1

    def __init__(self, pid: int):
        self.pid = pid
        self._start = tree_cpu(pid)
        self._last = dict(self._start)
        self.names = {p: _name(p) for p in self._start}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.SAMPLE):
            now = tree_cpu(self.pid)
            self._last.update(now)
            for p in now:  # named as last seen: a worker takes its actor's name once it is one
                name = _name(p)
                if name != "?":
                    self.names[p] = name

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._last.update(tree_cpu(self.pid))
        return sum(self.by_name().values())

    def by_name(self) -> dict[str, float]:
        """The CPU of the run by process: the actors, Ray's idle workers, the raylet, the GCS, ..."""
        out: dict[str, float] = {}
        for p, cpu in self._last.items():
            name = self.names.get(p) or _name(p)
            out[name] = out.get(name, 0.0) + cpu - self._start.get(p, 0.0)
        return out


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "?"
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::"):
        return first.split(".")[0].split()[0]  # ray::ModelActor, ray::IDLE
    words = [Path(a.decode(errors="replace")).name for a in argv if a]
    script = next((x for x in words[1:] if x.endswith(".py")), "")
    return script or (words[0] if words else "?")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cluster(cpus: int, temp_dir: Path, niceness: int | None) -> tuple[subprocess.Popen[str], str]:
    """`ray start --head --block`: its address once it says it is up; stopped by stop_process.
    `niceness`: its workers' (Ray's default, 15, gives way to every other process here)."""
    port = free_port()
    env = ENV if niceness is None else {**ENV, "RAY_worker_niceness": str(niceness)}
    ray = str(Path(sys.executable).with_name("ray"))
    proc = subprocess.Popen(
        [ray, "start", "--head", "--block", "--port", str(port), "--num-cpus", str(cpus), "--node-ip-address", "127.0.0.1",
         "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", str(temp_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if "Ray runtime started" in line:
            break
        if time.monotonic() > deadline:
            break
    else:
        raise SystemExit("ray start ended before the cluster was up")
    os.set_blocking(proc.stdout.fileno(), False)  # its later lines are not read
    return proc, f"127.0.0.1:{port}"


LIMITER = """
import asyncio, os, sys, time, resource
import ray
ray.init(address=sys.argv[1], logging_level=40, log_to_driver=False)

@ray.remote(num_cpus=0)
class Limiter:
    def __init__(self, limit):
        self.slots = asyncio.Semaphore(limit)
    async def acquire(self):
        await self.slots.acquire()
    def release(self):
        self.slots.release()

async def main(n, c):
    limiter = Limiter.remote(c)
    await limiter.acquire.remote()
    limiter.release.remote()
    done = 0
    async def caller():
        nonlocal done
        while done < n:
            done += 1
            await limiter.acquire.remote()
            await limiter.release.remote()
    t0, c0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(c)))
    print(time.monotonic() - t0, time.process_time() - c0)

asyncio.run(main(int(sys.argv[2]), int(sys.argv[3])))
"""


def limiter_cost(address: str, cluster: subprocess.Popen[str], n: int, c: int) -> None:
    """The alternative not taken: a limiter actor holding max_workers, asked to acquire and
    release around every request (two round trips), by c callers at once — no HTTP at all."""
    sampler = ClusterCPU(cluster.pid)
    proc = subprocess.run([sys.executable, "-c", LIMITER, address, str(n), str(c)], capture_output=True, text=True, env=ENV, timeout=600)
    ray_cpu = sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"limiter run failed:\n{proc.stderr[-2000:]}")
    wall, caller_cpu = map(float, proc.stdout.split())
    print(f"limiter actor (the alternative): {n} acquire+release pairs by {c} callers in {wall:.2f} s = {n / wall:,.0f} requests/s at most; "
          f"CPU {1000 * (caller_cpu + ray_cpu) / n:.3f} ms per request (caller {1000 * caller_cpu / n:.3f}, cluster {1000 * ray_cpu / n:.3f}), before any HTTP")


def measure(label: str, folder: Path, data: Path, sim: w.Sim, n: int, c: int, latency: float,
            extra: list[str], cluster: subprocess.Popen[str] | None, shards: int) -> tuple[w.Measure, float, str]:
    plan = w.evaltui_plan(folder, data, sim.url, c)
    if shards > 1:
        plan.write_text(plan.read_text().replace('[datasets.evaluator]', f'shards = {shards}\n[datasets.evaluator]'))
    sampler = ClusterCPU(cluster.pid) if cluster is not None else None
    m, _ = w.run_client(label, w.EVALTUI + [str(plan), "--no-ui", "--fresh", *extra], sim, n, c, latency, env=ENV)
    ray_cpu = sampler.stop() if sampler is not None else 0.0
    parts = sorted(sampler.by_name().items(), key=lambda kv: -kv[1]) if sampler is not None else []
    breakdown = ", ".join(f"{name} {cpu:.2f} s" for name, cpu in parts if cpu >= 0.05)
    m.accuracy = w.evaltui_accuracy(folder / "out")
    return m, ray_cpu, breakdown


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--c", type=int, default=256)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--cpus", type=int, default=2, help="the cluster's CPUs (default 2)")
    ap.add_argument("--actors", type=int, nargs="+", default=[2], help="actors the model is spread over (default 2)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--accuracy", type=float, default=0.8)
    ap.add_argument("--niceness", type=int, help="the cluster's workers' niceness (Ray's default: 15; 0: as the driver's)")
    ap.add_argument("--limiter", type=int, default=5000, help="acquire/release pairs for the limiter-actor figure (0: skip it)")
    args = ap.parse_args()

    header = w.HEADER + f" {'drv CPU':>8} {'ray CPU':>8} {'ms/req':>7}"
    with tempfile.TemporaryDirectory(prefix="evaltui-bench-") as tmp:
        folder = Path(tmp)
        data, key = w.write_data(folder, args.n)
        sim = w.start_sim(key, args.latency, 0.0, 0, args.accuracy)
        cluster, address = start_cluster(args.cpus, folder / "ray", args.niceness)
        truth = w.ground_truth(args.n, args.accuracy)
        rows: dict[str, list[tuple[w.Measure, float]]] = {}
        try:
            nice = f"workers' niceness {args.niceness}" if args.niceness is not None else "Ray's worker niceness (15)"
            print(f"N={args.n} C={args.c} L={args.latency * 1000:.0f} ms; cluster of {args.cpus} CPUs at {address}, {nice}; {os.cpu_count()} cores here")
            print(header)
            on_ray = ["--executor", "ray", "--ray-address", address]
            cells: list[tuple[str, list[str], subprocess.Popen[str] | None, int]] = [("local", [], None, 1)]
            cells += [(f"ray {k} actor{'s' if k > 1 else ''}", on_ray, cluster, k) for k in args.actors]
            for _ in range(args.repeat):
                for label, extra, where, shards in cells:
                    m, ray_cpu, breakdown = measure(label, folder, data, sim, args.n, args.c, args.latency, extra, where, shards)
                    if abs((m.accuracy or 0) - truth) > 0.01 or m.requests != args.n:
                        raise SystemExit(f"wrong run: accuracy {m.accuracy} (truth {truth:.2f}), {m.requests} requests for {args.n}")
                    rows.setdefault(label, []).append((m, ray_cpu))
                    total = 1000 * (m.cpu + ray_cpu) / args.n
                    print(w.row(m) + f" {1000 * m.cpu / args.n:8.3f} {1000 * ray_cpu / args.n:8.3f} {total:7.3f}", flush=True)
                    if breakdown:
                        print(f"    the cluster's CPU by process: {breakdown}", flush=True)
            if args.limiter:
                limiter_cost(address, cluster, args.limiter, args.c)
        finally:
            w.stop_process(cluster)
            sim.stop()
        print("\nmedians:")
        local = statistics.median(1000 * (m.cpu + r) / args.n for m, r in rows["local"])
        for label, runs in rows.items():
            wall = statistics.median(m.wall for m, _ in runs)
            per = statistics.median(1000 * (m.cpu + r) / args.n for m, r in runs)
            floor = runs[0][0].floor
            print(f"  {label:<14} floor/wall {floor / wall:5.2f}  CPU {per:6.3f} ms/request  (+{per - local:6.3f} ms over local)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
