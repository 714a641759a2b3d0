"""A damaged or hostile work dir (RELIABILITY.md §11, issue 23): a stop never exits 0 nor shows
an earlier subset's score as the whole dataset's; a file the run reads that is not a regular
file, or is huge, is one line naming it and exit 2; damaged checkpoint lines are set aside and
their samples sent again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

from evaltui.cli import main

pytestmark = pytest.mark.reliability


def sim_plan(tmp_path: Path, n: int = 40, **run: Any) -> Path:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(n))
    models = [{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=1.0", "max_workers": 4}]
    return write_plan(tmp_path, models=models, datasets=[gsm_dataset("d1", data), gsm_dataset("d2", data)], run=run or None)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*argv, "--no-ui", "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_a_fatal_stop_exits_non_zero_and_never_shows_a_subsets_score_as_the_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A status file replaced by a folder stopped the run (`error: stopped: [Errno 21] Is a
    directory … fix this and run again`), then it exited 0, and `--json` showed d1 and d2 at
    100.0: an earlier 20-sample subset's score as the whole dataset's, without "(subset of 20)"."""
    plan = sim_plan(tmp_path)
    code, summary, _ = run_json(capsys, str(plan), "--samples", "0-19")
    assert code == 0 and summary is not None
    assert [d["note"] for d in summary["leaderboard"]["datasets"]] == ["subset of 20", "subset of 20"]
    status = tmp_path / "out" / "infer_status" / "m" / "d1.json"
    status.unlink()
    status.mkdir()  # damaged: a folder where the status file was
    code, summary, err = run_json(capsys, str(plan))
    assert code != 0, err
    board = summary["leaderboard"] if summary else None
    assert board is None or all(score is None for d in board["datasets"] for score in d["scores"].values()), board
    assert board is None or all(v is None for v in board["average"].values())


def checkpoint_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def interrupted_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int = 40) -> tuple[Path, Path]:
    """A plan whose d1 has 30 of its 40 samples in its checkpoint (a --samples run of them), and
    the checkpoint: `{"version"…}` then one line per sample."""
    plan = sim_plan(tmp_path, n)
    assert main([str(plan), "--no-ui", "--samples", "0-29", "--datasets", "d1"]) == 0
    capsys.readouterr()
    checkpoint = tmp_path / "out" / "predictions" / "m" / "tmp_d1.jsonl"
    assert len(checkpoint_lines(checkpoint)) == 31
    return plan, checkpoint


