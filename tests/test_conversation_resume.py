"""A conversation's requests are units of their own on disk: a run killed with SIGKILL between two
turns re-sends only the request that was not answered, epochs repeat whole conversations, and
what each request sent and got back is kept for `evaltui show`, the details screen and the
report. Against the simulator on 127.0.0.1, which keeps every request's body."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from browser import dump_dom, needs_chromium
from planmaker import chat, of_type, run_plan, write_jsonl, write_plan
from watchkit import follow_to_end, start_writer

from evaltui.cli import main
from evaltui.commands.report.rows import row
from evaltui.engine.disk.predictions import read_predictions
from evaltui.engine.disk.records import WorkDirView
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.state import RunState
from evaltui.headless import summary_json
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig
from evaltui.sim.thread import SimThread

TURNS = 3


def talk(n: int) -> tuple[AnswerKey, list[dict[str, Any]]]:
    """n conversations of TURNS user turns, the simulator's answer to each turn known."""
    key = AnswerKey()
    rows = []
    for i in range(n):
        for k in range(TURNS):
            key.add_gen(f"q{i}-{k}?", f"a{i}-{k}")
        rows.append({"turns": [f"q{i}-{k}?" for k in range(TURNS)], "ref": f"a{i}-{TURNS - 1}"})
    return key, rows


def dataset(tmp_path: Path, rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {"abbr": "mt", "path": str(write_jsonl(tmp_path / "d.jsonl", rows)), "turns": "turns", "system": "Be brief.", "target": "{ref}", **kw}


def sent(server: SimThread) -> list[list[dict[str, Any]]]:
    """The messages of each request the server got, in order."""
    return [r.body["messages"] for r in server.server.stats.log if r.body is not None]


def asked(messages: list[dict[str, Any]]) -> str:
    """Which turn a request is (`q3-1?`): its last user message."""
    return str(messages[-1]["content"])


def turn_lines(root: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((root / "predictions").rglob("tmp_*.jsonl")):
        for raw in path.read_bytes().splitlines():
            if raw.startswith(b'{"turn":'):
                lines.append(json.loads(raw))
    return lines


def finished_units(root: Path) -> set[tuple[int, int]]:
    """The (sample, epoch) units a checkpoint has an answer of."""
    units = set()
    for path in sorted((root / "predictions").rglob("tmp_*.jsonl")):
        for raw in path.read_bytes().splitlines():
            if raw.startswith(b'{"index":') and b'"error":{' not in raw:
                line = json.loads(raw)
                units.add((line["index"], line.get("epoch", 0)))
    return units


def conversation(i: int, k: int) -> list[dict[str, str]]:
    """Sample i's messages up to its turn k's question."""
    said = []
    for j in range(k):
        said += [{"role": "user", "content": f"q{i}-{j}?"}, {"role": "assistant", "content": f"a{i}-{j}"}]
    return [*said, {"role": "user", "content": f"q{i}-{k}?"}]


def test_a_kill_9_between_turns_re_sends_only_the_request_not_answered(tmp_path: Path) -> None:
    """A real evaltui process, killed with SIGKILL as soon as one conversation's first answers are
    on disk (the simulator takes 0.3 s a request, so its next one is in flight): the re-run sends
    no request whose answer the killed run had written, goes on from the next one with the whole
    conversation so far, and ends as an uninterrupted run would (two epochs: each a whole
    conversation of its own)."""
    key, rows = talk(4)
    with SimThread(SimConfig(answer_key=key, record_bodies=True, default=ModelProfile(latency=0.3))) as server:
        plan = write_plan(tmp_path, models=[chat("m", server.url, max_workers=4)], datasets=[dataset(tmp_path, rows, epochs=2)])
        root = tmp_path / "out"
        log = open(tmp_path / "killed.log", "wb")  # noqa: SIM115 - the child's output, read when the test fails
        proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 60
            while not turn_lines(root) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert proc.poll() is None, f"the run ended before a turn was on disk (exit {proc.returncode}); see {log.name}"
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            log.close()
        time.sleep(0.5)  # the requests the killed run had out reach the server's log
        written, done = turn_lines(root), finished_units(root)
        answered = {(t["index"], t.get("epoch", 0), t["turn"]) for t in written}
        assert answered and all(t["answer"] == f"a{t['index']}-{t['turn']}" for t in written)
        before = len(sent(server))
        code, events, runner = run_plan(plan)
        again = sent(server)[before:]
    assert code == 0 and float(of_type(events, ev.DatasetScored)[0].score) == 100.0
    # the re-run asked each turn of each unfinished (sample, epoch) that the killed run had not
    # answered, once, and nothing else: not one request whose answer was on disk
    expected = Counter(
        f"q{i}-{k}?" for i in range(4) for e in range(2) for k in range(TURNS) if (i, e) not in done and (i, e, k) not in answered
    )
    assert Counter(asked(m) for m in again) == expected
    assert sum(expected.values()) < 4 * 2 * TURNS  # the kill did cut a conversation short
    for m in again:  # each with the whole conversation so far, the killed run's answers in it
        k = int(asked(m).rsplit("-", 1)[1].rstrip("?"))
        i = asked(m)[1 : asked(m).index("-")]
        assert m == [{"role": "system", "content": "Be brief."}, *conversation(int(i), k)]
    entries = read_predictions(runner.workdir.root / "predictions" / "m" / "mt.json")
    assert entries is not None and len(entries) == 4
    for e in entries:
        assert [[t["answer"] for t in turns] for turns in e["epoch_turns"]] == [[f"a{e['index']}-{k}" for k in range(TURNS)]] * 2
    # the per-sample log says which answers an earlier run gave
    first = next(iter(answered))
    record = next(r for r in WorkDirView(runner.workdir.root).records("m", "mt") if (r["index"], r["epoch"]) == first[:2])
    assistants = [m for m in record["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in assistants] == [f"a{first[0]}-{k}" for k in range(TURNS)]
    assert assistants[first[2]].get("earlier") is True and not assistants[-1].get("earlier")


def test_epochs_repeat_whole_conversations_and_progress_counts_requests(tmp_path: Path) -> None:
    """Two workers: a conversation holds its worker from its first request to its last, so no
    more than two requests are ever out at once, whatever the turns."""
    key, rows = talk(3)
    with SimThread(SimConfig(answer_key=key, record_bodies=True, default=ModelProfile(latency=0.02))) as server:
        code, events, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url, max_workers=2)], datasets=[dataset(tmp_path, rows, epochs=2)]))
        bodies = sent(server)
        most = server.server.stats.max_in_flight
    assert code == 0 and 1 <= most <= 2
    assert len(bodies) == 3 * 2 * TURNS
    for i in range(3):
        # each epoch asks turn 1 after its own turn 0, and turn 2 after both: twice each, whole
        for k in range(TURNS):
            mine = [m for m in bodies if asked(m) == f"q{i}-{k}?"]
            assert len(mine) == 2 and all(len(m) == 2 + 2 * k for m in mine)
    state = RunState()
    for e in events:
        state.apply(e)
    pair = state.pair("m", "mt")
    assert pair.completed == 6 and pair.requests == 18 and pair.conversation
    finished = of_type(events, ev.RunFinished)[0]
    assert summary_json(state, finished)["pairs"][0]["requests"] == 18


