"""Client CPU per request of the HTTP stacks the backends could stand on.

Run by hand: `python bench/http_client.py [--n 2000] [--c 64] [--latency 0.05] [--repeat 3]`
(needs `pip install httpx-aiohttp` besides the test extras: only this comparison uses it).

The workload is the engine's: N LightLLM `POST /generate` requests, C in flight, against the
project's simulator (its own process, pinned to CPU 0 when there are two) answering after L s.
Each client runs in a fresh process pinned to CPU 1, and its CPU time (user + system, from
getrusage) is reported twice: for the requests alone, and "all told" — the whole process from
spawn, imports and session set-up included. The physical floor of the wall time is N·L/C.

Clients:
- `aiohttp`: one aiohttp ClientSession, connector limit C, `session.post` + `read()` + json.
- `aiohttp-trust-env`: the same with `trust_env=True`, which looks up proxies and ~/.netrc on a
  worker thread for every request.
- `httpx-aiohttp`: httpx.AsyncClient over the `httpx-aiohttp` AiohttpTransport (same session).
- `httpx-aiohttp-direct`: that transport's `handle_async_request` called directly (no httpx
  client around it), as the issue measured it.
- `evaltui`: evaltui's own backend (`make_client` + `make_backend`, retry loop, token bucket,
  reply parsing) — what the engine pays.
- `httpx` (only with --all): httpx's default pool; ~10 ms per request, so slow to run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from workload import stop_process  # bench/ is on the path when a script here runs

CLIENTS = ("aiohttp", "aiohttp-trust-env", "httpx-aiohttp", "httpx-aiohttp-direct", "evaltui")
BODY = {"inputs": "What is 6*7?", "parameters": {"max_new_tokens": 16}}


def cpu_now() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pin(pid: int, cpu: int) -> bool:
    with contextlib.suppress(AttributeError, OSError):  # no affinity on this platform: run unpinned
        if len(os.sched_getaffinity(0)) >= 2:
            os.sched_setaffinity(pid, {cpu})
            return True
    return False


# ------------------------------------------------------------------------------- client side


async def _gather(n: int, c: int, one) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    left = iter(range(n))

    async def worker() -> None:
        for _ in left:
            await one()

    await asyncio.gather(*(worker() for _ in range(c)))


async def run_client(kind: str, url: str, n: int, c: int) -> None:
    if kind == "evaltui":
        from evaltui.backends import make_backend, make_client
        from evaltui.plan import ModelConfig

        cfg = ModelConfig.model_validate({"abbr": "b", "type": "lightllm", "url": url + "/generate", "max_workers": c,
                                          "generation_kwargs": BODY["parameters"]})
        async with make_client(cfg) as client:
            backend = make_backend(cfg, client)
            await backend.generate("warm-up")
            t0, w0 = cpu_now(), time.perf_counter()
            await _gather(n, c, lambda: backend.generate(BODY["inputs"]))
            report(t0, w0, n)
        return

    import aiohttp

    body = json.dumps(BODY).encode()
    headers = {"content-type": "application/json"}
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c), trust_env=kind == "aiohttp-trust-env")
    kind = "aiohttp" if kind == "aiohttp-trust-env" else kind
    async with session:
        if kind == "aiohttp":
            async def one() -> None:
                async with session.post(url + "/generate", data=body, headers=headers) as r:
                    json.loads(await r.read())
        elif kind.startswith("httpx"):
            import httpx

            if kind == "httpx":
                limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
                hc = httpx.AsyncClient(limits=limits)
            else:
                from httpx_aiohttp import AiohttpTransport

                limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
                hc = httpx.AsyncClient(transport=AiohttpTransport(client=session, limits=limits))
            transport = hc._transport
            if kind == "httpx-aiohttp-direct":
                async def one() -> None:
                    req = httpx.Request("POST", url + "/generate", content=body, headers=headers)
                    resp = await transport.handle_async_request(req)
                    await resp.aread()
                    json.loads(resp.content)
            else:
                async def one() -> None:
                    json.loads((await hc.post(url + "/generate", content=body, headers=headers)).content)
        else:
            raise SystemExit(f"unknown client {kind}")
        await one()  # warm-up: a connection, the first parse
        t0, w0 = cpu_now(), time.perf_counter()
        await _gather(n, c, one)
        report(t0, w0, n)


def report(cpu0: float, wall0: float, n: int) -> None:
    print(json.dumps({"cpu_requests": cpu_now() - cpu0, "wall": time.perf_counter() - wall0, "cpu_all": cpu_now()}), flush=True)


# ------------------------------------------------------------------------------- driver side


def start_sim(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "evaltui.sim", "--port", "0", "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.kill()
        raise SystemExit(f"simulator did not start: {line!r}")
    return proc, line.split("listening on ", 1)[1].strip()


def measure(kind: str, url: str, n: int, c: int) -> dict[str, float]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    out = subprocess.run([sys.executable, __file__, "--client", kind, "--url", url, "--n", str(n), "--c", str(c)],
                         capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="also httpx's own pool (slow)")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        import asyncio

        pin(0, 1)
        asyncio.run(run_client(args.client, args.url, args.n, args.c))
        return 0

    import aiohttp
    import httpx

    proc, url = start_sim(args.latency)
    try:
        pinned = pin(proc.pid, 0)
        floor = args.n * args.latency / args.c
        print(f"N={args.n} C={args.c} L={args.latency:g}s floor N·L/C={floor:.2f}s  server pinned to cpu0: {pinned}  "
              f"aiohttp {aiohttp.__version__} httpx {httpx.__version__} python {sys.version.split()[0]}")
        print(f"load: {os.getloadavg()}")
        kinds = CLIENTS + (("httpx",) if args.all else ())
        results: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        for _ in range(args.repeat):  # interleaved, so drift in machine load hits every client alike
            for k in kinds:
                results[k].append(measure(k, url, args.n, args.c))
        for k in kinds:
            rs = results[k]
            per = [1000 * r["cpu_requests"] / args.n for r in rs]
            told = [1000 * r["cpu_all"] / args.n for r in rs]
            wall = [r["wall"] for r in rs]
            print(f"{k:22s} CPU/request {min(per):.2f}–{max(per):.2f} ms (median {statistics.median(per):.2f}); "
                  f"all told {statistics.median(told):.2f} ms; wall {statistics.median(wall):.2f} s "
                  f"(floor/wall {floor / statistics.median(wall):.2f})")
        print(f"load: {os.getloadavg()}")
    finally:
        stop_process(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
