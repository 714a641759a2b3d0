"""A loopback stand-in for the Hugging Face Hub's file endpoints, for the benchmark data tests.

It answers what huggingface_hub asks to download a dataset's files — the revision's commit
(`/api/datasets/<repo>/revision/<rev>`), its file tree (`/api/datasets/<repo>/tree/<rev>`), each
file's metadata and bytes (`HEAD`/`GET /datasets/<repo>/resolve/<rev>/<path>`) — for the repos
it is given, and refuses a gated repo's files without the token it is told. Every request is
recorded (path, and the Authorization header). Tests point HF_ENDPOINT at it and HF_HOME at a
temporary folder: the real Hub is never asked.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


class FakeHub(ThreadingHTTPServer):
    def __init__(self, repos: dict[str, dict[str, bytes]], gated: dict[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = repos
        self.gated = gated or {}  # repo → the token it wants
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, authorization)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def file_gets(self) -> list[str]:
        with self.lock:
            return [p for m, p, _ in self.requests if m == "GET" and "/resolve/" in p]


class _Handler(BaseHTTPRequestHandler):
    server: FakeHub

    def _route(self, method: str) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.server.lock:
            self.server.requests.append((method, path, self.headers.get("authorization")))
        for repo, files in self.server.repos.items():
            if repo in self.server.gated and self.headers.get("authorization") != f"Bearer {self.server.gated[repo]}":
                if f"/{repo}/" in path:
                    return self._json(401, {"error": "Access to this dataset is restricted."}, {"X-Error-Code": "GatedRepo"}, method)
            if path.startswith(f"/api/datasets/{repo}/revision/"):
                siblings = [{"rfilename": name} for name in files]
                return self._json(200, {"id": repo, "sha": COMMIT, "siblings": siblings, "private": False}, {}, method)
            if path.startswith(f"/api/datasets/{repo}/tree/"):
                tree = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()} for name, data in files.items()]
                return self._json(200, tree, {}, method)
            prefix = f"/datasets/{repo}/resolve/"
            if path.startswith(prefix):
                name = path[len(prefix):].split("/", 1)[1]
                if name not in files:
                    return self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}, method)
                return self._file(files[name], method)
        self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}, method)

    def _file(self, data: bytes, method: str) -> None:
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.send_header("etag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("x-repo-commit", COMMIT)
        self.send_header("content-type", "application/octet-stream")
        self.end_headers()
        if method == "GET":
            self.wfile.write(data)

    def _json(self, status: int, obj: Any, headers: dict[str, str], method: str) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-repo-commit", COMMIT)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if method == "GET":
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook
        self._route("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._route("HEAD")

    def log_message(self, *args: object) -> None:
        return


@contextmanager
def fake_hub(repos: dict[str, dict[str, bytes]], gated: dict[str, str] | None = None) -> Iterator[FakeHub]:
    srv = FakeHub(repos, gated)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
