"""A work dir's plan.toml is tomli_w's text of the plan's snapshot, byte for byte, however
dumps_snapshot makes it (each kind of dataset table written once, its abbr and path put in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from evaltui.plan import load_plan
from evaltui.plan.snapshot import dumps_snapshot

ODD = ['say "hi"', "back\\slash", "tab\there", "new\nline", "nul\x00del\x7f", "ünïcödé ✓", "", "[[datasets]]", "a = 1"]


def _plan(tmp_path: Path, datasets: list[dict[str, Any]]) -> dict[str, Any]:
    (tmp_path / "d.jsonl").write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    data = {"title": "t", "models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": datasets}
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return load_plan(path, check_data=False).snapshot()


def _dataset(i: int, **extra: Any) -> dict[str, Any]:
    return {"abbr": f"d{i}", "path": "d.jsonl", "prompt": "{question}", "target": "{answer}", **extra}


@pytest.mark.parametrize("odd", ODD)
def test_the_snapshot_text_is_tomli_ws_for_any_abbr_and_path(tmp_path: Path, odd: str) -> None:
    snap = _plan(tmp_path, [_dataset(i) for i in range(3)])
    snap["datasets"][1]["abbr"] = odd
    snap["datasets"][2]["path"] = odd
    assert dumps_snapshot(snap) == tomli_w.dumps(snap)


def test_datasets_of_several_kinds_keep_their_own_settings_and_order(tmp_path: Path) -> None:
    kinds = [_dataset(0), _dataset(1, limit=2), _dataset(2), _dataset(3, evaluator={"type": "gsm8k"}), _dataset(4, stop=["\n\n", "Q:"]), _dataset(5, limit=2)]
    snap = _plan(tmp_path, kinds)
    text = dumps_snapshot(snap)
    assert text == tomli_w.dumps(snap)
    assert [d.abbr for d in load_plan(_written(tmp_path, text), check_data=False).datasets] == [f"d{i}" for i in range(6)]


def test_what_it_cannot_vouch_for_is_tomli_ws_too() -> None:
    small = {"models": [{"abbr": "m"}], "datasets": [{"abbr": "a", "path": "p"}, {"abbr": "b", "path": "q"}]}  # fits inline
    not_last = {"datasets": [{"abbr": "a", "path": "p", "x": 1}], "models": [{"abbr": "m"}]}
    no_path = {"models": [{"abbr": "m"}], "datasets": [{"abbr": "a", "long": "x" * 200}]}
    big_int = {"models": [{"abbr": "m"}], "datasets": [{"abbr": "a", "path": "p", "n": 2**70, "long": "x" * 200}]}
    alone = {"datasets": [{"abbr": "a", "path": "p", "long": "x" * 200}]}  # nothing before the datasets' tables
    for data in (small, not_last, no_path, big_int, alone, {"models": [{"abbr": "m"}], "datasets": []}):
        assert dumps_snapshot(data) == tomli_w.dumps(data)


def _written(folder: Path, text: str) -> Path:
    path = folder / "again.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_snapshot_to_write_is_the_plans_snapshot(tmp_path: Path) -> None:
    """snapshot_to_write dumps each kind of dataset table once: the same data as snapshot(), in
    the same order (so the same text), for kinds repeated, interleaved and alone, paths through
    a link or another folder, and a model whose secret header is redacted."""
    from evaltui.plan.snapshot import snapshot_to_write

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "e.jsonl").write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    kinds = [{}, {"limit": 2}, {"evaluator": {"type": "gsm8k"}}, {"stop": ["\n\n", "Q:"], "epochs": 2}, {"evaluator": {"type": "gsm8k", "timeout": 5.0}}]
    datasets = [_dataset(i, **kinds[i * 7 % len(kinds)]) for i in range(12)]
    datasets[3]["path"] = "linked/e.jsonl"
    datasets[5]["path"] = str(tmp_path / "real" / "e.jsonl")
    (tmp_path / "d.jsonl").write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    models = [{"abbr": "m", "type": "openai-chat", "model": "x", "url": "http://127.0.0.1:1/v1", "headers": {"X-Api-Key": "secret", "X-Team": "t"}}]
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps({"title": "t", "models": models, "datasets": datasets}), encoding="utf-8")
    plan = load_plan(path, check_data=False)
    expected, got = plan.snapshot(), snapshot_to_write(plan)
    assert got == expected
    assert [list(d) for d in got["datasets"]] == [list(d) for d in expected["datasets"]] and list(got) == list(expected)
    assert dumps_snapshot(got) == dumps_snapshot(expected) == tomli_w.dumps(expected)
    assert got["models"][0]["headers"]["X-Api-Key"] != "secret"
    assert got["datasets"][3]["path"] == str((tmp_path / "real" / "e.jsonl").resolve())
