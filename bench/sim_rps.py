"""Maximum requests/s of the simulated server at zero latency.

Run by hand: `python bench/sim_rps.py [--seconds 5] [--connections 64] [--depth 1,16]`.

The simulator runs as a subprocess (`python -m evaltui.sim --port 0 --latency 0`)
pinned to CPU 0; this load generator runs in this process pinned to CPU 1, so
on a 2-core machine each side owns one core. The client is kept cheap so it is
not the bottleneck: it sends the same LightLLM `/generate` request over and
over on keep-alive connections, and since the reply to an identical request is
byte-for-byte identical, it counts replies by counting bytes instead of
parsing them. `depth` is the number of requests in flight per connection
(1 = plain request/response; >1 = HTTP pipelining).

The server's own count (`/sim/stats` requests_total) and CPU time (from
/proc) are reported too, and their ratio: requests per server CPU-second, the
rate one whole core would sustain (on a shared machine the server seldom gets
its whole core, so req/s alone understates it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

from workload import stop_process  # bench/ is on the path when a script here runs

BODY = json.dumps({"inputs": "What is 6*7?", "parameters": {"max_new_tokens": 16}}).encode()
REQUEST = (b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY))


def start_sim() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.sim", "--host", "127.0.0.1", "--port", "0", "--latency", "0"],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the first line is the contract: "evaltui-sim listening on URL"
    if not line.startswith("evaltui-sim listening on "):
        proc.kill()
        raise SystemExit(f"simulator did not start: {line!r}")
    return proc, line.split()[-1]


def pin(pid: int, cpu: int) -> bool:
    try:
        if len(os.sched_getaffinity(0)) >= 2:
            os.sched_setaffinity(pid, {cpu})
            return True
    except (AttributeError, OSError):
        pass
    return False


def cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def server_count(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url + "/sim/stats?log=0", timeout=30) as r:
        return json.load(r)["requests_total"]


def response_size(host: str, port: int) -> int:
    import socket

    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(REQUEST)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        return len(head) + 4 + length


class Load(asyncio.Protocol):
    """Keeps `depth` identical requests in flight; counts replies by bytes."""

    def __init__(self, size: int, depth: int, state: dict) -> None:
        self.size, self.depth, self.state = size, depth, state
        self.received = 0
        self.done = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(REQUEST * self.depth)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        done = self.received // self.size
        new = done - self.done
        if new:
            self.done = done
            self.state["count"] += new
            if self.state["running"]:
                self.transport.write(REQUEST * new)


async def run_load(host: str, port: int, size: int, connections: int, depth: int,
                   seconds: float, warmup: float) -> tuple[int, float]:
    loop = asyncio.get_running_loop()
    state = {"count": 0, "running": True}
    transports = []
    for _ in range(connections):
        t, _ = await loop.create_connection(lambda: Load(size, depth, state), host, port)
        transports.append(t)
    await asyncio.sleep(warmup)
    c0, t0 = state["count"], time.perf_counter()
    await asyncio.sleep(seconds)
    c1, t1 = state["count"], time.perf_counter()
    state["running"] = False
    await asyncio.sleep(0.2)
    for t in transports:
        t.close()
    return c1 - c0, t1 - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--depth", default="1,16", help="comma-separated in-flight requests per connection")
    args = ap.parse_args()

    proc, url = start_sim()
    try:
        host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
        port_n = int(port)
        pinned = pin(proc.pid, 0) and pin(0, 1)
        size = response_size(host, port_n)
        print(f"cpus={os.cpu_count()} pinned(server=cpu0, client=cpu1)={pinned} "
              f"response={size} bytes connections={args.connections}")
        for depth in (int(d) for d in args.depth.split(",")):
            n0, cpu0 = server_count(url), cpu_seconds(proc.pid)
            count, secs = asyncio.run(run_load(host, port_n, size, args.connections, depth,
                                               args.seconds, args.warmup))
            n1, cpu1 = server_count(url), cpu_seconds(proc.pid)
            cpu = f"{cpu1 - cpu0:.2f}" if cpu0 is not None and cpu1 is not None else "n/a"
            # On a shared machine the server rarely gets its whole core: requests per second of
            # server CPU is what one core would sustain, whatever else runs on it.
            per_cpu = f"{(n1 - n0) / (cpu1 - cpu0):,.0f}" if cpu0 is not None and cpu1 is not None and cpu1 > cpu0 else "n/a"
            print(f"depth={depth:<3} requests={count} seconds={secs:.2f} req/s={count / secs:,.0f} "
                  f"(server counted {n1 - n0} incl. warmup; server CPU s over the run: {cpu}; "
                  f"requests per server CPU-second: {per_cpu})")
    finally:
        stop_process(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
