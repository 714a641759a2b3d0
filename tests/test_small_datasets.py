"""Many small datasets: their file work stays on the engine's loop (no thread hop a dataset, the
cost that made 10,000 datasets of 3 samples slow), a large one's goes to a thread, and the
status files still tell the truth — `running` included, for a small dataset that takes long."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.engine.run import runs
from evaltui.engine.run.runner import Runner
from evaltui.plan import load_plan
from evaltui.sim import SimConfig
from evaltui.sim.config import ModelProfile


def _hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to a worker thread from the engine's run package."""
    sent: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(func, *args, **kw):  # type: ignore[no-untyped-def]
        inner = func.func if isinstance(func, functools.partial) else func
        sent.append(getattr(inner, "__qualname__", type(inner).__name__))
        return await real(func, *args, **kw)

    monkeypatch.setattr(runs.anyio.to_thread, "run_sync", counted)
    return sent


def test_small_datasets_are_loaded_opened_and_merged_without_a_thread_and_a_large_one_with_one(tmp_path: Path, sim_factory, monkeypatch) -> None:
    small_rows, large_rows = arithmetic(3), arithmetic(runs.SMALL_UNITS + 1)
    sim = sim_factory(SimConfig(answer_key=key_for(large_rows)))
    datasets = [gsm_dataset(f"s{k}", write_jsonl(tmp_path / f"s{k}.jsonl", small_rows)) for k in range(12)]
    datasets.append(gsm_dataset("large", write_jsonl(tmp_path / "large.jsonl", large_rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=datasets)
    sent = _hops(monkeypatch)
    code, _, runner = run_plan(plan)
    assert code == 0
    # The large dataset: its loading, its shards' opening and its merge with its `done`, a hop each.
    loads = [name for name in sent if name in ("open_records", "start_shards", "DoneFiles.write")]
    assert sorted(loads) == ["DoneFiles.write", "open_records", "start_shards"]
    for d in [f"s{k}" for k in range(12)] + ["large"]:  # and every file says what a thread would have written
        status = json.loads(runner.workdir.status_file("m", d, 0, 1).read_text())
        assert status["status"] == "done" and status["completed"] == status["total"]
        assert len(json.loads(runner.workdir.predictions_file("m", d).read_text())) == status["total"]
        assert runner.workdir.read_result("m", d)["accuracy"] == 100.0


def test_a_small_dataset_that_takes_long_says_running_while_it_runs(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(2)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=30.0)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    runner = Runner(load_plan(plan))
    seen: list[str] = []

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                path = runner.workdir.status_file("m", "d", 0, 1)
                for _ in range(400):  # up to 20 s: `running` is due a quarter second after the start
                    if path.is_file():
                        status = json.loads(path.read_text())["status"]
                        if not seen or seen[-1] != status:
                            seen.append(status)
                        if status == "running":
                            break
                    await anyio.sleep(0.05)
                runner.cancel()

            tg.start_soon(watch)
            with anyio.fail_after(60):
                return await runner.run()

    assert anyio.run(main) == 130
    assert seen[-1] == "running" and sim.stats.requests_total == 2  # both requests out, none answered yet
    # Stopped: the status says work is left (pending), not `running`, whatever the timer had said.
    assert json.loads(runner.workdir.status_file("m", "d", 0, 1).read_text())["status"] == "pending"


def test_a_dataset_of_few_samples_whose_checkpoints_hold_megabytes_is_merged_in_a_thread(tmp_path: Path) -> None:
    """`limit` is not in the fingerprint: a smoke run of 3 samples after a full run keeps that
    run's checkpoint, and its merge reads every line of it — not on the loop."""
    from types import SimpleNamespace

    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(3))
    checkpoint = tmp_path / "tmp_d.jsonl"
    checkpoint.write_bytes(b"x" * 1000)
    run = SimpleNamespace(total=3, cfg=SimpleNamespace(benchmark=None), checkpoints=[checkpoint, tmp_path / "tmp_d_1.jsonl"], fresh=False)
    assert runs.is_small(run, data)  # type: ignore[arg-type]
    checkpoint.write_bytes(b"x" * (runs.SMALL_DATA_BYTES + 1))
    assert not runs.is_small(run, data)  # type: ignore[arg-type]


def test_a_fresh_pairs_checkpoints_are_not_looked_for_when_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair planning found no file of has none of its checkpoints yet: whether it is small is its
    data file's size alone, without a failed stat of each of them (10,000 datasets: 10,000 on the loop)."""
    from types import SimpleNamespace

    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(3))
    run = SimpleNamespace(total=3, cfg=SimpleNamespace(benchmark=None), checkpoints=[tmp_path / "tmp_d_0.jsonl", tmp_path / "tmp_d_1.jsonl"], fresh=True)
    looked: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *a, **kw: looked.append(os.fspath(path)) or real_stat(path, *a, **kw))
    assert runs.is_small(run, data)  # type: ignore[arg-type]
    assert looked == [str(data)]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
