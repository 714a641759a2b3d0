"""`evaltui PLAN --no-ui` as a user runs it: lines, table, --json, subsets, exit codes, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from planmaker import arithmetic, chat, gsm_dataset, lightllm, write_jsonl, write_plan

from evaltui.engine.disk.checkpoint import scan_checkpoint
from evaltui.engine.disk.workdir import WorkDir
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig

REPO = Path(__file__).resolve().parents[1]


def evaltui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui", *args], capture_output=True, text=True, timeout=timeout)


def two_by_two(tmp_path: Path, sim_factory, **faults):  # type: ignore[no-untyped-def]
    rows = arithmetic(30)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, models={"good": ModelProfile(accuracy=1.0), "half": ModelProfile(accuracy=0.5)}, faults=Faults(**faults)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("good", sim.url), chat("half", sim.url)], datasets=[gsm_dataset("x", data), gsm_dataset("y", data, limit=10)])
    return plan, sim


def test_no_ui_prints_state_lines_then_the_leaderboard(tmp_path: Path, sim_factory) -> None:
    plan, _ = two_by_two(tmp_path, sim_factory)
    r = evaltui(str(plan), "--no-ui")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\x1b" not in out  # not a TTY: no ANSI
    for pair in ("good/x", "good/y", "half/x", "half/y"):
        assert f"{pair}: started" in out and f"{pair}: scored, accuracy = " in out
    table = out[out.index("dataset ") :]
    assert table.splitlines()[0].split() == ["dataset", "version", "metric", "mode", "good", "half"]
    assert "Average" in table and "100.00" in table
    summary = next(line for line in out.splitlines() if line.startswith("summary: "))
    paths = summary.removeprefix("summary: ").split()
    assert len(paths) == 3 and all(Path(p).is_file() for p in paths)


def test_json_summary_on_stdout(tmp_path: Path, sim_factory) -> None:
    plan, _ = two_by_two(tmp_path, sim_factory)
    r = evaltui(str(plan), "--no-ui", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # nothing but JSON on stdout
    assert data["exit_code"] == 0
    assert data["leaderboard"]["models"] == ["good", "half"]
    rows = {row["abbr"]: row for row in data["leaderboard"]["datasets"]}
    assert rows["x"]["scores"]["good"] == 100.0 and rows["x"]["metric"] == "accuracy"
    assert data["leaderboard"]["average"]["good"] == 100.0
    assert {(p["model"], p["dataset"]) for p in data["pairs"] if p["status"] == "scored"} == {("good", "x"), ("good", "y"), ("half", "x"), ("half", "y")}
    assert "scored" in r.stderr  # progress lines went to stderr


def test_subset_and_work_dir_options(tmp_path: Path, sim_factory) -> None:
    plan, sim = two_by_two(tmp_path, sim_factory)
    elsewhere = tmp_path / "elsewhere"
    r = evaltui(str(plan), "--no-ui", "--models", "half", "--datasets", "y", "--work-dir", str(elsewhere))
    assert r.returncode == 0, r.stderr
    wd = WorkDir(elsewhere)
    assert wd.result_file("half", "y").is_file()
    assert not wd.result_file("good", "y").exists() and not wd.result_file("half", "x").exists()
    assert not (tmp_path / "out").exists()  # the plan's own work_dir was not touched
    snapshot = (elsewhere / "plan.toml").read_text()
    assert 'abbr = "good"' in snapshot and 'abbr = "half"' in snapshot  # the whole plan, not the subset
    assert {rec.model for rec in sim.stats.log} == {"half"} and sim.stats.requests_total == 10
    bad = evaltui(str(plan), "--no-ui", "--models", "nope")
    assert bad.returncode == 2 and "--models: unknown abbr 'nope'" in bad.stderr


def test_exit_code_1_when_something_is_not_scored(tmp_path: Path, sim_factory) -> None:
    plan, _ = two_by_two(tmp_path, sim_factory, fail_first=9, fail_first_kind="422")
    r = evaltui(str(plan), "--no-ui")
    assert r.returncode == 1
    assert "inference FAILED" in r.stdout and "not scored" in r.stdout
    assert "run the plan again to finish and score them" in r.stdout  # and what to do about it
    # Why, as it happens: the first failure of each pair (9 failed, across at most 4 pairs).
    said = [line for line in r.stdout.splitlines() if " failed: http 422: " in line]
    assert 1 <= len(said) <= 4 and len({line.split("]")[1].split(":")[0] for line in said}) == len(said)
    assert " failed: http 422: " in (tmp_path / "out" / "logs" / "run.log").read_text()


def test_ctrl_c_keeps_work_and_exits_130(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(400)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, default=ModelProfile(latency=0.05)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    wd = WorkDir(tmp_path / "out")
    proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    cp = wd.checkpoint_file("m", "d")
    while time.monotonic() < deadline and (not cp.exists() or cp.read_bytes().count(b"\n") < 10):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    status = wd.read_status("m", "d")
    assert status["status"] == "pending" and "interrupted" in status["error"]
    done = sum(ok for _, _, ok, _ in scan_checkpoint(cp))  # sample lines, not the version header
    assert 9 <= done < 400
    # Run again: it resumes and only the rest is sent.
    sim.reset_stats()
    r = evaltui(str(plan), "--no-ui")
    assert r.returncode == 0, r.stderr
    assert sim.stats.requests_total == 400 - done


def test_headless_path_never_imports_textual(tmp_path: Path, sim_factory) -> None:
    """Importing the engine, and running a plan headless to its leaderboard, loads neither."""
    plan, _ = two_by_two(tmp_path, sim_factory)
    code = (
        "import sys, evaltui.cli, evaltui.headless, evaltui.engine.run.runner, evaltui.backends, evaltui.scoring, evaltui.sim\n"
        "def bad(): return sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich'})\n"
        "assert not bad(), ('on import', bad())\n"
        f"code = evaltui.cli.main([{str(plan)!r}, '--no-ui'])\n"
        "assert code == 0, code\n"
        "assert not bad(), ('after a headless run', bad())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scored" in r.stdout  # it did run the plan


def test_version_and_help() -> None:
    from evaltui import __version__

    r = evaltui("--version")
    assert r.returncode == 0 and __version__ in r.stdout
    r = evaltui("--help")
    assert r.returncode == 0 and "--no-ui" in r.stdout and "serve-sim" in r.stdout
    r = evaltui("serve-sim", "--help")
    assert r.returncode == 0 and "--port" in r.stdout and "--fail-first" in r.stdout


def test_evaltui_alone_lists_what_there_is_to_do() -> None:
    """It said one line, `the following arguments are required: PLAN.toml`, and nothing of the commands."""
    r = evaltui()
    assert r.returncode == 2 and r.stdout == ""
    for command in ("evaltui PLAN.toml", "evaltui watch WORK_DIR", "evaltui show WORK_DIR", "evaltui compare A B", "evaltui benchmarks", "evaltui serve-sim", "evaltui --help"):
        assert any(line.strip().startswith(command) for line in r.stderr.splitlines()), (command, r.stderr)


def test_the_demo_runs_end_to_end_on_the_bundled_simulator(tmp_path: Path) -> None:
    import tempfile

    keys_before = set(Path(tempfile.gettempdir()).glob("evaltui-sim-*"))
    r = evaltui(str(REPO / "sample_configs" / "demo.toml"), "--no-ui", "--json", "--work-dir", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr
    # the simulator's answer key (every prompt and reference) is not left behind in /tmp
    assert set(Path(tempfile.gettempdir()).glob("evaltui-sim-*")) <= keys_before
    data = json.loads(r.stdout)
    assert "simulator: listening on http://127.0.0.1:" in r.stderr
    average = data["leaderboard"]["average"]
    assert average["sim-strong"] > average["sim-weak"] + 15  # two models of different, known skill
    assert len(data["leaderboard"]["datasets"]) == 4
    assert {p["status"] for p in data["pairs"]} == {"scored"}


def test_committed_demo_data_is_what_the_generator_makes() -> None:
    r = subprocess.run([sys.executable, str(REPO / "sample_configs" / "make_demo_data.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_progress_line_says_which_pairs_are_being_scored() -> None:
    import io

    from evaltui.engine.stream import events as ev
    from evaltui.headless import HeadlessRenderer

    renderer = HeadlessRenderer(io.StringIO())
    renderer(ev.DatasetPlanned("m", "code", 24, 1, 0, 0, ev.PairStatus.PENDING))
    renderer(ev.DatasetPlanned("m", "gsm", 10, 1, 0, 0, ev.PairStatus.PENDING))
    renderer(ev.DatasetInferred("m", "code", ev.PairStatus.DONE, 24, 0))
    renderer(ev.DatasetScoring("m", "code"))
    assert renderer.progress_line().endswith("| m/code scoring")
    renderer(ev.DatasetScored("m", "code", "pass@1", 50.0))
    assert renderer.progress_line().endswith("| no dataset running")


def test_line_times_are_the_clocks_second(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each line's time is made once a second (Stamp): within a second the same text, the next
    second's once the clock turns, as datetime.now() would have written them."""
    from datetime import datetime

    from evaltui.engine.disk import runlog

    now = [1_796_000_000.2]
    monkeypatch.setattr(runlog.time, "time", lambda: now[0])
    made: list[datetime] = []
    stamp = runlog.Stamp(lambda at: made.append(at) or at.strftime("%H:%M:%S"))
    first = stamp()
    assert first == datetime.fromtimestamp(1_796_000_000).strftime("%H:%M:%S")
    now[0] = 1_796_000_000.999
    assert stamp() == first and len(made) == 1
    now[0] = 1_796_000_001.0
    assert stamp() == datetime.fromtimestamp(1_796_000_001).strftime("%H:%M:%S") and len(made) == 2
    assert runlog.iso_seconds(datetime(2026, 1, 2, 3, 4, 5, 999_999)) == "2026-01-02T03:04:05"


