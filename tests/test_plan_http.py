"""Plan checks for what goes on the wire: header names and values, the API key, the CA bundle.

A CR or LF in a header value (or in the key read from `api_key_env`) would let the rest of the
value inject headers of its own; it is refused when the plan loads, naming the field, with exit
code 2 and no traceback, and the key itself is never printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trustme

from evaltui.cli import main
from evaltui.plan import PlanError, load_plan

KEY_VAR = "EVALTUI_TEST_HTTP_KEY"


def write(folder: Path, **model: Any) -> Path:
    (folder / "q.jsonl").write_text('{"question": "1+1?", "answer": "2"}\n', encoding="utf-8")
    data = {
        "models": [{"abbr": "m", "type": "openai-chat", "url": "https://127.0.0.1:1/v1", "model": "x", **model}],
        "datasets": [{"abbr": "d", "path": "q.jsonl", "prompt": "{question}", "target": "{answer}"}],
    }
    path = folder / "http.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def refused(path: Path, capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    code = main([str(path), "--no-ui"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, f"{f!r} not in:\n{err}"
    return err


@pytest.mark.parametrize("value", ["eval\r\nX-Injected: 1", "eval\nX-Injected: 1", "a\rb", "nul\x00byte"], ids=["crlf", "lf", "cr", "nul"])
def test_header_value_with_a_line_break_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    refused(write(tmp_path, headers={"X-Team": value}), capsys, "http.toml: models[0].headers.X-Team:", "must be one line")


def test_header_name_that_is_not_a_token_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(write(tmp_path, headers={"X Team\r\nX-Evil": "1"}), capsys, "models[0].headers.X Team\\r\\nX-Evil:", "not a valid header name")


@pytest.mark.parametrize("key", ["sk-secret\r\nX-Injected: 1", "sk-secret\n"], ids=["crlf", "trailing-newline"])
def test_api_key_with_a_line_break_is_refused_without_printing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv(KEY_VAR, key)
    err = refused(write(tmp_path, api_key_env=KEY_VAR), capsys, "models[0].api_key_env:", KEY_VAR, "line break")
    assert "sk-secret" not in err


def test_tab_in_a_header_value_and_a_clean_key_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-fine")
    plan = load_plan(write(tmp_path, headers={"X-Team": "a\tb"}, api_key_env=KEY_VAR))
    assert plan.models[0].headers == {"X-Team": "a\tb"}


def test_ca_file_is_relative_to_the_plan_and_must_be_a_ca_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    plan = load_plan(write(tmp_path, ca_file="ca.pem"))
    assert plan.models[0].ca_file == str(tmp_path / "ca.pem")

    refused(write(tmp_path, ca_file="missing.pem"), capsys, "models[0].ca_file:", "missing.pem", "not found")
    (tmp_path / "junk.pem").write_text("not a certificate\n", encoding="utf-8")
    with pytest.raises(PlanError) as e:
        load_plan(write(tmp_path, ca_file="junk.pem"))
    assert "models[0].ca_file:" in str(e.value) and "not a PEM bundle" in str(e.value)


def test_stream_in_generation_kwargs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(write(tmp_path, generation_kwargs={"max_new_tokens": 8, "stream": True}), capsys, "models[0].generation_kwargs.stream:", "remove stream")


def test_credentials_in_the_url_are_refused_without_printing_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(write(tmp_path, url="https://user:hunter2@api.example.test/v1"), capsys, "models[0].url: holds credentials", "api_key_env")
    assert "hunter2" not in err


@pytest.mark.parametrize("query", ["key=AIzaSECRET", "api_key=SECRET", "x=1&access_token=SECRET", "SIG=SECRET"])
def test_a_credential_in_the_urls_query_is_refused_without_being_repeated(tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str) -> None:
    """The plan is copied into the work dir: a key written into the URL would land on disk."""
    err = refused(write(tmp_path, url=f"https://127.0.0.1:1/v1?{query}"), capsys, "models[0].url:", "holds a credential", "api_key_env")
    assert "SECRET" not in err


def test_a_query_that_holds_no_credential_is_accepted(tmp_path: Path) -> None:
    """Azure's endpoints take `?api-version=`; words that merely contain "token" are not keys."""
    plan = load_plan(write(tmp_path, url="https://127.0.0.1:1/openai/v1?api-version=2024-06-01&max_tokens=5"))
    assert plan.models[0].url.endswith("?api-version=2024-06-01&max_tokens=5")