def test_show_the_details_and_the_report_have_each_message_of_a_conversation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, rows = talk(2)
    with SimThread(SimConfig(answer_key=key)) as server:
        code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows)]))
    assert code == 0
    root = runner.workdir.root
    record = next(r for r in WorkDirView(root).records("m", "mt") if r["index"] == 1)
    said = [(m["role"], m["content"]) for m in record["messages"]]
    assert said == [("system", "Be brief."), ("user", "q1-0?"), ("assistant", "a1-0"), ("user", "q1-1?"), ("assistant", "a1-1"), ("user", "q1-2?"), ("assistant", "a1-2")]
    answers = [m for m in record["messages"] if m["role"] == "assistant"]
    assert all(m["took"] >= 0 and m["usage"]["completion_tokens"] > 0 for m in answers)  # each request's own time and tokens
    assert row(record)["m"] == record["messages"]  # the report's sample browser shows them (report.js: "conversation")
    assert main(["show", str(root), "--full"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("#1 "):]
    said_in_order = ("      system: Be brief.", "      user: q1-0?", "): a1-0", "      user: q1-1?", "): a1-1", "      user: q1-2?", "): a1-2", "      answer: a1-2")
    at = [block.index(f"{text}\n") for text in said_in_order]
    assert at == sorted(at) and block.count("      assistant (") == TURNS and "+1 tokens): a1-0" in block


def test_a_record_without_a_log_line_shows_the_turns_its_checkpoint_kept(tmp_path: Path) -> None:
    key, rows = talk(1)
    with SimThread(SimConfig(answer_key=key)) as server:
        plan = write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows)], run={"sample_log": False})
        code, _, runner = run_plan(plan)
    assert code == 0
    (record,) = WorkDirView(runner.workdir.root).records("m", "mt")
    assert [m["content"] for m in record["messages"]] == ["q0-0?", "a0-0", "q0-1?", "a0-1", "q0-2?", "a0-2"]