def test_lines_are_printable_and_a_broken_consumer_is_said_once() -> None:
    """Control characters are escaped (a tab kept) whatever the fast path; a consumer that raises
    is said once and the others are still sent every event."""
    import io

    from evaltui.engine.disk.runlog import EventLines, printable
    from evaltui.engine.stream import events as ev
    from evaltui.engine.stream.bus import EventBus
    from evaltui.engine.stream.state import RunState
    from evaltui.headless import HeadlessRenderer

    assert printable("plain é 漢 line") == "plain é 漢 line"
    assert printable("a\tb\x1b[31mc\nd\x7f\x9b\u00a0") == "a\tb\\x1b[31mc\\x0ad\\x7f\\x9b\u00a0"
    assert EventLines()(ev.Notice("bad\x1b]0;title\x07 words", "error")) == "error: bad\\x1b]0;title\\x07 words"
    out = io.StringIO()
    bus = EventBus(RunState())
    calls: list[ev.Event] = []

    def broken(e: ev.Event) -> None:
        calls.append(e)
        raise RuntimeError("boom")

    bus.subscribe(broken)
    bus.subscribe(HeadlessRenderer(out))
    for d in ("a", "b"):
        bus.emit(ev.DatasetScored("m", d, "accuracy", 50.0))
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "error: an event consumer failed on DatasetScored: RuntimeError: boom",  # said as it happens, once
        "m/a: scored, accuracy = 50.00",
        "m/b: scored, accuracy = 50.00",
    ]
    assert len(calls) == 3  # both scores and the Notice about itself


