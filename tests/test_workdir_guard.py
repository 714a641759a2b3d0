"""A work dir that could hurt the machine or someone's files is refused before anything is written
(RELIABILITY.md §8): the filesystem root, the home folder, a system folder (also through a
symlink), an existing folder of other files, a path with a NUL byte or under /proc.

The refusals run the real command (`python -m evaltui PLAN --no-ui`) with HOME pointed at a
folder of the test's, and the child may write only under the test's own folder (tests/confined.py):
should a refusal regress, the test fails without having written into `/` or `/etc`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confined import available, writes_only_under
from planmaker import (
    arithmetic,
    gsm_dataset,
    key_for,
    lightllm,
    write_jsonl,
    write_plan,
)

from evaltui.cli import main
from evaltui.engine.disk.guard import MARKER, refusal
from evaltui.sim import ModelProfile, SimConfig

pytestmark = pytest.mark.reliability

ROWS = arithmetic(4)
WRITTEN = ("plan.toml", ".evaltui.lock", MARKER, "infer_status", "predictions", "infer_heartbeat", "logs")


def _plan(tmp_path: Path, url: str = "http://127.0.0.1:9", **run: str) -> Path:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    return write_plan(tmp_path, models=[lightllm("m", url, retry=0)], datasets=[gsm_dataset("d", data)], run=run)


def _evaltui(tmp_path: Path, plan: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command, HOME in the test's folder, writes confined to the test's folder."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui", *args],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
        preexec_fn=writes_only_under(str(tmp_path)),
    )


def _refused(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and proc.stdout == "", proc.stdout + proc.stderr
    assert "Traceback" not in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _ours_in(folder: str) -> set[str]:
    """Which of the names a run writes exist in `folder` (none, unless the machine has such a file)."""
    return {name for name in WRITTEN if os.path.lexists(os.path.join(folder, name))}


needs_landlock = pytest.mark.skipif(not available(), reason="no Landlock in this kernel: the confinement that keeps a regression from writing into system folders")


@needs_landlock
@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("/", "the filesystem root"),
        ("/etc", "a system folder"),
        ("/usr/share/evaltui-test-never-made", "inside the system folder /usr"),
        ("/proc/self", "inside the system folder /proc"),
    ],
)
def test_a_system_folder_or_the_root_is_refused_before_anything_is_written(tmp_path: Path, where: str, said: str) -> None:
    assert refusal(where) is not None  # the refusal holds in-process before the command may try it
    before = _ours_in(where)
    line = _refused(_evaltui(tmp_path, _plan(tmp_path), "--work-dir", where), "plan.toml: --work-dir: ", said)
    if where == "/proc/self":
        assert "resolves to /proc/" in line  # where it really points
    assert _ours_in(where) == before
    assert not os.path.exists("/usr/share/evaltui-test-never-made")


@needs_landlock
def test_a_symlink_to_etc_in_the_plan_is_refused_saying_what_it_resolved_to(tmp_path: Path) -> None:
    (tmp_path / "outputs").symlink_to("/etc")
    line = _refused(_evaltui(tmp_path, _plan(tmp_path, work_dir="outputs/run1")), "plan.toml: run.work_dir: ")
    assert "resolves to /etc/run1" in line and "inside the system folder /etc" in line
    assert not os.path.exists("/etc/run1")


@needs_landlock
def test_the_home_folder_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _refused(_evaltui(tmp_path, _plan(tmp_path, work_dir="~")), "plan.toml: run.work_dir: ", "your home folder")
    _refused(_evaltui(tmp_path, _plan(tmp_path), "--work-dir", str(home)), "plan.toml: --work-dir: ", "your home folder")
    assert os.listdir(home) == []


@needs_landlock
def test_a_folder_of_someone_elses_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("chapter 1")
    (theirs / "plan.toml").write_text("# their own plan, which evaltui's snapshot would overwrite")
    line = _refused(_evaltui(tmp_path, _plan(tmp_path), "--work-dir", str(theirs)), "plan.toml: --work-dir: ")
    assert "not an evaltui work dir" in line and "plan.toml" in line and "thesis.tex" in line
    assert sorted(os.listdir(theirs)) == ["plan.toml", "thesis.tex"]
    assert (theirs / "plan.toml").read_text().startswith("# their own plan")


@needs_landlock
def test_a_work_dir_with_a_nul_byte_is_refused_in_one_line(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    plan.write_text(plan.read_text().replace('work_dir = "out"', 'work_dir = "o\\u0000x"'))
    _refused(_evaltui(tmp_path, plan), "plan.toml: run.work_dir: ", "NUL")
    assert not (tmp_path / "o").exists()


def test_a_file_where_the_work_dir_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("not a folder")
    assert "is not a folder" in (refusal(tmp_path / "out") or "")


def test_new_empty_earlier_and_opencompass_work_dirs_are_accepted_and_marked(tmp_path: Path, sim_factory, capsys) -> None:  # type: ignore[no-untyped-def]
    """What stays usable: a folder that does not exist yet, an empty one, one an earlier evaltui
    wrote (no marker: plan.toml, .evaltui.lock, infer_status/), and an OpenCompass one (only its
    own layout: infer_status/, predictions/; see tests/test_torn_files.py)."""
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=1.0)}))
    plan = _plan(tmp_path, sim.url)
    (tmp_path / "empty").mkdir()
    (tmp_path / "opencompass" / "predictions" / "m").mkdir(parents=True)
    (tmp_path / "opencompass" / "predictions" / "m" / "other.json").write_text("{}")
    for where in ("new", "empty", "opencompass"):
        assert main([str(plan), "--no-ui", "--work-dir", str(tmp_path / where)]) == 0, capsys.readouterr()
        assert (tmp_path / where / MARKER).is_file()
    earlier = tmp_path / "new"
    (earlier / MARKER).unlink()  # as an evaltui before the marker left it
    assert {"plan.toml", ".evaltui.lock", "infer_status"} <= set(os.listdir(earlier))
    assert refusal(earlier) is None
    assert main([str(plan), "--no-ui", "--work-dir", str(earlier)]) == 0
    assert (earlier / MARKER).is_file()
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_fresh_and_start_up_move_or_delete_only_what_evaltui_wrote(tmp_path: Path, sim_factory, capsys) -> None:  # type: ignore[no-untyped-def]
    """--fresh sets aside the plan's own pairs (their status, checkpoint, predictions and result
    files) and start-up clears evaltui's own temporaries; a user's files beside them, whatever
    their names, stay where they are, byte for byte."""
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=1.0)}))
    plan = _plan(tmp_path, sim.url)
    wd = tmp_path / "out"
    assert main([str(plan), "--no-ui"]) == 0
    theirs = {
        "notes.txt": "mine",
        ".notes.tmp": "an editor's swap file",
        "predictions/m/.draft.tmp": "mine",
        "predictions/m/d_backup.json": "{}",
        "predictions/m/d.json.orig": "{}",
        "predictions/other/d.json": "{}",
        "results/m/d.json.bak": "{}",
        "infer_status/m/d-copy.json": "{}",
        ".sandbox/mine.txt": "kept",
    }
    for name, text in theirs.items():
        (wd / name).parent.mkdir(parents=True, exist_ok=True)
        (wd / name).write_text(text)
    assert main([str(plan), "--no-ui", "--fresh"]) == 0
    out = capsys.readouterr()
    assert "set aside" in out.out + out.err
    for name, text in theirs.items():
        assert (wd / name).read_text() == text, name
    moved = {p.relative_to(wd).parts[2:] for p in (wd / "superseded").rglob("*") if p.is_file()}
    assert moved == {
        ("predictions", "m", "d.json"), ("predictions", "m", "tmp_d.jsonl"), ("results", "m", "d.json"), ("infer_status", "m", "d.json"),
        ("logs", "samples", "m", "d.jsonl"),  # the per-sample log is the pair's too
    }


def _theirs(folder: Path, *entries: str) -> Path:
    """A folder of someone's own: their plan.toml and notes, plus `entries` (a trailing / makes a folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.toml").write_text("# their own plan, not evaltui's snapshot\n")
    (folder / "notes.md").write_text("notes")
    for entry in entries:
        path = folder / entry
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry.endswith("/"):
            path.mkdir(exist_ok=True)
        else:
            path.write_text("{}" if entry.endswith(".json") else "")
    return folder


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): (p.read_text() if p.is_file() else "/") for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize(
    "entry",
    ["predictions/", "infer_status/", ".evaltui.lock", "infer_heartbeat", ".evaltui/", "predictions/m/", "infer_status/m/notes.txt"],
)
def test_one_name_evaltui_uses_is_no_evidence_of_a_work_dir(tmp_path: Path, entry: str) -> None:
    """An empty predictions/, a lone lock file or heartbeat: names anyone may use, not a work dir."""
    why = refusal(_theirs(tmp_path / "proj", entry))
    assert why is not None and "not an evaltui work dir" in why, why


