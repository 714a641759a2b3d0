"""The watch-scorer and the files it trusts: status guard, heartbeat, stale and finished inference."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

from evaltui.engine.disk.heartbeat import HeartbeatThread
from evaltui.engine.disk.workdir import StatusWriter, WorkDir, parse_iso
from evaltui.engine.run.scorer import Scorer
from evaltui.engine.stream import events as ev
from evaltui.fsutil import atomic_write_json, atomic_write_text
from evaltui.plan import load_plan

ROWS = arithmetic(5)


def setup(tmp_path: Path, *, shards: int = 1, **run):  # type: ignore[no-untyped-def]
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset("a", data, shards=shards), gsm_dataset("b", data)], run=run))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    return plan, wd, StatusWriter(wd)


def write_predictions(path: Path, entries: list[dict]) -> None:
    atomic_write_json(path, {str(e["index"]): {k: v for k, v in e.items() if k != "index"} for e in entries})


def finish(wd: WorkDir, board: StatusWriter, dataset: str, shards: int = 1) -> None:
    entries = [{"index": i, "origin_prompt": r["question"], "prediction": r["answer"], "gold": r["answer"]} for i, r in enumerate(ROWS)]
    write_predictions(wd.predictions_file("m", dataset), entries)
    for k in range(shards):
        board.write("m", dataset, k, shards, "done", total=5, completed=5, failed=0)


def watch(plan, wd, pairs, *, before=None, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    events: list[ev.Event] = []
    scorer = Scorer(plan, wd, events.append)
    scorer.add(pairs)

    async def main() -> None:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(scorer.run)
                if before is not None:
                    await before(scorer)

    anyio.run(main)
    return events


def test_stale_heartbeat_skips_without_scoring(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=1.0, watch_interval=0.05)
    board.write("m", "a", 0, 1, "running", total=5, completed=3, failed=0)
    atomic_write_text(wd.heartbeat_file, "2020-01-01T00:00:00+00:00\n")
    # Incomplete predictions are on disk; they must not be scored.
    write_predictions(wd.predictions_file("m", "a"), [{"index": 0, "origin_prompt": "x", "prediction": "1", "gold": "1"}])
    events = watch(plan, wd, [("m", "a"), ("m", "b")])
    (skipped,) = [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert set(skipped.pairs) == {("m", "a"), ("m", "b")} and "heartbeat" in skipped.reason
    assert not [e for e in events if isinstance(e, ev.DatasetScored)]
    assert not wd.result_file("m", "a").exists() and not wd.result_file("m", "b").exists()


def test_done_pairs_are_scored_even_when_the_rest_is_skipped(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=1.0, watch_interval=0.05)
    finish(wd, board, "b")
    board.write("m", "a", 0, 1, "fail", total=5, completed=2, failed=3, error="boom")
    atomic_write_text(wd.heartbeat_file, "2020-01-01T00:00:00+00:00\n")
    events = watch(plan, wd, [("m", "a"), ("m", "b")])
    scored = [e for e in events if isinstance(e, ev.DatasetScored)]
    assert [(e.dataset, e.score) for e in scored] == [("b", 100.0)]
    assert [e.pairs for e in events if isinstance(e, ev.ScoringSkipped)] == [(("m", "a"),)]


def test_a_split_dataset_waits_for_every_shard(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, shards=3, heartbeat_timeout=60.0, watch_interval=0.05)
    wd.beat()
    board.write("m", "a", 0, 3, "done", total=2, completed=2, failed=0)
    board.write("m", "a", 1, 3, "done", total=2, completed=2, failed=0)
    # shard 2 has no status file at all yet, and b is running

    async def later(scorer: Scorer) -> None:
        await anyio.sleep(0.3)
        assert not wd.result_file("m", "a").exists()
        finish(wd, board, "a", shards=3)
        board.write("m", "b", 0, 1, "running", total=5, completed=1, failed=0)
        scorer.wake()
        await anyio.sleep(0.3)
        assert wd.result_file("m", "a").exists()
        scorer.inference_finished()

    events = watch(plan, wd, [("m", "a"), ("m", "b")], before=later)
    assert [e.dataset for e in events if isinstance(e, ev.DatasetScored)] == ["a"]
    assert [e.pairs for e in events if isinstance(e, ev.ScoringSkipped)] == [(("m", "b"),)]


def test_finished_inference_does_not_wait_out_the_timeouts(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=600.0, watch_interval=600.0)
    wd.beat()
    board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)
    finish(wd, board, "b")

    async def end(scorer: Scorer) -> None:
        await anyio.sleep(0.1)
        scorer.inference_finished()

    # Bounded at 10 s by `watch`; with the intervals above it would otherwise wait 10 minutes.
    events = watch(plan, wd, [("m", "a"), ("m", "b")], before=end)
    assert [e.dataset for e in events if isinstance(e, ev.DatasetScored)] == ["b"]
    assert [e.pairs for e in events if isinstance(e, ev.ScoringSkipped)] == [(("m", "a"),)]


def test_pairs_with_results_are_not_scored_again_but_error_results_are(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=600.0, watch_interval=0.05)
    wd.beat()
    finish(wd, board, "a")
    finish(wd, board, "b")
    wd.result_file("m", "a").parent.mkdir(parents=True, exist_ok=True)
    wd.result_file("m", "a").write_text(json.dumps({"accuracy": 12.5, "details": []}))
    wd.result_file("m", "b").write_text(json.dumps({"error": "old evaluator bug"}))
    # The session hands the watcher only the pairs without a scored result (planned in a thread)
    events = watch(plan, wd, [p for p in [("m", "a"), ("m", "b")] if not wd.has_scored_result(*p)])
    assert [e.dataset for e in events if isinstance(e, ev.DatasetScored)] == ["b"]
    assert json.loads(wd.result_file("m", "a").read_text())["accuracy"] == 12.5


def test_status_never_moves_back_from_done_or_fail(tmp_path: Path) -> None:
    wd = WorkDir(tmp_path)
    board = StatusWriter(wd)
    board.write("m", "d", 0, 1, "running", total=3, completed=1, failed=0)
    board.write("m", "d", 0, 1, "done", total=3, completed=3, failed=0)
    assert board.write("m", "d", 0, 1, "running", total=3, completed=2, failed=0) is False  # a late progress write
    assert wd.read_status("m", "d")["status"] == "done"
    board.write("m", "e", 0, 1, "fail", total=3, completed=1, failed=2)
    assert board.write("m", "e", 0, 1, "pending", total=3, completed=1, failed=0) is False
    assert board.write("m", "e", 0, 1, "fail", total=3, completed=1, failed=2, error="the dataset's count") is True  # restated as itself
    assert board.write("m", "e", 0, 1, "pending", total=3, completed=1, failed=0, reset=True) is True  # a deliberate re-plan
    assert wd.read_status("m", "e")["status"] == "pending"


def test_heartbeat_thread_beats_while_running(tmp_path: Path) -> None:
    wd = WorkDir(tmp_path)
    beats: set[str] = set()
    with HeartbeatThread(wd, 0.02):
        deadline = time.monotonic() + 5
        while len(beats) < 3 and time.monotonic() < deadline:
            beats.add(wd.heartbeat_file.read_text())
            time.sleep(0.005)
    assert len(beats) >= 3
    assert all(parse_iso(b) is not None for b in beats)
    last = wd.heartbeat_file.read_text()
    time.sleep(0.1)
    assert wd.heartbeat_file.read_text() == last  # stopped with the run
    assert wd.heartbeat_age() is not None and wd.heartbeat_age() >= 0.1


# ---------------------------------------------------------------------------------------------
# RELIABILITY.md §4: a heartbeat that goes stale mid-run, heartbeats that cannot be read, an
# evaluator that raises. The clock is the watcher's own (`clock=`), so nothing waits real time.
# ---------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def watch_with(plan, wd, pairs, clock, before, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    events: list[ev.Event] = []
    scorer = Scorer(plan, wd, events.append, clock=clock)
    scorer.add(pairs)

    async def main() -> None:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(scorer.run)
                await before(scorer)

    anyio.run(main)
    return events


async def wait_for(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.02)


@pytest.mark.reliability
def test_heartbeat_going_stale_mid_run_skips_the_rest_and_scores_nothing_partial(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=30.0, watch_interval=0.05)
    clock = Clock()
    atomic_write_text(wd.heartbeat_file, datetime.fromtimestamp(clock.now, timezone.utc).isoformat() + "\n")
    board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)
    board.write("m", "b", 0, 1, "running", total=5, completed=1, failed=0)

    async def story(scorer: Scorer) -> None:
        finish(wd, board, "b")  # b ends while inference is alive: it is scored
        scorer.wake()
        await wait_for(lambda: wd.result_file("m", "b").exists())
        # a has answers on disk but is still running when inference dies (no more beats)
        write_predictions(wd.predictions_file("m", "a"), [{"index": 0, "origin_prompt": "x", "prediction": "1", "gold": "1"}])
        clock.now += 29.0
        scorer.wake()
        await anyio.sleep(0.2)
        assert list(scorer.pending) == [("m", "a")]  # not stale yet: still waiting
        clock.now += 2.0  # 31 s since the last beat
        scorer.wake()

    events = watch_with(plan, wd, [("m", "a"), ("m", "b")], clock, story)
    assert [(e.dataset, e.score) for e in events if isinstance(e, ev.DatasetScored)] == [("b", 100.0)]
    (skipped,) = [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert skipped.pairs == (("m", "a"),) and "heartbeat stale for 31 s" in skipped.reason
    assert not wd.result_file("m", "a").exists()


@pytest.mark.reliability
@pytest.mark.parametrize("content", [b"garbage", b"", b"\xff\xfe\x00\x01", b"2026-13-45T99:99:99"], ids=["words", "empty", "not-utf8", "impossible-date"])
def test_an_unparseable_heartbeat_is_dated_by_its_file_time(tmp_path: Path, content: bytes) -> None:
    """A beat that cannot be read still proves a writer was there when the file was written."""
    plan, wd, board = setup(tmp_path, heartbeat_timeout=30.0, watch_interval=0.05)
    clock = Clock()
    wd.heartbeat_file.write_bytes(content)
    written = wd.heartbeat_file.stat().st_mtime
    board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)

    async def story(scorer: Scorer) -> None:
        clock.now = written + 20.0
        scorer.wake()
        await anyio.sleep(0.2)
        assert list(scorer.pending) == [("m", "a")]  # 20 s: alive
        clock.now = written + 40.0
        scorer.wake()

    events = watch_with(plan, wd, [("m", "a")], clock, story)
    (skipped,) = [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert skipped.pairs == (("m", "a"),) and "heartbeat stale for 40 s" in skipped.reason


@pytest.mark.reliability
def test_a_missing_heartbeat_counts_from_the_watchers_start(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=30.0, watch_interval=0.05)
    clock = Clock()
    board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)

    async def story(scorer: Scorer) -> None:
        await anyio.sleep(0.1)
        clock.now += 25.0
        scorer.wake()
        await anyio.sleep(0.2)
        assert list(scorer.pending) == [("m", "a")]
        clock.now += 10.0
        scorer.wake()

    events = watch_with(plan, wd, [("m", "a")], clock, story)
    (skipped,) = [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert skipped.pairs == (("m", "a"),) and "heartbeat stale for 35 s" in skipped.reason
    assert not wd.result_file("m", "a").exists()


@pytest.mark.reliability
def test_an_opencompass_heartbeat_in_naive_local_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCompass writes `datetime.now()` without a zone: local time, here 8 h east of UTC."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        plan, wd, board = setup(tmp_path, heartbeat_timeout=30.0, watch_interval=0.05)
        clock = Clock()
        atomic_write_text(wd.heartbeat_file, datetime.fromtimestamp(clock.now).isoformat())  # naive local
        assert wd.heartbeat_age(clock.now) is not None and abs(wd.heartbeat_age(clock.now)) < 1.0  # type: ignore[arg-type]
        board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)

        async def story(scorer: Scorer) -> None:
            clock.now += 10.0
            scorer.wake()
            await anyio.sleep(0.2)
            assert list(scorer.pending) == [("m", "a")]  # 10 s old, not 8 h
            clock.now += 25.0
            scorer.wake()

        events = watch_with(plan, wd, [("m", "a")], clock, story)
        (skipped,) = [e for e in events if isinstance(e, ev.ScoringSkipped)]
        assert "heartbeat stale for 35 s" in skipped.reason
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.reliability
def test_an_evaluator_that_raises_gives_an_error_result_and_the_rest_are_scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    datasets = [gsm_dataset("a", data), {**gsm_dataset("b", data), "evaluator": {"type": "includes"}}, gsm_dataset("c", data)]
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=datasets, run={"watch_interval": 0.05}))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    board = StatusWriter(wd)
    wd.beat()
    for d in ("a", "b", "c"):
        finish(wd, board, d)
    atomic_write_text(wd.predictions_file("m", "c"), '{"0": {"prediction": ')  # unreadable: raises while scoring
    from evaltui.scoring.score import _FIXED_JUDGES

    def broken(prediction: str, gold: str):  # type: ignore[no-untyped-def]
        raise KeyError("evaluator bug")

    monkeypatch.setitem(_FIXED_JUDGES, "includes", broken)

    async def end(scorer: Scorer) -> None:
        await wait_for(lambda: all(wd.result_file("m", d).exists() for d in "abc"))
        scorer.inference_finished()

    events = watch_with(plan, wd, [("m", "a"), ("m", "b"), ("m", "c")], time.time, end)
    by = {e.dataset: e for e in events if isinstance(e, ev.DatasetScored)}
    assert by["a"].score == 100.0 and not by["a"].error
    assert by["b"].score is None and "KeyError: 'evaluator bug'" in by["b"].error
    assert by["c"].score is None and by["c"].error
    assert json.loads(wd.result_file("m", "b").read_text()) == {"error": by["b"].error}
    assert "error" in json.loads(wd.result_file("m", "c").read_text())
    assert not [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert wd.has_scored_result("m", "a") and not wd.has_scored_result("m", "b")


@pytest.mark.reliability
def test_a_run_whose_heartbeat_writer_hangs_still_scores_what_its_own_inference_finishes(tmp_path: Path, sim_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole engine: the heartbeat writer hangs once the quick dataset is scored (a stalled
    network file system); the slow one outlives heartbeat_timeout. Issue 23: this listed it as
    skipped (`heartbeat stale … inference is gone`) though its inference went on to finish, and
    the run ended 1 with nothing of it scored. The scorer inside the run knows its own inference
    is alive: the heartbeat rule is for a scorer that cannot know (see the unit tests above)."""
    from planmaker import lightllm, run_plan

    from evaltui.sim import AnswerKey, ModelProfile, SimConfig

    rows = arithmetic(24)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=1.0, latency=0.1)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=1)],
        datasets=[gsm_dataset("quick", data, limit=1), gsm_dataset("slow", data)],  # slow: ≥ 2.3 s of replies
        run={"heartbeat_timeout": 1.0, "heartbeat_interval": 0.1, "watch_interval": 0.05},
    )
    def beat_until_quick_is_scored(self: HeartbeatThread) -> None:
        while not self._stop.wait(self.interval) and not self.workdir.result_file("m", "quick").exists():
            self.workdir.beat()

    monkeypatch.setattr(HeartbeatThread, "_run", beat_until_quick_is_scored)
    code, events, runner = run_plan(plan)
    assert code == 0
    assert [(e.dataset, e.score) for e in events if isinstance(e, ev.DatasetScored)] == [("quick", 100.0), ("slow", 100.0)]
    assert not [e for e in events if isinstance(e, ev.ScoringSkipped)]
    assert runner.workdir.has_scored_result("m", "slow")


