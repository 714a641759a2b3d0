"""Torn and foreign files in the work dir (RELIABILITY.md §3), as a user meets them: through `evaltui PLAN --no-ui`.

Each case runs a plan to the end, damages what a crash, a full disk or another tool can leave
(a torn checkpoint line, a status file of garbage, a half-written results file, a work dir written
by OpenCompass), runs the same command again and checks what the user reads and gets: exit 0,
no traceback, the right score, and no sample asked of the server again that was already answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan

from evaltui.cli import main
from evaltui.engine.disk.checkpoint import scan_checkpoint
from evaltui.engine.disk.guard import mark
from evaltui.engine.disk.workdir import WorkDir
from evaltui.sim import AnswerKey, ModelProfile, SimConfig

pytestmark = pytest.mark.reliability

N = 12
ROWS = arithmetic(N)


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    """The runs here are in-process (`cli.main`): a hang must fail the test, not stall the suite."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError("the run did not end within 120 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def setup(tmp_path: Path, sim_factory):  # type: ignore[no-untyped-def]
    """A plan of one always-right model on two datasets, its simulator and its work dir."""
    key = AnswerKey()
    for r in ROWS:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=1.0)}))
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data), gsm_dataset("b", data, shards=2)])
    return plan, sim, WorkDir(tmp_path / "out")


def evaltui(capsys: pytest.CaptureFixture[str], plan: Path) -> tuple[int, str]:
    """`evaltui PLAN --no-ui` in-process; (exit code, everything it printed)."""
    code = main([str(plan), "--no-ui"])
    out, err = capsys.readouterr()
    text = out + err
    assert "Traceback" not in text, text
    return code, text


def scores(text: str) -> dict[str, str]:
    """`m/a: scored, accuracy = 100.00` lines → {"m/a": "100.00"}."""
    found = {}
    for line in text.splitlines():
        if ": scored, accuracy = " in line:
            head, value = line.split(": scored, accuracy = ")
            found[head.split("] ")[-1]] = value.split()[0].rstrip(",")
    return found


def first_run(capsys, setup):  # type: ignore[no-untyped-def]
    plan, sim, wd = setup
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/a": "100.00", "m/b": "100.00"}
    assert sim.stats.requests_total == 2 * N
    return plan, sim, wd


def assert_whole(wd: WorkDir, dataset: str) -> None:
    """Final predictions hold every sample once, with the answer the server gave for it."""
    preds = json.loads(wd.predictions_file("m", dataset).read_text())
    assert sorted(map(int, preds)) == list(range(N))
    for i, r in enumerate(ROWS):
        assert preds[str(i)]["gold"] == r["answer"] and f"#### {2 * i + 7}" in preds[str(i)]["prediction"]
    result = json.loads(wd.result_file("m", dataset).read_text())
    assert result["accuracy"] == 100.0 and len(result["details"]) == N


def test_a_torn_checkpoint_line_loses_only_that_sample(capsys, setup) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = first_run(capsys, setup)
    # Killed while the last sample's line was being written, before the merge: the final files
    # are not there yet and the status still says running.
    cp = wd.checkpoint_file("m", "a")
    data = cp.read_bytes()
    cp.write_bytes(data[: len(data) - 25])
    wd.predictions_file("m", "a").unlink()
    wd.result_file("m", "a").unlink()
    status = json.loads(wd.status_file("m", "a").read_text())
    wd.status_file("m", "a").write_text(json.dumps({**status, "status": "running", "completed": N - 1}))
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/a": "100.00"}
    assert sim.stats.requests_total - before == 1  # only the torn sample was asked again
    indices = [i for i, _, ok, _ in scan_checkpoint(cp)]
    assert sorted(indices) == list(range(N))  # no duplicate, none lost
    assert_whole(wd, "a")