def test_a_marker_file_of_someone_elses_is_no_evidence(tmp_path: Path) -> None:
    folder = _theirs(tmp_path / "proj")
    (folder / MARKER).write_text("[settings of some other tool]\n")
    assert "not an evaltui work dir" in (refusal(folder) or "")


@needs_landlock
def test_fresh_in_a_folder_with_their_own_predictions_and_plan_moves_nothing(tmp_path: Path) -> None:
    """Their predictions/m/d.json has an OpenCompass name, but their plan.toml is not evaltui's:
    refused (a run would overwrite it), and --fresh moves nothing."""
    folder = _theirs(tmp_path / "proj", "predictions/m/d.json")
    before = _tree(folder)
    line = _refused(_evaltui(tmp_path, _plan(tmp_path), "--work-dir", str(folder), "--fresh"), "plan.toml: --work-dir: ")
    assert "plan.toml" in line and "did not write" in line, line
    assert _tree(folder) == before


def test_a_file_where_the_run_keeps_a_folder_is_refused_before_anything_is_made(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "wd"
    folder.mkdir()
    (folder / MARKER).write_text("evaltui work dir: written by an earlier run\n")
    (folder / "results").write_text("someone's results, a file")
    assert main([str(_plan(tmp_path)), "--no-ui", "--work-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--work-dir" in err and "results" in err and "not a folder" in err, err
    assert sorted(os.listdir(folder)) == [MARKER, "results"]


def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """The lock is opened and truncated: through a symlink that would empty the file it points to."""
    folder = tmp_path / "wd"
    folder.mkdir()
    (folder / MARKER).write_text("evaltui work dir: written by an earlier run\n")
    (tmp_path / "precious.txt").write_text("keep me")
    (folder / ".evaltui.lock").symlink_to(tmp_path / "precious.txt")
    assert "not a file" in (refusal(folder) or "")


@pytest.mark.parametrize(
    "entries",
    [
        ("predictions/m/d.json",),
        ("predictions/m/tmp_d.jsonl",),
        ("infer_status/m/d.json",),
    ],
)
def test_an_opencompass_layout_without_a_plan_is_accepted(tmp_path: Path, entries: tuple[str, ...]) -> None:
    folder = tmp_path / "oc"
    for entry in entries:
        (folder / entry).parent.mkdir(parents=True, exist_ok=True)
        (folder / entry).write_text("{}")
    (folder / "configs").mkdir()
    assert refusal(folder) is None


def test_a_work_dir_of_an_evaltui_before_the_marker_is_known_by_its_lock_and_its_own_plan(tmp_path: Path, sim_factory, capsys) -> None:  # type: ignore[no-untyped-def]
    sim = sim_factory(SimConfig(answer_key=key_for(ROWS), models={"m": ModelProfile(accuracy=1.0)}))
    plan = _plan(tmp_path, sim.url)
    assert main([str(plan), "--no-ui"]) == 0
    wd = tmp_path / "out"
    for name in (MARKER, "infer_status", "predictions", "results"):
        path = wd / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    assert {".evaltui.lock", "plan.toml"} <= set(os.listdir(wd))
    assert refusal(wd) is None  # the lock and evaltui's own snapshot of the plan
    (wd / "plan.toml").write_text("# their own plan now\n")
    assert "not an evaltui work dir" in (refusal(wd) or "")  # a lock beside someone's plan is no proof
    capsys.readouterr()


def test_a_symlink_loop_is_said_as_such(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert "a symlink loop" in (refusal(tmp_path / "a") or "")


def test_an_empty_work_dir_option_is_refused_naming_it(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([str(_plan(tmp_path)), "--no-ui", "--work-dir", ""]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--work-dir" in err[0] and "empty" in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_lock_is_released_when_marking_the_work_dir_fails(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import evaltui.engine.run.runner as runner_module
    from evaltui.engine.disk.workdir import WorkDir

    def full_disk(root: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner_module, "mark", full_disk)
    assert main([str(_plan(tmp_path)), "--no-ui"]) == 2
    assert "No space left on device" in capsys.readouterr().out
    os.close(WorkDir(tmp_path / "out").lock())  # WorkDirBusy had the failed run kept its lock


def test_start_up_clears_only_temporaries_with_evaltuis_own_names(tmp_path: Path) -> None:
    """mkstemp's temporaries are `.<a file evaltui writes there>.<exactly 8 random>.tmp`; a user's
    `.user.backup.tmp` (6 letters where the random ones go) or `.notes.abcdefgh.tmp` (a name
    evaltui never writes) is theirs."""
    from evaltui.engine.disk.workdir import WorkDir

    wd = WorkDir(tmp_path / "wd")
    ours = [
        ".plan.toml.k2j_9xq1.tmp", ".infer_heartbeat.abcdefgh.tmp", "infer_status/m/.d_1.json.a1b2c3d4.tmp",
        "predictions/m/.d.json.zz_zz_zz.tmp", "predictions/m/.tmp_d_0.jsonl.q1w2e3r4.tmp", "results/m/.d.json.00000000.tmp",
        "summary/.summary_20261203_120000.csv.abcd1234.tmp", "summary/.models_20261203_120000.csv.abcd1234.tmp",
        "summary/.cost_20261203_120000.csv.abcd1234.tmp",
    ]
    theirs = [
        "predictions/.user.backup.tmp", "predictions/m/.user.backup.tmp", ".notes.abcdefgh.tmp", ".plan.toml.abc.tmp",
        "predictions/m/.d.json.abcdefghi.tmp", "results/m/deeper/.d.json.abcdefgh.tmp", "summary/.mine.abcdefgh.tmp",
        "infer_status/m/.d.txt.abcdefgh.tmp", "summary/.models_20261203_120000.txt.abcdefgh.tmp",
    ]
    for name in ours + theirs:
        (wd.root / name).parent.mkdir(parents=True, exist_ok=True)
        (wd.root / name).write_text("x")
    wd.clear_leftovers()
    assert [n for n in ours if (wd.root / n).exists()] == []
    assert [n for n in theirs if not (wd.root / n).exists()] == []


@pytest.mark.parametrize(
    "left",
    [
        {".evaltui.lock": "4242\n"},  # an earlier evaltui locked first and was killed before its marker
        {".evaltui": ""},  # a marker created in place, killed before its text
        {"..evaltui.k2j_9xq1.tmp": "evaltui work dir: evaltui wr"},  # the marker's temporary, cut short
        {".evaltui.lock": "", "..evaltui.k2j_9xq1.tmp": ""},
    ],
)
def test_a_work_dir_a_run_was_killed_in_while_starting_is_taken_again(tmp_path: Path, left: dict[str, str]) -> None:
    """A kill -9 as a run starts leaves at most these; the re-run must not take them for someone's files."""
    folder = tmp_path / "wd"
    folder.mkdir()
    for name, text in left.items():
        (folder / name).write_text(text)
    assert refusal(folder) is None
    (folder / "notes.md").write_text("mine")
    assert "not an evaltui work dir" in (refusal(folder) or "")  # anything else beside them is someone's


def test_a_kill_while_the_marker_is_written_leaves_a_folder_a_rerun_takes(tmp_path: Path) -> None:
    """The marker's temporary exactly as the writer names it, half-written, as a kill -9 leaves it
    (the crash suite's re-run once exited 2: the guard expected another name for it)."""
    from evaltui.engine.disk.guard import mark
    from evaltui.fsutil import atomic_writer

    folder = tmp_path / "wd"
    folder.mkdir()
    with atomic_writer(folder / MARKER) as f:
        f.write(b"evaltui work d")
        f.flush()
        (left,) = os.listdir(folder)  # the moment a kill would freeze
        assert left != MARKER
        assert refusal(folder) is None
    os.replace(folder / MARKER, folder / left)  # the killed write: its temporary, never renamed
    assert refusal(folder) is None
    mark(folder)  # the re-run's
    assert refusal(folder) is None and (folder / MARKER).read_text().startswith("evaltui work dir")


def test_the_marker_is_written_before_the_lock(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """So that no moment of a start leaves a lone lock file behind a kill."""
    from evaltui.engine.disk.workdir import WorkDir

    seen: list[list[str]] = []
    real_lock = WorkDir.lock

    def lock(self: WorkDir) -> int:
        seen.append(sorted(os.listdir(self.root)))
        return real_lock(self)

    monkeypatch.setattr(WorkDir, "lock", lock)
    assert main([str(_plan(tmp_path)), "--no-ui", "--work-dir", str(tmp_path / "fresh")]) in (0, 1)
    assert seen and seen[0] == [MARKER]
    capsys.readouterr()
