"""Reasoning models (issue 27): a server's `reasoning_content` (vLLM, SGLang, DeepSeek; `reasoning`
on some servers), sent beside the answer's content or streamed in deltas before it, is kept in the
per-sample log and shown by `evaltui show` and the report — never scored as part of the answer.
Every request is real HTTP to the project's simulator on 127.0.0.1, whose model profile sends it."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser import dump_dom, needs_chromium
from planmaker import chat, run_plan, write_jsonl, write_plan
from test_ui_app import until, until_run_ends

from evaltui.cli import main
from evaltui.commands.report.rows import row
from evaltui.sim import AnswerKey, ModelProfile, SimConfig

# The thinking names wrong numbers: were any of it read as the answer, `exact` would score it wrong.
THOUGHT = "Let me add. Maybe 99? No, 98 is wrong too; I will answer plainly."


def _rows(n: int = 4) -> list[dict[str, Any]]:
    return [{"question": f"what is {i} + 7?", "answer": str(i + 7)} for i in range(n)]


def _key(rows: list[dict[str, Any]]) -> AnswerKey:
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    return key


def _dataset(tmp_path: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"abbr": "d", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "exact"}}


def _log(root: Path, model: str = "m", dataset: str = "d") -> list[dict[str, Any]]:
    lines = (root / "logs" / "samples" / model / f"{dataset}.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return sorted((r for r in records if "index" in r), key=lambda r: r["index"])  # (the first line names the version)


def _run(tmp_path: Path, sim_factory: Any, field: str = "reasoning_content", run: dict[str, Any] | None = None, **model: Any) -> Path:
    rows = _rows()
    sim = sim_factory(SimConfig(answer_key=_key(rows), models={"m": ModelProfile(reasoning=THOUGHT, reasoning_field=field)}))
    code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", sim.url, **model)], datasets=[_dataset(tmp_path, rows)], run=run))
    assert code == 0
    return runner.workdir.root


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_the_servers_reasoning_is_logged_and_never_scored(tmp_path: Path, sim_factory: Any, stream: bool, field: str) -> None:
    root = _run(tmp_path, sim_factory, field, stream=stream)
    result = json.loads((root / "results" / "m" / "d.json").read_text())
    assert result["accuracy"] == 100.0  # the thinking's 99 and 98 are not the answer
    assert [d["prediction"] for d in result["details"]] == [str(i + 7) for i in range(4)]
    log = _log(root)
    assert [r["answer"] for r in log] == [str(i + 7) for i in range(4)]
    assert all(r["reasoning_content"] == THOUGHT for r in log)  # streamed: every delta's piece, joined in order
    assert all(("ttft" in r) == stream for r in log)
    for path in [*(root / "predictions").rglob("*"), *(root / "checkpoints").rglob("*")]:  # nothing scored or resumed holds it
        assert not path.is_file() or "Maybe 99" not in path.read_text(errors="replace")


def test_the_simulator_streams_the_thinking_a_delta_per_token_before_the_answer(sim_factory: Any) -> None:
    """What the streamed test above accumulates: several `reasoning_content` deltas, then content."""
    sim = sim_factory(SimConfig(answer_key=_key(_rows(1)), models={"m": ModelProfile(reasoning=THOUGHT)}))
    body = {"model": "m", "messages": [{"role": "user", "content": "what is 0 + 7?"}], "stream": True}
    req = urllib.request.Request(f"{sim.url}/m/v1/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as reply:
        events = [line[6:] for line in reply.read().decode().splitlines() if line.startswith("data: ")]
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1] if json.loads(e)["choices"]]
    thinking = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    assert len(thinking) > 5 and "".join(thinking) == THOUGHT
    first_content = next(k for k, d in enumerate(deltas) if d.get("content"))
    assert first_content == len(thinking) and "".join(d.get("content") or "" for d in deltas) == "7"


def test_without_the_per_sample_log_the_answer_is_the_same(tmp_path: Path, sim_factory: Any) -> None:
    """sample_log = false: no trace, the reasoning is not looked for; the answer is still the content alone."""
    root = _run(tmp_path, sim_factory, run={"sample_log": False})
    result = json.loads((root / "results" / "m" / "d.json").read_text())
    assert result["accuracy"] == 100.0 and not (root / "logs" / "samples" / "m" / "d.jsonl").exists()


def test_a_model_without_reasoning_logs_none(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(2)
    sim = sim_factory(SimConfig(answer_key=_key(rows)))
    code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", sim.url)], datasets=[_dataset(tmp_path, rows)]))
    assert code == 0 and all("reasoning_content" not in r for r in _log(runner.workdir.root))
    assert main(["show", str(runner.workdir.root), "--full"]) == 0
    assert "reasoning:" not in capsys.readouterr().out


def test_show_prints_the_reasoning_before_the_answer(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    root = _run(tmp_path, sim_factory, stream=True)
    assert main(["show", str(root), "--full", "--limit", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"      reasoning: {THOUGHT}" in lines and "      answer: 7" in lines
    assert lines.index(f"      reasoning: {THOUGHT}") < lines.index("      answer: 7")
    assert main(["show", str(root), "--export", "json"]) == 0  # the export carries the log's field
    exported = json.loads(capsys.readouterr().out)
    assert THOUGHT in json.dumps(exported)


def test_a_conversations_answers_each_keep_their_reasoning(tmp_path: Path, sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    key = AnswerKey()
    key.add_gen("first?", "one")
    key.add_gen("second?", "two")
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(reasoning=THOUGHT)}))
    ds = {"abbr": "d", "path": str(write_jsonl(tmp_path / "d.jsonl", [{"turns": ["first?", "second?"], "ref": "two"}])), "turns": "turns", "target": "{ref}"}
    code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", sim.url)], datasets=[ds]))
    assert code == 0
    (record,) = _log(runner.workdir.root)
    answers = [m for m in record["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in answers] == ["one", "two"] and all(m["reasoning_content"] == THOUGHT for m in answers)
    assert record["answer"] == "two" and "reasoning_content" not in record  # each answer's own, in its message
    assert main(["show", str(runner.workdir.root), "--full"]) == 0
    assert capsys.readouterr().out.count(f"      reasoning: {THOUGHT}") == 2


def test_the_reports_row_carries_the_reasoning() -> None:
    assert row({"index": 0, "answer": "7", "reasoning_content": THOUGHT})["rc"] == THOUGHT
    assert "rc" not in row({"index": 0, "answer": "7"})


@needs_chromium
def test_the_reports_sample_browser_shows_the_reasoning(tmp_path: Path, sim_factory: Any) -> None:
    root = _run(tmp_path, sim_factory)
    out = tmp_path / "report.html"
    assert main(["report", str(root), "-o", str(out)]) == 0
    cards = dump_dom(out).one(id="sample-list").all("details", class_="sample")
    assert len(cards) == 4 and all(THOUGHT in c.text for c in cards)
    found = dump_dom(out, "q=maybe 99")  # the search reads it too
    assert len(found.one(id="sample-list").all("details", class_="sample")) == 4


def test_serve_sim_takes_the_reasoning_for_every_model() -> None:
    import argparse

    from evaltui.sim.cli import add_arguments, config_from_args, parse_model_spec

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args(["--reasoning", THOUGHT, "--reasoning-field", "reasoning", "--model", "named:accuracy=0.5"]))
    assert parse_model_spec("named:accuracy=0.5")[0] == "named"
    for profile in (config.default, config.models["named"]):
        assert (profile.reasoning, profile.reasoning_field) == (THOUGHT, "reasoning")
    with pytest.raises(ValueError, match="reasoning_field"):
        ModelProfile(reasoning_field="thinking")


def test_streamed_thinking_is_timed_as_generated_tokens_and_handed_to_the_trace() -> None:
    """vLLM streams the thinking first: its first piece is the first token the server generated
    (times here are the events' own, given, not measured)."""
    from evaltui.backends import Trace
    from evaltui.backends.openai import _ChatStream

    trace = Trace()
    stream = _ChatStream(lambda: 0.0, trace=trace)
    pieces = [{"reasoning_content": "Maybe 99? ", "content": None}, {"reasoning_content": "No.", "content": None}, {"content": "7", "reasoning_content": None}]
    for at, delta in enumerate(pieces, start=1):
        stream.event(json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}), float(at))
    stream.event("[DONE]", 4.0)
    assert trace.reasoning is None  # nothing handed over before the answer is whole
    assert stream.answer() == "7" and trace.reasoning == "Maybe 99? No."
    assert stream.timings(0.0) == (1.0, 1.0) and stream.tokens() == 3


def test_the_details_screen_shows_the_reasoning_beside_the_attempts(tmp_path: Path, sim_factory: Any) -> None:
    import asyncio

    from textual.widgets import DataTable

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan
    from evaltui.ui.app import EvalApp
    from evaltui.ui.screens.details import DetailsScreen

    rows = _rows()
    sim = sim_factory(SimConfig(answer_key=_key(rows), models={"m": ModelProfile(reasoning=THOUGHT)}))
    runner = Runner(load_plan(write_plan(tmp_path, models=[chat("m", sim.url)], datasets=[_dataset(tmp_path, rows)])))

    async def scenario() -> None:
        app = EvalApp(runner, theme="evaltui-dark")
        async with app.run_test(size=(200, 40)) as pilot:
            await until_run_ends(pilot, app, settle=0)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen) and app.screen.query_one("#details-body").display, "the details")
            records = app.screen.query_one("#details-records", DataTable)
            assert [str(c.label) for c in records.columns.values()][-1] == "reasoning"
            assert records.row_count == 4 and all(str(records.get_row_at(k)[-1]) == THOUGHT for k in range(4))

    asyncio.run(scenario())