def test_checkpoints_an_earlier_evaltui_wrote_with_spaced_json_are_resumed(capsys, setup) -> None:  # type: ignore[no-untyped-def]
    """Before evaltui wrote compact JSON its checkpoint lines read `{"index": 3, "error": {…}}`:
    an upgrade in the middle of a run keeps that work, and still tells a failure from an answer."""
    plan, sim, wd = first_run(capsys, setup)
    cp = wd.checkpoint_file("m", "a")
    entries = [json.loads(line) for line in cp.read_bytes().splitlines()]
    assert cp.read_bytes().startswith(b'{"version":"')  # what this evaltui writes
    at = {e["index"]: k for k, e in enumerate(entries) if "index" in e}
    failed = entries[at[4]]
    entries[at[4]] = {**failed, "prediction": "", "error": {"type": "http", "status": 500, "message": 'said "error": {no}'}}
    entries[at[5]]["prediction"] += ' "error": {not a failure}'  # text that looks like a key, inside a string
    cp.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")  # json.dumps: the old layout
    assert b'{"index": 3, "origin_prompt": ' in cp.read_bytes()
    wd.predictions_file("m", "a").unlink()
    wd.result_file("m", "a").unlink()
    status = json.loads(wd.status_file("m", "a").read_text())
    wd.status_file("m", "a").write_text(json.dumps({**status, "status": "fail", "failed": 1}))
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/a": "100.00"}
    assert sim.stats.requests_total - before == 1  # only the failed sample was asked again
    preds = json.loads(wd.predictions_file("m", "a").read_text())
    assert preds["4"]["prediction"] == failed["prediction"] and "error" not in preds["4"]
    assert preds["5"]["prediction"].endswith(' "error": {not a failure}')
    assert_whole(wd, "a")


def test_zero_filled_and_garbage_checkpoint_lines_are_skipped(capsys, setup) -> None:  # type: ignore[no-untyped-def]
    """A crash of the machine can leave a block of NULs inside a file; a user's editor, any line."""
    plan, sim, wd = first_run(capsys, setup)
    cp = wd.checkpoint_file("m", "b", 0, 2)
    lines = cp.read_bytes().splitlines(keepends=True)
    lines[2] = b"\x00" * 300 + b"\n"  # sample 1 of the shard (line 0 is the version header)
    lines.insert(4, b'{"index": "seven", "prediction": 1}\n')
    lines.insert(5, b"not json at all\n")
    cp.write_bytes(b"".join(lines))
    wd.predictions_file("m", "b").unlink()
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/b": "100.00"}
    assert sim.stats.requests_total - before == 1
    assert_whole(wd, "b")


@pytest.mark.parametrize(
    "garbage",
    [b"", b"\x00\x00\x00\x00", b'{"status": "do', b"[1, 2, 3]\n", b"wrong-types", b"\xff\xfe garbage"],
    ids=["empty", "zeros", "torn", "not-an-object", "wrong-types", "not-utf8"],
)
def test_a_status_file_of_garbage_is_rebuilt_from_the_checkpoints(capsys, setup, garbage: bytes) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = first_run(capsys, setup)
    for path in (wd.status_file("m", "a"), wd.status_file("m", "b", 1, 2)):
        if garbage == b"wrong-types":  # evaltui's own file (its version kept), fields of the wrong type
            path.write_text(json.dumps({**json.loads(path.read_text()), "total": "many", "completed": None, "failed": [1]}))
        else:
            path.write_bytes(garbage)
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert sim.stats.requests_total == before  # every answer was still in the checkpoints
    assert set(scores(text).values()) <= {"100.00"}
    for path in (wd.status_file("m", "a"), wd.status_file("m", "b", 1, 2)):
        assert json.loads(path.read_text())["status"] == "done"
    assert_whole(wd, "a")
    assert_whole(wd, "b")


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.95])
def test_a_half_written_results_file_is_scored_again(capsys, setup, cut: float) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = first_run(capsys, setup)
    path = wd.result_file("m", "a")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut)])
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/a": "100.00"}
    assert sim.stats.requests_total == before
    assert_whole(wd, "a")


def test_a_half_written_predictions_file_is_rebuilt(capsys, setup) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = first_run(capsys, setup)
    path = wd.predictions_file("m", "b")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = sim.stats.requests_total
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/b": "100.00"}
    assert sim.stats.requests_total == before
    assert_whole(wd, "b")


@pytest.mark.parametrize("beat", [b"", b"yesterday-ish\n", b"\xff\xfe\x00", b"2026-13-45T99:99:99\n"], ids=["empty", "words", "not-utf8", "impossible-date"])
def test_an_unparseable_heartbeat_left_behind_does_not_stop_a_run(capsys, setup, beat: bytes) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = setup
    wd.root.mkdir(parents=True)
    mark(wd.root)  # a work dir an earlier run left (a lone heartbeat is no proof of one)
    wd.heartbeat_file.write_bytes(beat)
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    assert scores(text) == {"m/a": "100.00", "m/b": "100.00"}


