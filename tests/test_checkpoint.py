"""A shard's checkpoint as the engine writes it: the answers of one event-loop turn in one write,
and a write that fails there raised in the engine's own task rather than lost."""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path

import pytest

from evaltui.engine.disk.checkpoint import Checkpoint


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def deferred(path: Path, version: str = "") -> Checkpoint:
    """A checkpoint opened as the engine opens it: its writes at the end of the running loop's turn."""
    cp = Checkpoint(path, version=version)
    cp.open(defer=asyncio.get_running_loop().call_soon)
    return cp


def entry(i: int) -> dict:
    return {"index": i, "origin_prompt": f"q{i}", "prediction": str(i), "gold": str(i)}


def test_the_answers_of_one_turn_go_out_in_one_write_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real = Checkpoint._write
    monkeypatch.setattr(Checkpoint, "_write", lambda self, data: (writes.append(data), real(self, data))[1])

    async def run() -> None:
        cp = deferred(tmp_path / "tmp_0.jsonl", version="v1")
        for i in range(3):
            cp.append(entry(i))
        assert lines(cp.path) == [{"version": "v1"}]  # not yet: the turn is not over
        await asyncio.sleep(0)
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2]
        cp.append(entry(3))
        await cp.written()  # what the engine awaits before a worker sends its next request
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2, 3]
        cp.append(entry(4))
        cp.close()  # what is held is written before the file is closed
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2, 3, 4]

    asyncio.run(run())
    assert [w.count(b"\n") for w in writes] == [1, 3, 1, 1]  # header; one turn's three; one; the last at close


def test_answers_of_workers_that_finish_in_one_turn_share_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []
    real = Checkpoint._write
    monkeypatch.setattr(Checkpoint, "_write", lambda self, data: (writes.append(data.count(b"\n")), real(self, data))[1])

    async def run() -> None:
        cp = deferred(tmp_path / "tmp_0.jsonl")
        go = asyncio.Event()
        on_disk: list[int] = []

        async def worker(i: int) -> None:  # as WorkerPool._sample: append, then wait for the disk
            await go.wait()
            cp.append(entry(i))
            await cp.written()
            on_disk.append(len(lines(cp.path)))

        tasks = [asyncio.create_task(worker(i)) for i in range(5)]
        await asyncio.sleep(0)
        go.set()  # the five replies arrive in one turn
        await asyncio.gather(*tasks)
        cp.close()
        assert on_disk == [5] * 5  # none went on before every answer of its turn was on disk

    asyncio.run(run())
    assert writes == [5]


def full_disk(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Checkpoint writes fail with ENOSPC while `full["disk"]` is set."""
    real = Checkpoint._write
    full = {"disk": False}

    def write(self: Checkpoint, data: bytes) -> None:
        if full["disk"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    monkeypatch.setattr(Checkpoint, "_write", write)
    return full


def test_a_write_that_fails_at_the_end_of_a_turn_stops_every_worker_whose_answer_it_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = full_disk(monkeypatch)

    async def run() -> None:
        cp = deferred(tmp_path / "tmp_0.jsonl")
        cp.append(entry(0))
        await cp.written()
        full["disk"] = True
        outcomes: list[str] = []

        async def worker(i: int) -> None:  # as WorkerPool._sample
            cp.append(entry(i))
            try:
                await cp.written()
            except OSError as e:
                outcomes.append(f"{i}: {e.strerror}")
            else:
                outcomes.append(f"{i}: went on")

        await asyncio.gather(*(worker(i) for i in (1, 2, 3)))  # three answers of one turn, one write
        assert sorted(outcomes) == [f"{i}: No space left on device" for i in (1, 2, 3)]  # none counts its answer kept
        full["disk"] = False
        with pytest.raises(OSError, match="No space left"):
            cp.append(entry(4))  # and nothing more goes in after the hole
        cp.close()  # never raises: it runs where a stopped run is put away
        assert [e["index"] for e in lines(cp.path)] == [0]  # nothing half-written

    asyncio.run(run())


def test_close_puts_away_what_a_cancelled_worker_left_even_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = full_disk(monkeypatch)

    async def run() -> None:
        cp = deferred(tmp_path / "tmp_0.jsonl")
        cp.append(entry(0))
        cp.close()  # before the turn ended (the worker was cancelled): written now
        assert [e["index"] for e in lines(cp.path)] == [0]
        cp2 = deferred(tmp_path / "tmp_1.jsonl")
        full["disk"] = True
        cp2.append(entry(0))
        cp2.close()  # the disk is full: the answer is asked again next run; closing still succeeds
        assert lines(cp2.path) == []

    asyncio.run(run())


def test_without_a_loop_every_answer_is_written_at_once(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "tmp_0.jsonl")
    cp.open()
    cp.append(entry(7))
    assert lines(cp.path) == [entry(7)]
    cp.close()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (b"", b'{"version":"v1"}\n'),  # new: its version first
        (b'{"index":0,"predic', b'{"version":"v1"}\n'),  # only a torn line: cut off, and started again with its version
        (b'{"version":"v0"}\n{"index":0}\n{"index":1,"pre', b'{"version":"v0"}\n{"index":0}\n'),  # a torn last line cut off, no version added
        (b'{"index":0}\n', b'{"index":0}\n'),  # whole: as it was
    ],
)
def test_reopening_cuts_a_torn_last_line_and_starts_an_empty_file_with_its_version(tmp_path: Path, before: bytes, after: bytes) -> None:
    path = tmp_path / "tmp_d.jsonl"
    path.write_bytes(before)
    cp = Checkpoint(path, version="v1")
    cp.open()
    cp.close()
    assert path.read_bytes() == after