def rerun(plan: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([str(plan), "--no-ui", "--datasets", "d1"])
    out, err = capsys.readouterr()
    return code, out + err


def test_two_checkpoint_lines_run_together_are_set_aside_and_sent_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lost newline ran two lines together: their raw bytes were copied into predictions/m/d1.json,
    which was then not JSON — `scoring FAILED: ValueError` on that run and every re-run."""
    plan, checkpoint = interrupted_run(tmp_path, capsys)
    lines = checkpoint_lines(checkpoint)
    merged = lines[6].rstrip(b"\n") + lines[7]  # samples 5 and 6
    checkpoint.write_bytes(b"".join(lines[:6] + [merged] + lines[8:]))
    code, printed = rerun(plan, capsys)
    assert code == 0, printed
    assert "scoring FAILED" not in printed and "m/d1: scored, accuracy = 100.00" in printed
    assert "1 checkpoint line that is no complete entry of this dataset set aside" in printed
    assert (checkpoint.parent / "tmp_d1.jsonl.damaged").read_bytes() == merged  # kept, beside it
    predictions = json.loads((tmp_path / "out" / "predictions" / "m" / "d1.json").read_text())
    assert sorted(map(int, predictions)) == list(range(40))
    code, printed = rerun(plan, capsys)  # and the next run has nothing to say
    assert code == 0 and "set aside" not in printed and "FAILED" not in printed


@pytest.mark.parametrize(
    "damage",
    [b'{"index":30}\n', b'{"index":31,"origin_prompt":"x","prediction":null,"gold":"#### 1"}\n',
     b'{"index":32,"origin_prompt":"x","prediction":{"text":"#### 1"},"gold":"#### 1"}\n', b"\x00" * 64 + b"\n"],
    ids=["no-prediction", "null-prediction", "object-prediction", "nuls"],
)
def test_a_line_that_is_no_complete_entry_does_not_count_as_done(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes) -> None:
    """`{"index":30}`, a null or an object prediction counted as done and were never sent again."""
    plan, checkpoint = interrupted_run(tmp_path, capsys)
    with open(checkpoint, "ab") as f:
        f.write(damage)
    code, printed = rerun(plan, capsys)
    assert code == 0, printed
    assert "m/d1: scored, accuracy = 100.00" in printed and "set aside" in printed
    predictions = json.loads((tmp_path / "out" / "predictions" / "m" / "d1.json").read_text())
    assert all(isinstance(p["prediction"], str) and p["prediction"] for p in predictions.values())
    assert (checkpoint.parent / "tmp_d1.jsonl.damaged").read_bytes() == damage


def test_lines_under_another_datasets_version_header_are_not_kept_as_this_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checkpoints joined by hand: d2's header and its answers to samples 30-39 appended to d1's
    checkpoint were kept as d1's answers."""
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(40))
    models = [{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=1.0", "max_workers": 4}]
    datasets = [gsm_dataset("d1", data), {**gsm_dataset("d2", data), "prompt": "Answer this: {question}"}]
    plan = write_plan(tmp_path, models=models, datasets=datasets)
    assert main([str(plan), "--no-ui", "--samples", "0-29", "--datasets", "d1"]) == 0
    assert main([str(plan), "--no-ui", "--datasets", "d2"]) == 0
    capsys.readouterr()
    cp1 = tmp_path / "out" / "predictions" / "m" / "tmp_d1.jsonl"
    d2 = checkpoint_lines(tmp_path / "out" / "predictions" / "m" / "tmp_d2.jsonl")
    foreign = [d2[0]] + [line for line in d2[1:] if json.loads(line)["index"] >= 30]
    with open(cp1, "ab") as f:
        f.write(b"".join(foreign))
    code, printed = rerun(plan, capsys)
    assert code == 0, printed
    assert f"{len(foreign)} checkpoint lines that are no complete entry of this dataset set aside" in printed
    predictions = json.loads((tmp_path / "out" / "predictions" / "m" / "d1.json").read_text())
    assert all(not p["origin_prompt"].startswith("Answer this:") for p in predictions.values())
    assert (cp1.parent / "tmp_d1.jsonl.damaged").read_bytes() == b"".join(foreign)


def test_a_finished_pair_whose_predictions_a_damaged_line_broke_is_rebuilt_not_failed_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The state the lost newline left on main: statuses done, predictions/m/d1.json not JSON (the
    two lines' bytes in it), an error result. Every re-run said `already inferred … scoring
    FAILED`; now the checkpoint is read through, the damage set aside, and the pair rebuilt."""
    plan = sim_plan(tmp_path)
    assert main([str(plan), "--no-ui", "--datasets", "d1"]) == 0
    capsys.readouterr()
    folder = tmp_path / "out" / "predictions" / "m"
    lines = checkpoint_lines(folder / "tmp_d1.jsonl")
    (folder / "tmp_d1.jsonl").write_bytes(b"".join(lines[:6] + [lines[6].rstrip(b"\n") + lines[7]] + lines[8:]))
    text = (folder / "d1.json").read_text()
    (folder / "d1.json").write_text(text.replace('},\n  "6": ', "}"))  # as the merge copied it: not JSON
    result = tmp_path / "out" / "results" / "m" / "d1.json"
    result.write_text(json.dumps({"error": "ValueError: d1.json: not a JSON object of predictions"}))
    code, printed = rerun(plan, capsys)
    assert code == 0, printed
    assert "set aside" in printed and "FAILED" not in printed and "m/d1: scored, accuracy = 100.00" in printed
    assert sorted(map(int, json.loads((folder / "d1.json").read_text()))) == list(range(40))


# ------------------------------------------------- files that are no files of their kind (E5)


def _evaltui(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command in a process of its own, bounded: 60 s and 4 GiB of address space (on the
    main before the fix a FIFO hung the reader and /dev/zero was read until memory ran out)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([sys.executable, "-m", "evaltui", *argv], capture_output=True, text=True, timeout=60, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, preexec_fn=limit)


def _replace(path: Path, kind: str) -> None:
    """Put a FIFO, a symlink to /dev/zero, a folder or a 1 GiB sparse file where `path` was."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(1 << 30)


SAID = {"fifo": "is a FIFO (named pipe), not a regular file", "dev-zero": "is a device, not a regular file",
        "folder": "is a folder, not a regular file", "huge": "larger than the"}


@pytest.mark.parametrize(
    ("target", "kind"),
    [("infer_status/m/d1.json", "fifo"), ("infer_status/m/d1.json", "dev-zero"), ("infer_status/m/d1.json", "huge"),
     ("predictions/m/tmp_d1.jsonl", "fifo"), ("predictions/m/tmp_d1.jsonl", "dev-zero"), ("results/m/d1.json", "dev-zero"),
     ("logs/samples/m/d1.jsonl", "fifo")],
    ids=lambda x: str(x).replace("/", "-"),
)
def test_a_run_over_a_work_dir_file_that_is_no_file_of_its_kind_is_one_line_and_exit_2(tmp_path: Path, target: str, kind: str) -> None:
    """A FIFO hung the run, /dev/zero grew it to 3–4 GB (a MemoryError traceback), a folder was an
    IsADirectoryError traceback: each is now one line naming the file, exit 2, at once."""
    plan = sim_plan(tmp_path)
    first = _evaltui(str(plan), "--no-ui", "--samples", "0-19", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    path = tmp_path / "out" / target
    _replace(path, kind)
    proc = _evaltui(str(plan), "--no-ui", cwd=tmp_path)
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 2, printed
    assert "Traceback" not in printed
    said = [line for line in printed.splitlines() if str(path) in line]
    assert len(said) == 1 and SAID[kind] in said[0], printed


@pytest.mark.parametrize(("target", "kind"), [("infer_status/m/d1.json", "fifo"), ("results/m/d1.json", "dev-zero"), ("plan.toml", "fifo")],
                         ids=lambda x: str(x).replace("/", "-"))
def test_show_over_such_a_file_is_one_line_and_exit_2(tmp_path: Path, target: str, kind: str) -> None:
    plan = sim_plan(tmp_path)
    assert _evaltui(str(plan), "--no-ui", cwd=tmp_path).returncode == 0
    _replace(tmp_path / "out" / target, kind)
    proc = _evaltui("show", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert str(tmp_path / "out" / target) in proc.stderr and SAID[kind] in proc.stderr


@pytest.mark.parametrize(("target", "kind"), [("infer_status/m/d1.json", "fifo"), ("infer_heartbeat", "fifo"), ("results/m/d1.json", "dev-zero")],
                         ids=lambda x: str(x).replace("/", "-"))
def test_watch_over_such_a_file_is_one_line_and_exit_2(tmp_path: Path, target: str, kind: str) -> None:
    plan = sim_plan(tmp_path)
    assert _evaltui(str(plan), "--no-ui", cwd=tmp_path).returncode == 0
    _replace(tmp_path / "out" / target, kind)
    proc = _evaltui("watch", str(tmp_path / "out"), "--no-ui", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if str(tmp_path / "out" / target) in line]
    assert len(said) == 1 and SAID[kind] in said[0], proc.stderr


# ----------------------------------------------------- scheduling cost per dataset, not per dataset²


def test_the_cost_of_a_run_of_many_datasets_does_not_grow_with_their_number_squared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 datasets of 3 samples: 111 s before the first started, then ~6 s per dataset. The
    watch-scorer read every pending pair's status files at each dataset's end, and planning and
    each merge listed the folder of every pair's files: both grew with the datasets squared.
    Counted here over 60 datasets (no timing asserted): status reads and folder listings grow with
    the datasets, not their square."""
    from evaltui.engine.disk.workdir import WorkDir

    n = 60
    data = tmp_path / "data"
    data.mkdir()
    datasets = []
    for d in range(n):
        path = write_jsonl(data / f"d{d}.jsonl", [{"question": f"D{d}: what is 1 + {d}?", "answer": f"#### {1 + d}"}])
        datasets.append(gsm_dataset(f"d{d}", path))
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "sim://?latency=0.001", "max_workers": 8}], datasets=datasets)
    reads = [0]
    real_read = WorkDir.read_status

    def counted_read(self: WorkDir, *args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return real_read(self, *args, **kwargs)

    listings = [0]
    real_scandir, real_listdir, real_glob = os.scandir, os.listdir, Path.glob

    def counted_scandir(path: Any = ".") -> Any:
        listings[0] += "predictions" in str(path) or "infer_status" in str(path)
        return real_scandir(path)

    def counted_listdir(path: Any = ".") -> Any:
        listings[0] += "predictions" in str(path) or "infer_status" in str(path)
        return real_listdir(path)

    def counted_glob(self: Path, pattern: str) -> Any:
        listings[0] += "predictions" in str(self) or "infer_status" in str(self)
        return real_glob(self, pattern)

    monkeypatch.setattr(WorkDir, "read_status", counted_read)
    monkeypatch.setattr(os, "scandir", counted_scandir)
    monkeypatch.setattr(os, "listdir", counted_listdir)
    monkeypatch.setattr(Path, "glob", counted_glob)
    assert main([str(plan), "--no-ui"]) == 0
    assert reads[0] <= 6 * n, reads[0]  # main: ~n²/2 (1,800+ here)
    assert listings[0] <= 3 * n, listings[0]


def test_the_first_datasets_start_while_the_rest_are_still_being_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning writes each pair's `pending` status and reads its earlier files: 10,000 datasets
    planned before the first was handed out kept the server idle for tens of seconds. They are
    planned in growing chunks, each handed to the pool once planned: planning a later chunk waits
    here until a dataset has started (it never would on main, where one planning covers them all),
    and every dataset is still planned once, run once and scored."""
    import threading

    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.engine.run.session import Session
    from evaltui.engine.stream import events as ev
    from evaltui.plan import load_plan

    n = 40  # more than the first chunk (16)
    data = tmp_path / "data"
    data.mkdir()
    datasets = [gsm_dataset(f"d{d}", write_jsonl(data / f"d{d}.jsonl", [{"question": f"D{d}: 1 + {d}?", "answer": f"#### {1 + d}"}])) for d in range(n)]
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "sim://?latency=0.001", "max_workers": 4}], datasets=datasets)
    events: list[ev.Event] = []
    one_started = threading.Event()

    def sink(e: ev.Event) -> None:
        events.append(e)
        if isinstance(e, ev.DatasetStarted):
            one_started.set()

    plans: list[int] = []
    real_plan = Session._plan

    def chunk_after_a_start(self: Session, pool: Any, chunk: list[Any], *args: Any) -> Any:
        if plans:  # a later chunk (in a worker thread): once a dataset has started, at most 30 s on
            one_started.wait(30)
        plans.append(len(chunk))
        return real_plan(self, pool, chunk, *args)

    monkeypatch.setattr(Session, "_plan", chunk_after_a_start)
    runner = Runner(load_plan(plan), sink=sink)

    async def bounded() -> int:
        with anyio.fail_after(120):
            return await runner.run()

    assert anyio.run(bounded) == 0
    planned = [i for i, e in enumerate(events) if isinstance(e, ev.DatasetPlanned)]
    started = [i for i, e in enumerate(events) if isinstance(e, ev.DatasetStarted)]
    assert sum(plans) == len(planned) == len(started) == n
    assert started[0] < planned[-1]  # main: every dataset planned (in one go) before the first started
    assert sorted(e.dataset for e in events if isinstance(e, ev.DatasetScored)) == sorted(f"d{d}" for d in range(n))
