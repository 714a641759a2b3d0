"""The simulator's HTTP layer (aiohttp's server), concurrency, lifecycle and CLI, over raw sockets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from evaltui.sim import AnswerKey, ModelProfile, SimConfig, SimServer, SimThread

HOST = "127.0.0.1"


def request_bytes(path: str, body: dict | None = None, headers: str = "") -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    method = "POST" if body is not None else "GET"
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n{headers}\r\n"
            .encode() + data)


def read_response(sock: socket.socket, buf: bytearray) -> tuple[int, dict[str, str], bytes]:
    """One response from a blocking socket; `buf` carries bytes read past it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        buf += chunk
    end = buf.index(b"\r\n\r\n")
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    n = int(headers.get("content-length", "0"))
    del buf[:end + 4]
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a body")
        buf += chunk
    body = bytes(buf[:n])
    del buf[:n]
    return int(lines[0].split()[1]), headers, body


def connect(sim: SimThread) -> socket.socket:
    return socket.create_connection((HOST, sim.port), timeout=10)


def poll(fn, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture(scope="module")
def sim():
    key = AnswerKey()
    key.add_gen("hi", "hello")
    with SimThread(SimConfig(answer_key=key)) as s:
        yield s


# --- HTTP/1.1 ----------------------------------------------------------------

def test_keep_alive_and_pipelining(sim):
    with connect(sim) as s:
        buf = bytearray()
        reqs = [request_bytes("/generate", {"inputs": "hi"}), request_bytes("/health"),
                request_bytes("/v1/completions", {"prompt": "hi"})]
        s.sendall(b"".join(reqs))  # three pipelined requests in one write
        answers = [read_response(s, buf) for _ in reqs]
        assert [a[0] for a in answers] == [200, 200, 200]
        assert json.loads(answers[0][2])["generated_text"] == ["hello"]
        assert json.loads(answers[1][2]) == {"status": "ok"}
        assert json.loads(answers[2][2])["choices"][0]["text"] == "hello"
        s.sendall(request_bytes("/health"))  # still open afterwards
        assert read_response(s, buf)[0] == 200


def test_chunked_request_body(sim):
    data = json.dumps({"inputs": "hi"}).encode()
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:5], data[5:])) + b"0\r\n\r\n"
    head = b"POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with connect(sim) as s:
        buf = bytearray()
        s.sendall(head + body[:7])  # arrives in pieces
        time.sleep(0.01)
        s.sendall(body[7:])
        status, _, payload = read_response(s, buf)
        assert status == 200 and json.loads(payload)["generated_text"] == ["hello"]


def test_connection_close_honoured(sim):
    for req in (request_bytes("/health", headers="Connection: close\r\n"),
                b"GET /health HTTP/1.0\r\n\r\n"):
        with connect(sim) as s:
            buf = bytearray()
            s.sendall(req)
            status, headers, _ = read_response(s, buf)
            # HTTP/1.1 says "close"; an HTTP/1.0 reply closes by default
            assert status == 200 and headers.get("connection", "close") == "close"
            assert s.recv(100) == b""  # the server closed its side


def test_malformed_request_line(sim):
    with connect(sim) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        status, headers, _ = read_response(s, bytearray())
        assert status == 400 and headers.get("connection", "close") == "close"
        assert s.recv(100) == b""  # and the connection is closed


# --- concurrency -------------------------------------------------------------

def test_in_flight_counts_concurrent_requests():
    cfg = SimConfig(default=ModelProfile(latency=30.0))
    with SimThread(cfg) as sim:
        socks = [connect(sim) for _ in range(8)]
        try:
            for i, s in enumerate(socks):
                s.sendall(request_bytes("/generate", {"inputs": f"q{i}"}))
            assert poll(lambda: sim.stats.in_flight == 8)
            assert sim.stats.max_in_flight == 8
        finally:
            for s in socks:
                s.close()
        # Clients that leave settle their requests without waiting for the latency.
        assert poll(lambda: sim.stats.in_flight == 0)
        stats = sim.stats
    assert stats.max_in_flight == 8 and stats.requests_total == 8 and len(stats.log) == 8


def test_latency_replies_from_concurrent_clients():
    cfg = SimConfig(default=ModelProfile(latency=0.05, jitter=0.02))
    results: list[int] = []
    with SimThread(cfg) as sim:
        def worker(i: int) -> None:
            with httpx.Client(base_url=sim.url, trust_env=False, timeout=10) as c:
                for j in range(3):
                    results.append(c.post("/generate", json={"inputs": f"{i}-{j}"}).status_code)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        stats = sim.stats
    assert results == [200] * 12
    assert stats.in_flight == 0 and 1 <= stats.max_in_flight <= 4
    assert all(r.t_done >= r.t_received for r in stats.log)


def test_512_keep_alive_connections():
    n = 512
    with SimThread(SimConfig()) as sim:
        port = sim.port

        async def one(i: int, connected: list[int], all_open: asyncio.Event,
                      go: asyncio.Event) -> list[int]:
            reader, writer = await asyncio.open_connection(HOST, port)
            connected[0] += 1
            if connected[0] == n:
                all_open.set()
            try:
                await go.wait()
                statuses = []
                for j in range(2):  # two requests on the same connection
                    writer.write(request_bytes("/generate", {"inputs": f"c{i} r{j}"}))
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    json.loads(await reader.readexactly(length))
                    statuses.append(int(head.split()[1]))
                return statuses
            finally:
                writer.close()

        async def main() -> tuple[list[list[int]], int]:
            all_open, go = asyncio.Event(), asyncio.Event()
            connected = [0]
            tasks = [asyncio.create_task(one(i, connected, all_open, go)) for i in range(n)]
            await asyncio.wait_for(all_open.wait(), 30)
            held = 0
            for _ in range(1000):  # the server accepts a little after the client connects
                held = sim.call(lambda s: s.open_connections)
                if held == n:
                    break
                await asyncio.sleep(0.01)
            go.set()
            return await asyncio.wait_for(asyncio.gather(*tasks), 30), held

        statuses, held = asyncio.run(main())
        stats = sim.stats
    assert held == n  # all 512 connections were open at the same time
    assert statuses == [[200, 200]] * n
    assert stats.requests_total == 2 * n