def test_the_inspect_export_has_each_message_of_a_conversation(tmp_path: Path) -> None:
    log_api = pytest.importorskip("inspect_ai.log", reason="the inspect export needs inspect_ai (pip install 'evaltui[inspect]')")
    key, rows = talk(2)
    with SimThread(SimConfig(answer_key=key)) as server:
        code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows)]))
    assert code == 0
    out = tmp_path / "logs"
    assert main(["show", str(runner.workdir.root), "--export", "inspect", "-o", str(out)]) == 0
    (info,) = log_api.list_eval_logs(str(out))
    samples = {s.id: s for s in log_api.read_eval_log(info).samples or []}
    said = [(m.role, m.text) for m in samples[1].messages]
    assert said == [("system", "Be brief."), ("user", "q1-0?"), ("assistant", "a1-0"), ("user", "q1-1?"), ("assistant", "a1-1"), ("user", "q1-2?"), ("assistant", "a1-2")]
    assert [(m.role, m.text) for m in samples[1].input] == said[:2]  # what it opened with
    assert samples[1].output.completion == "a1-2"


def test_the_details_screen_shows_each_message_with_its_time_and_tokens(tmp_path: Path) -> None:
    from textual.app import App
    from textual.widgets import DataTable

    from evaltui.engine.disk.details import read_pair_details
    from evaltui.engine.stream.events import PairStatus
    from evaltui.ui.screens.details import DetailsScreen

    key, rows = talk(1)
    with SimThread(SimConfig(answer_key=key)) as server:
        code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows)]))
    assert code == 0
    screen = DetailsScreen("m", "mt", lambda: read_pair_details(runner.workdir, runner.plan, "m", "mt", PairStatus.SCORED))

    async def shown() -> list[list[str]]:
        async with App().run_test(size=(160, 50)) as pilot:
            await pilot.app.push_screen(screen)
            for _ in range(200):  # the details are read in a thread: at most 10 s
                if screen.query_one("#details-body").display:
                    break
                await pilot.pause(0.05)
            table = screen.query_one("#details-messages", DataTable)
            return [[str(c) for c in table.get_row_at(k)] for k in range(table.row_count)]

    cells = anyio.run(shown)
    assert [(c[1], c[4]) for c in cells] == [("system", "Be brief."), ("user", "q0-0?"), ("assistant", "a0-0"), ("user", "q0-1?"), ("assistant", "a0-1"),
                                             ("user", "q0-2?"), ("assistant", "a0-2")]
    assert all(c[2].endswith("s") and "+" in c[3] for c in cells if c[1] == "assistant")  # each request's time and tokens


def test_a_failed_conversation_goes_on_from_its_failed_request_when_run_again(tmp_path: Path) -> None:
    """The server refuses each conversation's third request (a 400: the conversation has grown
    past its prompt limit), so every sample fails there with two answers on disk; the server
    fixed, a re-run sends the third requests alone, with the first two answers in them."""
    key, rows = talk(2)
    with SimThread(SimConfig(answer_key=key, record_bodies=True, faults=Faults(max_prompt_chars=30))) as server:
        plan = write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows, fail_on_error=1.0)])
        code, events, _ = run_plan(plan)
        assert [f.error.status for f in of_type(events, ev.SampleFailed)] == [400, 400]
        assert sorted(asked(m) for m in sent(server)) == sorted(f"q{i}-{k}?" for i in range(2) for k in range(TURNS))
        before = len(sent(server))
        server.call(lambda s: setattr(s.config, "faults", Faults()))
        code, events, _ = run_plan(plan)
        again = sent(server)[before:]
    assert code == 0 and float(of_type(events, ev.DatasetScored)[0].score) == 100.0
    assert sorted(asked(m) for m in again) == ["q0-2?", "q1-2?"]
    assert all(m == [{"role": "system", "content": "Be brief."}, *conversation(int(asked(m)[1]), 2)] for m in again)


