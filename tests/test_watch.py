"""The watch-scorer and the files it trusts: status guard, heartbeat, stale and finished inference."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

from evaltui.engine import events as ev
from evaltui.engine.heartbeat import HeartbeatThread
from evaltui.engine.watch import WatchScorer
from evaltui.engine.workdir import StatusBoard, WorkDir, parse_iso
from evaltui.fsutil import atomic_write_json, atomic_write_text
from evaltui.plan import load_plan

ROWS = arithmetic(5)


def setup(tmp_path: Path, *, shards: int = 1, **run):  # type: ignore[no-untyped-def]
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset("a", data, shards=shards), gsm_dataset("b", data)], run=run))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    return plan, wd, StatusBoard(wd)


def write_predictions(path: Path, entries: list[dict]) -> None:
    atomic_write_json(path, {str(e["index"]): {k: v for k, v in e.items() if k != "index"} for e in entries})


def finish(wd: WorkDir, board: StatusBoard, dataset: str, shards: int = 1) -> None:
    entries = [{"index": i, "origin_prompt": r["question"], "prediction": r["answer"], "gold": r["answer"]} for i, r in enumerate(ROWS)]
    write_predictions(wd.predictions_file("m", dataset), entries)
    for k in range(shards):
        board.write("m", dataset, k, shards, "done", total=5, completed=5, failed=0)


def watch(plan, wd, pairs, *, before=None, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    events: list[ev.Event] = []
    scorer = WatchScorer(plan, wd, events.append, pairs)

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
    (skipped,) = [e for e in events if isinstance(e, ev.WatchSkipped)]
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
    assert [e.pairs for e in events if isinstance(e, ev.WatchSkipped)] == [(("m", "a"),)]


def test_a_split_dataset_waits_for_every_shard(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, shards=3, heartbeat_timeout=60.0, watch_interval=0.05)
    wd.beat()
    board.write("m", "a", 0, 3, "done", total=2, completed=2, failed=0)
    board.write("m", "a", 1, 3, "done", total=2, completed=2, failed=0)
    # shard 2 has no status file at all yet, and b is running

    async def later(scorer: WatchScorer) -> None:
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
    assert [e.pairs for e in events if isinstance(e, ev.WatchSkipped)] == [(("m", "b"),)]


def test_finished_inference_does_not_wait_out_the_timeouts(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=600.0, watch_interval=600.0)
    wd.beat()
    board.write("m", "a", 0, 1, "running", total=5, completed=1, failed=0)
    finish(wd, board, "b")

    async def end(scorer: WatchScorer) -> None:
        await anyio.sleep(0.1)
        scorer.inference_finished()

    # Bounded at 10 s by `watch`; with the intervals above it would otherwise wait 10 minutes.
    events = watch(plan, wd, [("m", "a"), ("m", "b")], before=end)
    assert [e.dataset for e in events if isinstance(e, ev.DatasetScored)] == ["b"]
    assert [e.pairs for e in events if isinstance(e, ev.WatchSkipped)] == [(("m", "a"),)]


def test_pairs_with_results_are_not_scored_again_but_error_results_are(tmp_path: Path) -> None:
    plan, wd, board = setup(tmp_path, heartbeat_timeout=600.0, watch_interval=0.05)
    wd.beat()
    finish(wd, board, "a")
    finish(wd, board, "b")
    wd.result_file("m", "a").parent.mkdir(parents=True, exist_ok=True)
    wd.result_file("m", "a").write_text(json.dumps({"accuracy": 12.5, "details": []}))
    wd.result_file("m", "b").write_text(json.dumps({"error": "old evaluator bug"}))
    events = watch(plan, wd, [("m", "a"), ("m", "b")])
    assert [e.dataset for e in events if isinstance(e, ev.DatasetScored)] == ["b"]
    assert json.loads(wd.result_file("m", "a").read_text())["accuracy"] == 12.5


def test_status_never_moves_back_from_done_or_fail(tmp_path: Path) -> None:
    wd = WorkDir(tmp_path)
    board = StatusBoard(wd)
    board.write("m", "d", 0, 1, "running", total=3, completed=1, failed=0)
    board.write("m", "d", 0, 1, "done", total=3, completed=3, failed=0)
    assert board.write("m", "d", 0, 1, "running", total=3, completed=2, failed=0) is False  # a late progress write
    assert wd.read_status("m", "d")["status"] == "done"
    board.write("m", "e", 0, 1, "fail", total=3, completed=1, failed=2)
    assert board.write("m", "e", 0, 1, "pending", total=3, completed=1, failed=0) is False
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