def test_a_renderer_reads_its_sources_fold_without_folding_again() -> None:
    """Given its source's state (which the source's bus folds before handing each event on), the
    renderer reads it: every sample counted once, the same lines and progress as its own fold."""
    import io

    from evaltui.engine.stream import events as ev
    from evaltui.engine.stream.bus import EventBus
    from evaltui.engine.stream.state import RunState
    from evaltui.headless import HeadlessRenderer

    stream = [
        ev.DatasetPlanned("m", "d", 3, 1, 0, 0, ev.PairStatus.PENDING),
        ev.DatasetStarted("m", "d", 3, 3),
        *(ev.SampleFinished("m", "d", 0, i) for i in range(2)),
    ]
    outs = []
    for shared in (True, False):
        state, out = RunState(), io.StringIO()
        bus = EventBus(state)
        renderer = HeadlessRenderer(out, state=state if shared else None)
        bus.subscribe(renderer)
        for e in stream:
            bus.emit(e)
        assert (renderer.state is state) == shared
        assert renderer.state.totals() == (2, 0, 3)
        assert renderer.progress_line().startswith("progress: 2/3 samples, 0 failed | m/d 2/3")
        outs.append([line.split("] ", 1)[1] for line in out.getvalue().splitlines()])
    assert outs[0] == outs[1] == ["m/d: started, 3 samples to run"]


def test_the_lines_of_one_turn_of_the_loop_go_out_in_one_write(tmp_path: Path) -> None:
    """A file or a pipe (CI's log, `| tee`) gets a turn's lines in one write, at the turn's end;
    without a loop (the leaderboard at the end) a line goes out at once."""
    import asyncio
    import io

    from evaltui.headless import HeadlessRenderer

    writes: list[bytes] = []

    class Raw(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:  # type: ignore[no-untyped-def, override]
            writes.append(bytes(b))
            return len(b)

    out = io.TextIOWrapper(io.BufferedWriter(Raw(), 1 << 16), encoding="utf-8")
    renderer = HeadlessRenderer(out)

    async def turns() -> None:
        for i in range(50):
            renderer.write(f"line {i}\n")
        assert writes == []  # not yet: the turn is not over
        await asyncio.sleep(0)
        assert writes == [b"".join(f"line {i}\n".encode() for i in range(50))]
        renderer.write("next turn\n")
        await asyncio.sleep(0)
        assert writes[-1] == b"next turn\n"

    asyncio.run(turns())
    renderer.write("the table\n")  # no loop: at once
    assert writes[-1] == b"the table\n" and len(writes) == 3
