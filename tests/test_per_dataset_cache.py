"""What a run keeps of each dataset so that 10,000 small ones cost little more than one large one
(a data file's count and fingerprint, its path, its versions, a pair's work-dir paths): none of it
may serve stale facts. A data file edited or replaced between two runs of one process is seen as
it is now, a plan copied from elsewhere finds its files there, and a dataset's settings changed
by a copy get their own fingerprint."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.datasets import check_dataset, count_records, file_fingerprint
from evaltui.engine.disk.versions import dataset_fingerprint, evaluator_version
from evaltui.engine.disk.workdir import _LEFTOVERS, WorkDir
from evaltui.engine.stream import events as ev
from evaltui.fsutil import atomic_write_bytes, atomic_write_json, atomic_writer, dumps_readable, real_path_text
from evaltui.plan import DatasetConfig, Plan, load_plan
from evaltui.sim import SimConfig

RECORDS = '{"question": "one", "answer": "1"}\n{"question": "two", "answer": "2"}\n'


def plan_for(folder: Path, **ds: Any) -> tuple[Plan, DatasetConfig]:
    dataset = {"abbr": "d", "path": "d.jsonl", "prompt": "{question}", "target": "{answer}", **ds}
    data = {"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": [dataset]}
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    plan = load_plan(path)
    return plan, plan.datasets[0]


def test_a_data_file_edited_between_two_runs_is_counted_and_fingerprinted_anew(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)  # load_plan's check counted the records
    assert count_records(plan, ds) == 2
    before, version = file_fingerprint(plan, ds), dataset_fingerprint(plan, ds)
    assert file_fingerprint(plan, ds) == before and dataset_fingerprint(plan, ds) == version  # asked again: the same
    with (tmp_path / "d.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"question": "three", "answer": "3"}\n')
    assert count_records(plan, ds) == 3
    assert file_fingerprint(plan, ds) not in (None, before)
    assert dataset_fingerprint(plan, ds) != version
    assert check_dataset(plan, ds) == []


def test_a_data_file_replaced_by_one_of_the_same_size_and_time_is_seen(tmp_path: Path) -> None:
    """A rename over the file (a download put in place, a copy that kept the time) leaves its size
    and mtime as they were: the file is another (its inode), so it is counted and hashed again."""
    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)
    assert count_records(plan, ds) == 2
    before = file_fingerprint(plan, ds)
    old = data.stat()
    one = '{"question": "one", "answer": "9"}\n'
    new = tmp_path / "new.jsonl"
    new.write_text(one + "\n" * (len(RECORDS) - len(one)), encoding="utf-8")  # one record, blank lines to the same size
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(new, data)
    assert (data.stat().st_size, data.stat().st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    assert count_records(plan, ds) == 1
    assert file_fingerprint(plan, ds) not in (None, before)


def test_a_data_file_gone_is_no_fingerprint_however_often_it_was_hashed(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)
    assert file_fingerprint(plan, ds) is not None
    (tmp_path / "d.jsonl").unlink()
    assert file_fingerprint(plan, ds) is None
    assert dataset_fingerprint(plan, ds) == ""


def test_a_dataset_copied_with_other_settings_has_its_own_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)
    version = dataset_fingerprint(plan, ds)
    chosen = ds.model_copy(update={"sample_ids": [1]})
    assert dataset_fingerprint(plan, chosen) != version
    assert dataset_fingerprint(plan, ds) == version
    thrice = plan.model_copy(update={"run": plan.run.model_copy(update={"epochs": 3})})
    assert dataset_fingerprint(thrice, ds) != version  # the epochs are the plan's: part of the key
    other = ds.model_copy(update={"evaluator": ds.evaluator.model_copy(update={"type": "gsm8k"})})
    assert evaluator_version(other) != evaluator_version(ds)
    assert dataset_fingerprint(plan, other) != version


def test_a_plan_copied_from_another_folder_finds_its_data_there(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)
    assert plan.dataset_path(ds) == tmp_path / "d.jsonl"
    moved = plan.model_copy(update={"source": tmp_path / "elsewhere" / "plan.toml"})
    assert moved.dataset_path(ds) == tmp_path / "elsewhere" / "d.jsonl"
    assert plan.dataset_path(ds) == tmp_path / "d.jsonl"


def test_a_home_relative_path_follows_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for home in ("a", "b"):
        (tmp_path / home).mkdir()
        (tmp_path / home / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path / "a"))
    plan, ds = plan_for(tmp_path, path="~/d.jsonl")
    assert plan.dataset_path(ds) == tmp_path / "a" / "d.jsonl"
    monkeypatch.setenv("HOME", str(tmp_path / "b"))
    assert plan.dataset_path(ds) == tmp_path / "b" / "d.jsonl"


def test_a_pairs_paths_are_those_of_the_work_dir_layout(tmp_path: Path) -> None:
    """SPEC §6's names, asked for more than once (the second answer is the one kept)."""
    wd = WorkDir(tmp_path)
    for _ in range(2):
        assert wd.status_file("m", "d") == tmp_path / "infer_status" / "m" / "d.json"
        assert wd.status_file("m", "d", 1, 3) == tmp_path / "infer_status" / "m" / "d_1.json"
        assert wd.checkpoint_file("m", "d", 2, 3) == tmp_path / "predictions" / "m" / "tmp_d_2.jsonl"
        assert wd.checkpoint_file("m", "d") == tmp_path / "predictions" / "m" / "tmp_d.jsonl"
        assert wd.predictions_file("m", "d") == tmp_path / "predictions" / "m" / "d.json"
        assert wd.result_file("m", "d") == tmp_path / "results" / "m" / "d.json"
        assert wd.result_file("n", "d") == tmp_path / "results" / "n" / "d.json"
        assert wd.verdicts_file("m", "d") == tmp_path / "judgments" / "m" / "d.jsonl"
        assert wd.sample_log_file("m", "d", 0, 2) == tmp_path / "logs" / "samples" / "m" / "d_0.jsonl"
    assert WorkDir(tmp_path / "x").result_file("m", "d") == tmp_path / "x" / "results" / "m" / "d.json"


