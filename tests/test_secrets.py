"""Secrets and containment (RELIABILITY.md §6): the API key never reaches disk or a log line, and
`abbr` never makes a path outside the work dir.

The key test runs the real `evaltui` command with a distinctive key against the simulator's OpenAI
endpoint (answers and failures) and against a server that echoes what it received — the request
line, every header, the body — in its error messages, as misconfigured proxies and some APIs do.
Then it greps every byte under the work dir and everything the command printed.
"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from planmaker import arithmetic, chat, gsm_dataset, write_jsonl, write_plan

from evaltui.engine.disk.workdir import WorkDir
from evaltui.plan import ABBR_RE, PlanError, load_plan
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig

pytestmark = pytest.mark.reliability

KEY_VAR = "EVALTUI_TEST_OPENAI_KEY"
KEY = "sk-evaltui-" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=40))


class _Quiet(BaseHTTPRequestHandler):
    """A loopback test server's handler: replies in one call, logs nothing to the test's output."""

    def reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return  # http.server would print every request to stderr


class _Echo(_Quiet):
    """Fails every request, repeating all of it back: status 401 for one model, 500 for another."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8", "replace")
        status = 401 if "/deny/" in self.path else 500
        message = f"Incorrect API key provided: {self.headers.get('authorization')}; request {self.requestline!r}; headers {dict(self.headers)!r}; body {body}"
        self.reply(status, "application/json", json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def every_file(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def test_the_api_key_reaches_no_file_and_no_log_line(tmp_path: Path, sim_factory, echo_server: str) -> None:
    rows = arithmetic(16)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    # The simulator answers `good`; `flaky` fails its first tries (500, then 401 for good), the
    # answers it does give are half wrong; the echo server fails every request of `deny`/`crash`.
    sim = sim_factory(SimConfig(answer_key=key, models={"good": ModelProfile(accuracy=1.0), "flaky": ModelProfile(accuracy=0.5)}))
    sim_flaky = sim_factory(SimConfig(answer_key=key, models={"flaky": ModelProfile(accuracy=0.5)}, faults=Faults(fail_first=1, fail_first_kind="401")))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    models = [
        chat("good", sim.url, api_key_env=KEY_VAR),
        chat("flaky", sim_flaky.url, api_key_env=KEY_VAR),
        {**chat("deny", echo_server, api_key_env=KEY_VAR), "url": f"{echo_server}/deny/v1"},
        {**chat("crash", echo_server, api_key_env=KEY_VAR), "url": f"{echo_server}/crash/v1", "type": "openai-completions"},
    ]
    plan = write_plan(tmp_path, models=models, datasets=[gsm_dataset("math", data), gsm_dataset("few", data, limit=3)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env[KEY_VAR] = KEY
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui"],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 1, printed  # deny and crash fail, as they must
    assert "good/math: scored, accuracy = 100.00" in printed
    wd = WorkDir(tmp_path / "out")
    # The echoed messages were recorded (so the test would see a leak), with the key masked.
    failures = "\n".join(p.read_text(errors="replace") for p in (wd.root / "logs").rglob("*") if p.is_file())
    assert "Incorrect API key provided: Bearer [redacted]" in failures and "flaky" in failures
    secret = KEY.encode()
    leaks = [str(p.relative_to(wd.root)) for p in every_file(wd.root) if secret in p.read_bytes()]
    assert leaks == []
    assert KEY not in printed
    assert KEY_VAR in (wd.plan_file).read_text()  # the plan names the variable, never its value


def test_a_key_with_a_line_break_is_refused_without_being_repeated(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(2))
    plan = write_plan(tmp_path, models=[chat("m", "http://127.0.0.1:9", api_key_env=KEY_VAR)], datasets=[gsm_dataset("d", data)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env[KEY_VAR] = KEY + "\r\n"
    proc = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"plan.toml: models[0].api_key_env: the value of environment variable {KEY_VAR}" in proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()


HOSTILE = ["..", ".", "../x", "a/../../b", "/etc", "~", "~root", "a\x00b", "con:", "x" * 101, "a\\..\\b", "-rf", " leading", "dot..", "\u2215etc"]


@pytest.mark.parametrize("abbr", HOSTILE)
def test_an_abbr_that_could_leave_the_work_dir_is_refused(tmp_path: Path, abbr: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(2))
    for models, datasets in (([chat(abbr, "http://127.0.0.1:9")], [gsm_dataset("d", data)]), ([chat("m", "http://127.0.0.1:9")], [gsm_dataset(abbr, data)])):
        path = write_plan(tmp_path, models=models, datasets=datasets)
        try:
            plan = load_plan(path)
        except PlanError as e:
            assert any(".abbr:" in p for p in e.problems)
            continue
        # Accepted (only harmless names are): every path it makes stays inside the work dir.
        assert_inside(WorkDir(tmp_path / "out"), plan.models[0].abbr, plan.datasets[0].abbr)


def assert_inside(wd: WorkDir, model: str, dataset: str) -> None:
    root = wd.root.resolve()
    paths = [
        wd.status_file(model, dataset), wd.status_file(model, dataset, 3, 4), wd.checkpoint_file(model, dataset),
        wd.checkpoint_file(model, dataset, 1, 2), wd.predictions_file(model, dataset), wd.result_file(model, dataset),
    ]
    for p in paths:
        resolved = p.resolve()
        assert resolved.is_relative_to(root), p
        assert resolved.parent.parent.parent == root  # <work_dir>/<kind>/<model>/<file>
        assert resolved.parent.name == model


def test_every_name_the_abbr_rule_accepts_stays_inside(tmp_path: Path) -> None:
    rng = random.Random(8)
    alphabet = string.ascii_letters + string.digits + "._-"
    names = ["a", "a..", "a.-_", "9", "x" * 100] + ["".join(rng.choices(alphabet, k=rng.randint(1, 100))) for _ in range(500)]
    accepted = [n for n in names if ABBR_RE.match(n)]
    assert len(accepted) > 250
    wd = WorkDir(tmp_path / "out")
    for name in accepted:
        assert name not in (".", "..") and "/" not in name
        assert_inside(wd, name, name)


def test_a_credential_in_a_custom_header_reaches_no_file(tmp_path: Path, sim_factory, echo_server: str) -> None:
    """Azure's `api-key`, or `x-api-key`, put in `headers`: not copied into the work dir's plan.toml,
    and masked where the echo server repeats it in a failure message."""
    from planmaker import run_plan

    secret = "DISTINCTIVE-hdr-" + "".join(random.Random(11).choices(string.ascii_letters, k=24))
    rows = arithmetic(4)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, models={"good": ModelProfile(accuracy=1.0)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    headers = {"x-api-key": secret, "x-trace": "visible-trace"}
    models = [
        chat("good", sim.url, headers=headers),
        {**chat("deny", echo_server, headers=headers, retry=0), "url": f"{echo_server}/deny/v1"},
    ]
    plan = write_plan(tmp_path, models=models, datasets=[gsm_dataset("math", data)])
    run_plan(plan)
    wd = WorkDir(tmp_path / "out")
    failures = "\n".join(p.read_text(errors="replace") for p in (wd.root / "logs").rglob("*") if p.is_file())
    assert "visible-trace" in failures  # the echoed headers were recorded, so a leak would show
    assert "[redacted]" in wd.plan_file.read_text() and "visible-trace" in wd.plan_file.read_text()
    leaks = [str(p.relative_to(wd.root)) for p in every_file(wd.root) if secret.encode() in p.read_bytes()]
    assert leaks == []


def test_a_key_beyond_ascii_reaches_no_file_in_any_form_the_server_echoes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_server: str) -> None:
    """A key with Cyrillic in it goes out as UTF-8; the echo server (http.server, as most servers
    read headers) reads it as Latin-1 and repeats it. It was masked only in its ASCII part
    (`Bearer sk-ÐºÐ»ÑÑ…[redacted]` in run.log, failures.jsonl, the sample log and the checkpoint):
    no 8 characters of the key, as sent or as the server read it, may stay anywhere."""
    from planmaker import run_plan

    wide = "sk-ключ-доступа-" + "".join(random.Random(13).choices(string.ascii_letters, k=16))
    monkeypatch.setenv(KEY_VAR, wide)
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(3))
    models = [{**chat("deny", echo_server, api_key_env=KEY_VAR, retry=0), "url": f"{echo_server}/deny/v1"}]
    plan = write_plan(tmp_path, models=models, datasets=[gsm_dataset("math", data)])
    code, events, _ = run_plan(plan)
    assert code == 1
    wd = WorkDir(tmp_path / "out")
    failures = (wd.logs_dir / "failures.jsonl").read_text(encoding="utf-8")
    assert "Incorrect API key provided: Bearer [redacted]" in failures  # recorded, so a leak would show
    raw = wide.encode()
    forms = (wide, raw.decode("latin-1"), json.dumps(raw.decode("latin-1"))[1:-1], " ".join(raw.decode("latin-1").split()))
    pieces = {form[i : i + 8] for form in forms for i in range(len(form) - 7)}
    texts = {str(p.relative_to(wd.root)): p.read_bytes().decode("utf-8", "replace") for p in every_file(wd.root)}
    texts["events"] = "\n".join(map(repr, events)) + "\n".join(map(str, events))
    leaks = sorted({name for name, text in texts.items() for piece in pieces if piece in text})
    assert leaks == []


class _EchoPage(_Quiet):
    """A proxy's error page (not JSON) that repeats the Authorization header after some text; the
    text grows by one character per request, so over the run the key straddles every cut point
    a failure message is shortened at. `/ok/` answers 200 with such a page (an unparseable reply)."""

    served: dict[bool, int] = {True: 0, False: 0}

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        self.rfile.read(int(self.headers.get("content-length") or 0))
        ok = "/ok/" in self.path
        self.served[ok] += 1
        # The key first ends well before the cut (200 characters of an unparseable reply, 500 of
        # an error), then moves past it one character per request.
        start = (80 if ok else 380) + self.served[ok]
        page = f"<html><body><h1>Bad gateway</h1>{'x' * start} Authorization: {self.headers.get('authorization')} (upstream gone)</body></html>"
        self.reply(200 if ok else 502, "text/html", page.encode())


def test_no_part_of_the_key_survives_where_a_long_error_page_is_cut_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure messages are shortened (a few hundred characters of the server's text): a key that
    straddles the cut must be masked before it, not leave its first characters on disk."""
    from planmaker import of_type, run_plan

    from evaltui.engine.stream import events as ev

    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv(KEY_VAR, KEY)
    try:
        data = write_jsonl(tmp_path / "d.jsonl", arithmetic(60))
        models = [
            {**chat("page", url, api_key_env=KEY_VAR, retry=0, max_workers=1), "url": f"{url}/page/v1"},
            {**chat("ok", url, api_key_env=KEY_VAR, retry=0, max_workers=1), "url": f"{url}/ok/v1"},
        ]
        code, events, _ = run_plan(write_plan(tmp_path, models=models, datasets=[gsm_dataset("math", data, fail_on_error=1.0)]))
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0  # every sample failed, as allowed: each one's message was recorded
    messages = [e.error.message for e in of_type(events, ev.SampleFailed)]
    assert len(messages) == 120 and any("Bearer [redacted]" in m for m in messages)
    secret = KEY[len("sk-evaltui-"):]  # the random part: any 8 characters of it would be a leak
    pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
    wd = WorkDir(tmp_path / "out")
    leaks = sorted({str(p.relative_to(wd.root)) for p in every_file(wd.root) for piece in pieces if piece.encode() in p.read_bytes()})
    assert leaks == []
    assert not [m for m in messages for piece in pieces if piece in m]


class _EchoParts(_Quiet):
    """Fails every request with a different part of the key it received, as servers do: OpenAI's
    first 12 characters (`sk-…****`), a prefix of 20, a suffix, a middle, the key URL-encoded (a
    proxy logging the URL it would have asked) and JSON-escaped (an error quoting a JSON dump),
    in a JSON 500 or a plain-text 502. Request n gets part n % 6."""

    served = [0]

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        from urllib.parse import quote

        self.rfile.read(int(self.headers.get("content-length") or 0))
        key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        parts = [f"{key[:12]}****", key[:20], key[-10:], key[14:24], quote(key, safe=""), json.dumps({"api_key": key})]
        n = self.served[0] = self.served[0] + 1
        message = f"Incorrect API key provided: {parts[n % len(parts)]}. See https://example.invalid/keys"
        if n % 2:
            self.reply(500, "application/json", json.dumps({"error": {"message": message}}).encode())
        else:
            self.reply(502, "text/plain", message.encode())


def test_no_eight_characters_of_the_key_survive_anywhere_when_a_server_echoes_parts_of_it(tmp_path: Path) -> None:
    from urllib.parse import quote

    odd_key = "sk-Tq8+Zr/Wm=Kp\"Hd\\Ux" + "".join(random.Random(12).choices(string.ascii_letters + string.digits, k=30))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoParts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        data = write_jsonl(tmp_path / "d.jsonl", arithmetic(24))
        models = [chat("parts", url, api_key_env=KEY_VAR, retry=0, max_workers=2)]
        plan = write_plan(tmp_path, models=models, datasets=[gsm_dataset("math", data, fail_on_error=1.0)])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {KEY_VAR: odd_key}
        proc = subprocess.run(
            [sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--json"],
            capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
        )
    finally:
        server.shutdown()
        server.server_close()
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 0, printed  # every sample failed, as fail_on_error allows
    wd = WorkDir(tmp_path / "out")
    failures = (wd.logs_dir / "failures.jsonl").read_text().splitlines()
    assert len(failures) == 24 and all("Incorrect API key provided: " in f and "[redacted]" in f for f in failures)  # recorded, masked
    forms = (odd_key, quote(odd_key, safe=""), json.dumps(odd_key)[1:-1])
    pieces = {form[i : i + 8] for form in forms for i in range(len(form) - 7)}
    assert not [piece for piece in pieces if piece in printed]
    leaks = sorted({str(p.relative_to(wd.root)) for p in every_file(wd.root) for piece in pieces if piece.encode() in p.read_bytes()})
    assert leaks == []