@pytest.mark.reliability
def test_a_run_paused_longer_than_heartbeat_timeout_resumes_and_scores_everything(tmp_path: Path) -> None:
    """SIGSTOP for longer than heartbeat_timeout, then SIGCONT (a laptop that slept): the run
    gave up on itself — `watcher: not scored (heartbeat stale …): m/d, m/e` — finished both
    datasets' inference and exited 1 with nothing scored. It must go on as if nothing happened.
    Short settings (heartbeat_timeout 1 s) keep it to a few seconds."""
    import os
    import signal
    import subprocess
    import sys
    import time

    rows = arithmetic(30)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(
        tmp_path,
        models=[{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=1.0&latency=0.05", "max_workers": 1}],
        datasets=[gsm_dataset("d", data), gsm_dataset("e", data)],
        run={"heartbeat_timeout": 1.0, "heartbeat_interval": 0.5, "watch_interval": 0.02},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, stdin=subprocess.DEVNULL, cwd=tmp_path)
    try:
        wd = tmp_path / "out"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(wd.glob("predictions/m/tmp_d*.jsonl")):
            time.sleep(0.05)
        time.sleep(0.3)  # under way: some of d answered
        proc.send_signal(signal.SIGSTOP)
        time.sleep(2.5)  # > heartbeat_timeout: the beat is stale when it wakes
        proc.send_signal(signal.SIGCONT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, out
    assert "not scored" not in out and "heartbeat stale" not in out
    assert "m/d: scored, accuracy = 100.00" in out and "m/e: scored, accuracy = 100.00" in out