def test_a_path_resolved_by_its_folder_is_the_path_resolved_whole(tmp_path: Path) -> None:
    """The plan snapshot resolves each data file's folder once (fsutil.real_path_text): a file that is a
    link, a folder that is one, a file not there, `..` come out as Path.resolve() has them."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    (tmp_path / "linked").symlink_to(real)
    (real / "link.jsonl").symlink_to(tmp_path / "other.jsonl")
    (real / "loop.jsonl").symlink_to(real / "loop.jsonl")
    folders: dict[str, str] = {}
    for path in (real / "d.jsonl", tmp_path / "linked" / "d.jsonl", tmp_path / "linked" / "link.jsonl", tmp_path / "linked" / "gone.jsonl",
                 tmp_path / "linked" / "..", tmp_path / "no" / "such" / "d.jsonl", tmp_path / "linked" / "d.jsonl"):
        assert Path(real_path_text(path, folders)) == path.resolve(), path
    with pytest.raises(RuntimeError):
        (real / "loop.jsonl").resolve()
    with pytest.raises(RuntimeError):
        real_path_text(real / "loop.jsonl", folders)


def test_the_plan_snapshot_names_each_data_file_by_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "d.jsonl").write_text(RECORDS, encoding="utf-8")
    (real / "e.jsonl").write_text(RECORDS, encoding="utf-8")
    (tmp_path / "linked").symlink_to(real)
    (tmp_path / "f.jsonl").symlink_to(real / "e.jsonl")
    plan, _ = plan_for(tmp_path, path="linked/d.jsonl")
    two = plan.model_copy(update={"datasets": [*plan.datasets, plan.datasets[0].model_copy(update={"abbr": "e", "path": "f.jsonl"})]})
    assert [d["path"] for d in two.snapshot()["datasets"]] == [str((real / "d.jsonl").resolve()), str((real / "e.jsonl").resolve())]


def test_a_run_counts_a_data_file_edited_after_its_plan_was_checked(tmp_path: Path, sim_factory: Any) -> None:
    """The run takes the counts load_plan's check made only while the file is that file: one that
    grew between the check and the run (and again between two runs of one process, with one
    plan object) has all its records run."""
    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "data" / "d.jsonl", rows[:2])
    plan = load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))
    write_jsonl(data, rows[:4])
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 4
    assert [e.total for e in of_type(events, ev.DatasetPlanned)] == [4]
    write_jsonl(data, rows)
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 4 + 6  # a changed file: its pair starts over
    assert [e.total for e in of_type(events, ev.DatasetPlanned)] == [6]


def test_a_whole_file_write_makes_its_folder_and_leaves_no_temporary(tmp_path: Path) -> None:
    """atomic_write_bytes/atomic_writer make their temporaries themselves (not through mkstemp):
    still `.<name>.<8 letters>.tmp` beside the file (what clear_leftovers knows as evaltui's), the
    folder made when it is missing, the file's mode the umask's, nothing left after a failure."""
    umask = os.umask(0)
    os.umask(umask)
    target = tmp_path / "results" / "m" / "d.json"
    with atomic_writer(target) as f:
        f.write(b"{}\n")
        (tmp,) = target.parent.iterdir()
        assert _LEFTOVERS["results/*"].match(tmp.name), tmp.name
    assert target.read_bytes() == b"{}\n" and list(target.parent.iterdir()) == [target]
    atomic_write_json(target, {"accuracy": 1.0})
    assert target.read_text() == '{\n  "accuracy": 1.0\n}\n' and (target.stat().st_mode & 0o777) == 0o666 & ~umask
    assert list(target.parent.iterdir()) == [target]

    def refuse(tmp: str, path: Path) -> None:
        raise OSError("stale")

    with pytest.raises(OSError, match="stale"), atomic_writer(target, replace=refuse) as f:
        f.write(b"new")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):  # a file where its folder should be: said as mkdir says it
        atomic_write_bytes(tmp_path / "file" / "d.json", b"{}")
    assert list(target.parent.iterdir()) == [target] and target.read_bytes() == b'{\n  "accuracy": 1.0\n}\n'


@pytest.mark.parametrize(
    ("obj", "text"),
    [
        ({"status": "done", "total": 3, "error": "", "urls": ["http://a", "http://b"], "ok": True, "x": None, "f": 1.5, "e": []},
         '{\n  "status": "done",\n  "total": 3,\n  "error": "",\n  "urls": [\n    "http://a",\n    "http://b"\n  ],\n  "ok": true,\n'
         '  "x": null,\n  "f": 1.5,\n  "e": []\n}\n'),
        ({"error": "half an emoji \ud83d", "n": 2**70}, '{\n  "error": "half an emoji \\ud83d",\n  "n": 1180591620717411303424\n}\n'),
        ({"details": [{"a": [1, 2]}, 3], "m": {"k": 1}}, '{\n  "details": [\n    {"a":[1,2]},\n    3\n  ],\n  "m": {"k":1}\n}\n'),
        ({1: "a"}, '{\n  "1": "a"\n}\n'),
        ({}, "{}\n"),
    ],
)
def test_readable_json_keeps_its_layout_whichever_way_it_is_made(obj: dict[Any, Any], text: str) -> None:
    """dumps_readable makes a status file's kind in one orjson call and anything else entry by
    entry (a lone surrogate, an int beyond 64 bits, nested values): one layout either way."""
    assert dumps_readable(obj) == text


@pytest.mark.parametrize(
    ("name", "content", "extra"),
    [
        ("d.jsonl", "\ufeff" + RECORDS + "\n\n", {}),
        ("d.jsonl", RECORDS * 3000, {"limit": 1}),  # the check stops at the limit: the rest is hashed when it closes the file
        ("d.jsonl", RECORDS * 3, {"limit": 1}),  # a small file, read whole however far the check goes
        ("d.jsonl", RECORDS + "not json\n" + RECORDS, {}),  # the check fails: the bytes still have their fingerprint
        ("d.json", '[{"question": "q", "answer": "a"}]', {}),
        ("d.csv", "question,answer\nq,a\nr,b\n", {}),
    ],
    ids=["bom-blank-lines", "limit", "small-limit", "bad-line", "json", "csv"],
)
def test_the_fingerprint_made_while_checking_a_dataset_is_that_of_its_bytes(tmp_path: Path, name: str, content: str, extra: dict[str, Any]) -> None:
    """check_dataset hashes the data file as it reads it (planning's file_fingerprint then reads
    it no more): what it keeps is the sha256 of every byte of the file, however far the check read."""
    import hashlib

    from evaltui.datasets import kept

    data = tmp_path / name
    data.write_text(content, encoding="utf-8")
    plan, ds = _unchecked(tmp_path, data, extra)
    check_dataset(plan, ds)
    st = data.stat()
    kept = kept._FINGERPRINTS.get(kept.identity(st))
    assert kept == hashlib.sha256(data.read_bytes()).hexdigest()[:16]
    assert file_fingerprint(plan, ds) == kept


def _unchecked(folder: Path, data: Path, extra: dict[str, Any]) -> tuple[Plan, DatasetConfig]:
    dataset = {"abbr": "d", "path": str(data), "prompt": "{question}", "target": "{answer}", **extra}
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps({"models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}], "datasets": [dataset]}), encoding="utf-8")
    plan = load_plan(path, check_data=False)
    return plan, plan.datasets[0]


def test_writing_files_draws_nothing_from_the_process_wide_random_generator(tmp_path: Path) -> None:
    """A `python` evaluator that seeds `random` and draws must draw the same whatever files the
    run wrote in between (temporary names come from a generator of their own, as mkstemp's)."""
    import random

    from evaltui.fsutil import atomic_write_bytes, atomic_writer

    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    got = [random.random()]
    atomic_write_bytes(tmp_path / "a.json", b"{}")
    with atomic_writer(tmp_path / "b.json") as f:
        f.write(b"{}")
    got += [random.random() for _ in range(2)]
    assert got == expected


def test_a_small_data_file_checked_is_loaded_again_from_its_bytes_held_and_anew_once_edited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check_dataset keeps a small file's bytes: load_records (the simulator's answer key, the
    scoring) parses them without opening the file, each time into records of its own; an edited
    file is read from disk."""
    import evaltui.datasets as datasets
    from evaltui.datasets import load_records

    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)  # checked: held

    def no_open(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was opened")

    with monkeypatch.context() as m:
        m.setattr(datasets, "open_regular", no_open)
        first = load_records(plan, ds)
        assert first == [{"question": "one", "answer": "1"}, {"question": "two", "answer": "2"}]
        first[0]["answer"] = "changed by its caller"
        assert load_records(plan, ds)[0]["answer"] == "1"
    with data.open("a", encoding="utf-8") as f:
        f.write('{"question": "three", "answer": "3"}\n')
    assert [r["answer"] for r in load_records(plan, ds)] == ["1", "2", "3"]
    assert count_records(plan, ds) == 3


def test_the_bytes_held_are_bounded_the_oldest_let_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltui.datasets import kept

    monkeypatch.setattr(kept, "_HELD", {})
    monkeypatch.setattr(kept, "_held_size", [0])
    monkeypatch.setattr(kept, "HELD_BYTES", len(RECORDS.encode()) * 2)
    keys = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "d.jsonl").write_text(RECORDS, encoding="utf-8")
        plan_for(tmp_path / name)
        st = (tmp_path / name / "d.jsonl").stat()
        keys.append(kept.identity(st))
    assert list(kept._HELD) == keys[1:]
    assert kept._held_size == [len(RECORDS.encode()) * 2]
    big = tmp_path / "big"
    big.mkdir()
    (big / "d.jsonl").write_text(RECORDS * (kept.HELD_FILE_BYTES // len(RECORDS) + 1), encoding="utf-8")
    plan_for(big)
    assert list(kept._HELD) == keys[1:]  # too large a file to hold


def test_a_data_file_rewritten_in_place_with_its_time_put_back_is_read_anew(tmp_path: Path) -> None:
    """Overwritten in place at the same size with its mtime restored (`cp -p`, `touch -r`, a
    tarball unpacked over it): the same inode, size and mtime, but a new change time — the
    records, count and fingerprint are the new file's, not the bytes held from before."""
    from evaltui.datasets import load_records

    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS, encoding="utf-8")
    plan, ds = plan_for(tmp_path)  # checked: counted, hashed and held
    before, old = file_fingerprint(plan, ds), data.stat()
    assert load_records(plan, ds)[1]["answer"] == "2"
    with data.open("r+", encoding="utf-8") as f:  # the same inode
        f.write(RECORDS.replace('"2"', '"7"'))
    os.utime(data, ns=(old.st_atime_ns, old.st_mtime_ns))
    now = data.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (old.st_ino, old.st_size, old.st_mtime_ns)
    assert load_records(plan, ds)[1]["answer"] == "7"
    assert file_fingerprint(plan, ds) not in (None, before)