def _opencompass_workdir(wd: WorkDir) -> None:
    """What OpenCompass's concurrent inference + watch tasks leave: naive local-time heartbeat, no
    `pending` status files (nor versions), predictions and results as its own json.dump writes
    them, and wrong answers in them, so reusing any of it would show as a wrong score."""
    (wd.root).mkdir(parents=True)
    wd.heartbeat_file.write_text(datetime.now().isoformat())  # no time zone, no newline
    for d, status, completed in (("a", "done", N), ("b", "running", 5)):
        for k in range(2 if d == "b" else 1):
            path = wd.status_file("m", d, k, 2 if d == "b" else 1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"status": status, "total": N, "completed": completed}))
    preds = {str(i): {"origin_prompt": r["question"], "prediction": "I do not know", "gold": r["answer"]} for i, r in enumerate(ROWS)}
    wd.predictions_file("m", "a").parent.mkdir(parents=True)
    wd.predictions_file("m", "a").write_text(json.dumps(preds, indent=4, ensure_ascii=False))
    wd.result_file("m", "a").parent.mkdir(parents=True)
    wd.result_file("m", "a").write_text(json.dumps({"accuracy": 0.0, "details": {str(i): {"correct": False} for i in range(N)}}, indent=4))
    with open(wd.checkpoint_file("m", "b", 0, 2), "w") as f:  # OpenCompass's incremental tmp_*.jsonl
        for i in range(5):
            f.write(json.dumps({str(i): preds[str(i)]}) + "\n")


def test_a_work_dir_written_by_opencompass(capsys, setup) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = setup
    _opencompass_workdir(wd)
    code, text = evaltui(capsys, plan)
    assert code == 0, text
    # Its answers cannot be trusted to come from this plan's prompts: both pairs start over, and
    # the user is told so in one line each.
    assert scores(text) == {"m/a": "100.00", "m/b": "100.00"}
    assert sim.stats.requests_total == 2 * N
    for d in ("a", "b"):
        said = [line for line in text.splitlines() if f"m/{d}:" in line and "starting it over" in line]
        assert len(said) == 1, text
        assert "written by another tool" in said[0]
    # and OpenCompass's files are set aside, not deleted
    kept = {p.name for p in (wd.root / "superseded").rglob("*") if p.is_file()}
    assert {"a.json", "tmp_b_0.jsonl", "b_0.json", "b_1.json"} <= kept, kept
    assert_whole(wd, "a")
    assert_whole(wd, "b")


def test_a_work_dir_written_by_opencompass_through_the_real_command(setup) -> None:  # type: ignore[no-untyped-def]
    plan, sim, wd = setup
    _opencompass_workdir(wd)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui"],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert scores(proc.stdout) == {"m/a": "100.00", "m/b": "100.00"}
    assert_whole(wd, "a")
    assert_whole(wd, "b")
    # and the heartbeat is evaltui's own again, with a time zone
    assert datetime.fromisoformat(wd.heartbeat_file.read_text().strip()).tzinfo is not None
    assert abs(time.time() - wd.heartbeat_file.stat().st_mtime) < 600


@pytest.mark.parametrize("details", [3, 5000], ids=["small-one-read", "large-line-by-line"])
def test_a_results_head_is_read_alike_whatever_its_size(tmp_path: Path, details: int) -> None:
    """A result of a few samples is read in one go, a large one line by line: the same head from
    both, and either one cut short, or a FIFO in its place, is not taken for a result."""
    wd = WorkDir(tmp_path)
    path = wd.result_file("m", "a")
    path.parent.mkdir(parents=True)
    lines = ",\n".join(f'    {{"index": {i}, "prediction": "{"x" * 20}", "correct": true}}' for i in range(details))
    text = '{\n  "accuracy": 100.0,\n  "uncertainty": {"accuracy": {"n": 3}},\n  "scored_with": "abc",\n  "details": [\n' + lines + "\n  ]\n}\n"
    assert (len(text) > 64 << 10) == (details > 3)
    path.write_text(text)
    assert wd.read_result("m", "a") == {"accuracy": 100.0, "uncertainty": {"accuracy": {"n": 3}}, "scored_with": "abc"}
    path.write_text(text[:-3])  # cut short: read whole, found invalid
    assert wd.read_result("m", "a") is None
    path.write_text(json.dumps({"error": "x", "details": [{"index": i} for i in range(details)]}) + "\n")  # another layout: read whole
    assert wd.read_result("m", "a") == {"error": "x"}
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(OSError, match="not a regular file"):
        wd.read_result("m", "a")