def test_status_times_say_what_datetime_says_to_the_millisecond_in_any_zone(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    """now_iso makes each second's text once (a status file a dataset, 10,000 datasets): the same
    text as datetime's, across seconds, at a millisecond's edge, and with a zone's own offset."""
    import time
    from datetime import datetime, timezone

    from evaltui import text

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for t in (1_780_000_000.0, 1_780_000_000.4567, 1_780_000_000.9994, 1_780_000_001.0001, 1_767_225_599.999, 1_767_225_600.0, 1_782_000_123.25):
            monkeypatch.setattr(text.time, "time", lambda t=t: t)
            expected = datetime.fromtimestamp(t, timezone.utc).astimezone().isoformat(timespec="milliseconds")
            assert text.now_iso() == expected, (zone, t)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_killed_writes_temporary_is_named_as_the_work_dir_clears_it(tmp_path: Path) -> None:
    """Temporaries are `.<name>.<8 of [a-z0-9_]>.tmp` beside the file, absolute even for a relative path."""
    import re

    from evaltui.engine.disk.workdir import _RANDOM
    from evaltui.fsutil import _temporary

    names = set()
    for target in (tmp_path / "infer_status" / "m" / "d.json", Path(os.path.relpath(tmp_path / "x.json"))):
        for _ in range(50):
            fd, tmp = _temporary(target)
            os.close(fd)
            assert os.path.isabs(tmp) and Path(tmp).parent == Path(os.path.abspath(target)).parent
            assert Path(tmp).name.startswith(f".{target.name}.") and re.search(_RANDOM, tmp), tmp
            names.add(tmp)
    assert len(names) == 100


def test_a_small_datasets_merge_reads_what_it_kept_and_lets_go_of_it_at_its_end(tmp_path: Path, sim_factory, monkeypatch) -> None:
    """The merge of a small dataset reads its checkpoint from memory (nothing opened again), a
    large one's from disk; once each dataset has ended no shard holds its bytes any more: the
    pool keeps its runs for the whole run, and 10,000 of up to 64 KiB each would add up."""
    from evaltui.engine.run import ending

    small_rows, large_rows = arithmetic(3), arithmetic(runs.SMALL_UNITS + 1)
    sim = sim_factory(SimConfig(answer_key=key_for(large_rows)))
    datasets = [gsm_dataset(f"s{k}", write_jsonl(tmp_path / f"s{k}.jsonl", small_rows)) for k in range(5)]
    datasets.append(gsm_dataset("large", write_jsonl(tmp_path / "large.jsonl", large_rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=datasets)
    merged: dict[str, bool] = {}
    ended: list[runs.DatasetRun] = []
    real_merge, real_end = ending.merge_checkpoints, ending.PairEnding._end_dataset

    def merge(paths, total, out, **how):  # type: ignore[no-untyped-def]
        merged[out.stem] = bool(how.get("held"))
        return real_merge(paths, total, out, **how)

    def end(self, run, *args):  # type: ignore[no-untyped-def]
        ended.append(run)
        return real_end(self, run, *args)

    monkeypatch.setattr(ending, "merge_checkpoints", merge)
    monkeypatch.setattr(ending.PairEnding, "_end_dataset", end)
    code, _, runner = run_plan(plan)
    assert code == 0
    assert merged == {**{f"s{k}": True for k in range(5)}, "large": False}
    assert len(ended) == 6 and all(s.checkpoint.kept is None for run in ended for s in run.shards)
    for d in merged:
        assert len(json.loads(runner.workdir.predictions_file("m", d).read_text())) == len(small_rows if d != "large" else large_rows)


def test_status_times_round_to_the_millisecond_as_datetime_does() -> None:
    """At a microsecond's or a millisecond's edge too (a float's product rounded otherwise, 2 in 20,000)."""
    import random
    import time
    from datetime import datetime, timezone

    from evaltui import text

    draw = random.Random(7)
    real = time.time
    try:
        for _ in range(20_000):
            t = 1_780_000_000 + draw.randrange(0, 86_400_000) / 1000 + draw.choice((0.0, 0.0000005, -0.0000005, 0.0004999, 0.0005))
            text.time.time = lambda t=t: t  # type: ignore[misc]
            assert text.now_iso() == datetime.fromtimestamp(t, timezone.utc).astimezone().isoformat(timespec="milliseconds"), t
    finally:
        text.time.time = real  # type: ignore[misc]