@needs_chromium
def test_the_reports_sample_browser_shows_the_conversation(tmp_path: Path) -> None:
    key, rows = talk(2)
    with SimThread(SimConfig(answer_key=key)) as server:
        code, _, runner = run_plan(write_plan(tmp_path, models=[chat("m", server.url)], datasets=[dataset(tmp_path, rows)]))
    assert code == 0
    page = tmp_path / "report.html"
    assert main(["report", str(runner.workdir.root), "-o", str(page)]) == 0
    cards = dump_dom(page).one(id="sample-list").all("details", class_="sample")
    card = next(c for c in cards if c.attrs["data-index"] == "1")
    turns = [t.text for t in card.all("div", class_="turn")]
    assert turns == ["systemBe brief.", "userq1-0?", "assistanta1-0", "userq1-1?", "assistanta1-1", "userq1-2?", "assistanta1-2"]


def test_evaltui_watch_counts_a_conversations_requests_as_the_run_sends_them(tmp_path: Path) -> None:
    """A run in another process, followed from before it begins: each request answered is
    counted as its turn line comes, the conversations' last ones with their units."""
    key, rows = talk(4)
    with SimThread(SimConfig(answer_key=key, default=ModelProfile(latency=0.05))) as server:
        plan = write_plan(tmp_path, models=[chat("m", server.url, max_workers=2)], datasets=[dataset(tmp_path, rows, epochs=2)])
        (tmp_path / "out").mkdir()
        writer: list[subprocess.Popen[bytes]] = []

        def start(_: Any) -> None:
            if not writer:
                writer.append(start_writer(plan, tmp_path / "writer.log"))  # once the follower is waiting

        followed, events, follower = follow_to_end(tmp_path / "out", during=start)
        assert writer[0].wait(timeout=60) == 0, (tmp_path / "writer.log").read_text()
    watched = follower.state.pairs[("m", "mt")]
    assert followed == 0 and watched.completed == 8
    # the requests shown beside the conversations: those seen answered since the follower's first
    # look (all of them, unless the writer got some written before it), each once
    turns = [(e.sample_index, e.epoch, e.turn) for e in of_type(events, ev.TurnAnswered)]
    assert turns and len(set(turns)) == len(turns) and all(t < TURNS - 1 for _, _, t in turns)
    assert watched.conversation and watched.completed < watched.requests <= 8 * TURNS


def test_the_request_rate_holds_across_a_conversations_turns() -> None:
    """Every request of a conversation takes its token of the model's rate: three conversations
    of two turns at 4 requests a second are six tokens, 1.25 s of the bucket's (fake) time."""
    from test_backends import FakeClock

    from evaltui.backends import TokenBucket, make_backend, make_client
    from evaltui.conversation import Script, user
    from evaltui.engine.unit.conversing import TurnLog, converse
    from evaltui.plan import DatasetConfig, ModelConfig

    key = AnswerKey()
    for i in range(3):
        key.add_gen(f"q{i}-0?", f"a{i}-0")
        key.add_gen(f"q{i}-1?", f"a{i}-1")
    clock = FakeClock()
    ds = DatasetConfig.model_validate({"abbr": "mt", "path": "d.jsonl", "turns": "turns", "target": ""})
    with SimThread(SimConfig(answer_key=key, record_bodies=True)) as server:
        cfg = ModelConfig.model_validate({"abbr": "m", "type": "openai-chat", "url": f"{server.url}/m/v1", "model": "m", "rate_per_worker": 4.0})

        async def three() -> list[str]:
            answers = [""] * 3
            async with make_client(cfg) as client:
                backend = make_backend(cfg, client, bucket=TokenBucket(cfg.rate_per_worker, clock=clock, sleep=clock.sleep))

                async def one(i: int) -> None:
                    answers[i] = await converse(backend, ds, Script((user(f"q{i}-0?"),), (f"q{i}-1?",)), 0, TurnLog(), None)

                async with anyio.create_task_group() as tg:
                    for i in range(3):
                        tg.start_soon(one, i)
            return answers

        assert anyio.run(three) == ["a0-1", "a1-1", "a2-1"]
        assert len(sent(server)) == 6
    assert clock.now - 1000.0 == pytest.approx(5 * 0.25)