@pytest.mark.parametrize(
    "content",
    [
        RECORDS,
        "\ufeff" + RECORDS,
        RECORDS.rstrip("\n"),  # no newline at the end
        "\n  \n" + RECORDS + "\n\t\n",  # blank lines (counted in the line numbers)
        RECORDS.replace("\n", "\r\n"),
        RECORDS.replace("\n", "\r"),  # a lone CR ends a line too
        RECORDS + '{"question": "big", "answer": 123456789012345678901234567890}\n',
        RECORDS + '{"question": "cut", "answer": \n',  # not valid JSON: the message names the line and column
        RECORDS + "[1, 2]\n",  # not an object
        RECORDS + "\ufeff" + RECORDS,  # a BOM that is not the first character is data
        '{"question": "é ü 漢", "answer": "\\u00e9"}\n',
    ],
    ids=["plain", "bom", "no-final-newline", "blank-lines", "crlf", "cr", "big-int", "bad-json", "not-object", "inner-bom", "non-ascii"],
)
def test_a_small_file_split_whole_gives_what_reading_it_line_by_line_gives(tmp_path: Path, content: str) -> None:
    """check_dataset reads a small .jsonl file in one read and splits it at once (_split_lines);
    the records, or the error and its place, are those the general reader gives."""
    import hashlib

    import evaltui.datasets as datasets
    from evaltui.datasets import kept

    path = tmp_path / "d.jsonl"
    path.write_bytes(content.encode("utf-8"))

    read = functools.partial(_records_and_error, path)

    general = read()
    assert (datasets._split_lines(path.read_bytes()) is None) == ("\r" in content)  # split at once but where a CR is
    assert read(fingerprint=True) == general  # read whole (_small_file) and split
    assert read(held=path.read_bytes()) == general  # held bytes, split
    assert kept._FINGERPRINTS[kept.identity(path.stat())] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@pytest.mark.parametrize(
    "data",
    [b'{"a": "1"}\n{"a": "\xff"}\n', b'{"a": "1"}\n\xef\xbb\xbf{"a": "2"}\n', b"\xef\xbb\xbf\xef\xbb\xbf{}\n"],
    ids=["not-utf8", "inner-bom", "two-boms"],
)
def test_a_small_file_that_is_not_plain_utf8_is_read_as_before(tmp_path: Path, data: bytes) -> None:
    """Bytes one decode refuses are left to the incremental reader, whose error (and the records
    before it) a user saw before; the records of the others are the general reader's."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)

    read = functools.partial(_records_and_error, path)

    assert read(fingerprint=True) == read() == read(held=data)


def _records_and_error(path: Path, **how: Any) -> tuple[list[Any], str | None]:
    """What iter_records gives of `path` read `how`: the records, then its error (None: none)."""
    from evaltui.datasets import DatasetError, iter_records

    got: list[Any] = []
    try:
        for rec in iter_records(path, **how):
            got.append(rec)
    except DatasetError as e:
        return got, str(e)
    return got, None