# --- lifecycle -----------------------------------------------------------------

def test_async_server_stop_closes_connections():
    async def main() -> tuple[bytes, int]:
        cfg = SimConfig(default=ModelProfile(latency=60.0))
        async with SimServer(cfg) as sim:
            assert sim.url == f"http://127.0.0.1:{sim.port}"
            async with httpx.AsyncClient(base_url=sim.url, trust_env=False) as c:
                assert (await c.get("/health")).json() == {"status": "ok"}
            reader, writer = await asyncio.open_connection(HOST, sim.port)
            writer.write(request_bytes("/generate", {"inputs": "x"}))
            await writer.drain()
            for _ in range(500):
                if sim.stats.in_flight:
                    break
                await asyncio.sleep(0.01)
        # Leaving the block stops the server: the pending request's connection is cut.
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return data, sim.stats.in_flight

    data, in_flight = asyncio.run(main())
    assert data == b"" and in_flight == 0


def test_simthread_port_in_use_raises():
    with SimThread(SimConfig()) as a:
        with pytest.raises(OSError):
            SimThread(SimConfig(port=a.port)).start()


# --- CLI ---------------------------------------------------------------------

def test_serve_sim_without_an_answer_key_says_every_answer_is_i_dont_know() -> None:
    proc, line = start_cli()
    try:
        url = line.split()[-1]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        rest = proc.stdout.read()
        assert f'url = "{url}/generate"' in rest and f'url = "{url}/v1"' in rest
        assert 'without --answer-key every answer is "I don\'t know."' in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_serve_sim_started_by_a_run_says_only_its_address() -> None:
    """The engine's simulator (--parent-pid) prints the one line the engine reads."""
    proc, line = start_cli("--parent-pid", str(os.getpid()))
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert line.startswith("evaltui-sim listening on ") and proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def start_cli(*args: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.sim", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line: list[str] = []
    t = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(20)
    if not line:
        proc.kill()
        proc.wait(10)
        pytest.fail("the simulator printed no listening line")
    return proc, line[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_listening_line_and_clean_exit(tmp_path, sig):
    key = tmp_path / "key.jsonl"
    key.write_text(json.dumps({"prompt": "2+2?", "answer": "4"}) + "\n")
    proc, line = start_cli("--model", "strong:accuracy=1,latency=0", "--model", "weak:accuracy=0",
                           "--answer-key", str(key), "--generated-text-string")
    try:
        assert line.startswith("evaltui-sim listening on http://127.0.0.1:")
        url = line.split()[-1]
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
            assert c.get("/health").json() == {"status": "ok"}
            assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["strong", "weak"]
            assert c.post("/strong/generate", json={"inputs": "2+2?"}).json()["generated_text"] == "4"
            assert c.post("/weak/generate", json={"inputs": "2+2?"}).json()["generated_text"] == "5"
        proc.send_signal(sig)
        assert proc.wait(15) == 0
        rest = proc.stdout.read().splitlines()  # under the listening line: where to point a plan (issue 24)
        assert rest[0].split() == ["lightllm:", "url", "=", f'"{url}/generate"'] and rest[1].split()[:4] == ["openai-chat,", "openai-completions:", "url", "="]
        assert f'"{url}/v1"' in rest[1] and rest[-1] == "  it knows the answers to 1 prompts (--answer-key)"
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("args", [
    ["--rate-500", "1.5"], ["--model", "x:speed=3"], ["--fail-first-kind", "teapot"],
    ["--port", "70000"], ["--latency", "-1"], ["--answer-key", "/nonexistent/key.jsonl"],
])
def test_cli_invalid_values_exit_2(args, capsys):
    from evaltui.sim.cli import main

    try:
        rc = main(["--port", "0", *args])
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err  # one line, as every command line's refusal
    assert args[0] in err or "answer" in err  # naming the option


def test_expect_100_continue_is_answered_before_the_body(sim):
    data = json.dumps({"inputs": "hi"}).encode()
    head = (b"POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(data))
    with connect(sim) as s:
        s.sendall(head)  # a client like curl holds the body back until the server says go on
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = s.recv(100)
            assert chunk, "closed before 100 Continue"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n")
        s.sendall(data)
        status, _, payload = read_response(s, bytearray(interim.split(b"\r\n\r\n", 1)[1]))
        assert status == 200 and json.loads(payload)["generated_text"] == ["hello"]


def test_malformed_requests_are_answered_400_without_noise_on_stderr():
    proc, line = start_cli()
    try:
        port = int(line.split()[-1].rsplit(":", 1)[1])
        for data in (b"NONSENSE\r\n\r\n", b"POST /generate HTTP/1.1\r\nContent-Length: 5\r\n\r\n{bad"):
            with socket.create_connection((HOST, port), timeout=10) as s:
                s.sendall(data)
                status, _, _ = read_response(s, bytearray())
                assert status == 400
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.stderr.read() == ""  # no tracebacks from aiohttp's request logger
    proc.stdout.close()
    proc.stderr.close()
