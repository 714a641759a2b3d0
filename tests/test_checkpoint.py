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
        assert lines(cp.path) == []  # not yet: the turn is not over (nor the version line, which goes with them)
        await asyncio.sleep(0)
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2]
        cp.append(entry(3))
        await cp.written()  # what the engine awaits before a worker sends its next request
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2, 3]
        cp.append(entry(4))
        cp.close()  # what is held is written before the file is closed
        assert [e.get("index") for e in lines(cp.path)] == [None, 0, 1, 2, 3, 4]

    asyncio.run(run())
    assert [w.count(b"\n") for w in writes] == [4, 1, 1]  # the version line with one turn's three; one; the last at close


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


def test_a_kept_checkpoint_holds_every_byte_of_the_file_it_began(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a small dataset's merge reads instead of the file (Checkpoint.open's `keep`)."""
    full = full_disk(monkeypatch)

    async def run() -> None:
        cp = Checkpoint(tmp_path / "tmp_d.jsonl", version="v1")
        cp.open(defer=asyncio.get_running_loop().call_soon, keep=True)
        cp.append(entry(0))
        cp.append({"index": 1, "error": {"type": "timeout", "message": "slow"}})
        await cp.written()
        cp.append({"turn": 0, "index": 2, "prompt": "a\u2028b\r", "answer": "c"})
        await cp.written()
        full["disk"] = True
        cp.append(entry(3))
        with pytest.raises(OSError):
            await cp.written()
        full["disk"] = False
        cp.close()
        assert cp.kept is not None and bytes(cp.kept) == cp.path.read_bytes()
        assert [json.loads(line) for line in cp.kept.splitlines()][0] == {"version": "v1"}

        again = Checkpoint(cp.path, version="v1")  # a file it did not begin: not kept
        again.open(keep=True)
        again.append(entry(4))
        again.close()
        assert again.kept is None

        monkeypatch.setattr("evaltui.engine.disk.checkpoint.KEPT_BYTES", 200)
        big = Checkpoint(tmp_path / "tmp_big.jsonl")
        big.open(keep=True)
        for i in range(5):  # past the bound: given up, never a part of the file
            big.append(entry(i))
        big.close()
        assert big.kept is None

    asyncio.run(run())


MESSY = (
    b'{"version":"v1"}\n'
    b'{"index":0,"error":{"type":"timeout","message":"x"},"origin_prompt":"q0","prediction":"","gold":"g"}\n'
    b'{"index":0,"origin_prompt":"q0","prediction":"0","gold":"g"}\n'  # a retry that succeeded: this one
    b'{"index":1,"origin_prompt":"q1","prediction":"1","gold":"g"}\n'
    b'{"index":1,"error":{"type":"timeout","message":"x"},"origin_prompt":"q1","prediction":"","gold":"g"}\n'  # answered stays answered
    b'{"index":1,"epoch":1,"origin_prompt":"q1","prediction":"1b","gold":"g"}\n'
    b'not json at all\n'
    b'{"turn":0,"index":2,"prompt":"p","answer":"a"}\n'
    b'{"index": 2, "origin_prompt": "q2 \\u2028 \\r", "prediction": "2", "gold": "g"}\n'  # an older writer's spaces
    b'{"prediction":"3","index":3,"gold":"g"}\n'  # keys in another order: parsed
    b'{"index":99,"prediction":"out of range"}\n'
    b'{"index":4,"origin_prompt":"q4","predic'  # torn
)


@pytest.mark.parametrize(("epochs", "selection"), [(1, None), (1, [3, 0]), (2, None)])
def test_the_merge_of_held_bytes_writes_what_the_merge_of_the_files_writes(tmp_path: Path, epochs: int, selection: list[int] | None) -> None:
    from evaltui.engine.disk.predictions import merge_checkpoints

    first, second = tmp_path / "tmp_d_0.jsonl", tmp_path / "tmp_d_1.jsonl"
    first.write_bytes(MESSY)
    second.write_bytes(b'{"index":5,"origin_prompt":"q5","prediction":"5","gold":"g"}\n')
    missing = tmp_path / "tmp_d_2.jsonl"  # a shard that never began
    paths = [first, second, missing]
    assert merge_checkpoints(paths, 6, tmp_path / "read.json", epochs=epochs, selection=selection) > 0
    for held in ({first: MESSY}, {first: MESSY, second: second.read_bytes()}):
        merge_checkpoints(paths, 6, tmp_path / "held.json", epochs=epochs, selection=selection, held=held)
        assert (tmp_path / "held.json").read_bytes() == (tmp_path / "read.json").read_bytes()


def test_a_begun_file_says_its_version_first_even_with_no_answer_or_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = full_disk(monkeypatch)

    async def run() -> None:
        quiet = deferred(tmp_path / "tmp_quiet.jsonl", version="v1")
        quiet.close()  # cancelled before any answer: the version line still goes out at close
        assert lines(quiet.path) == [{"version": "v1"}]
        cp = deferred(tmp_path / "tmp_full.jsonl", version="v1")
        full["disk"] = True
        cp.append(entry(0))
        with pytest.raises(OSError):
            await cp.written()
        full["disk"] = False
        cp.close()
        assert cp.path.read_bytes() == b""  # never an answer without the version line before it

    asyncio.run(run())
