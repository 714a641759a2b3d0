"""Every path and file format of the work directory (SPEC §6), with OpenCompass's names.

Two kinds of writes, each safe against `kill -9` at any instant:
- whole JSON files (status, final predictions, results) go to a temporary name and are renamed
  into place, so a reader sees the old file or the new one;
- checkpoints are append-only JSONL, one `os.write` per finished sample; a kill mid-write can
  leave a torn last line, which reading skips and reopening cuts off, losing only that sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import time
from array import array
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from evaltui import fastjson
from evaltui.fsutil import atomic_write_json, atomic_write_text, atomic_writer, json_bytes, read_json

TERMINAL = ("done", "fail")
# The temporary a killed atomic write leaves: `.<name>.<random letters>.tmp` (fsutil, mkstemp: 8 of them).
_LEFTOVER = re.compile(r"^\..+\.[a-z0-9_]{6,}\.tmp$")


class WorkDirBusy(Exception):
    """Another evaltui process is using the work directory."""


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds")


def parse_iso(text: str) -> float | None:
    text = text.strip()
    if text.endswith("Z"):  # Python 3.10's fromisoformat does not read the UTC designator
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def shard_suffix(shard: int, shards: int) -> str:
    return f"_{shard}" if shards > 1 else ""


@dataclass(frozen=True)
class WorkDir:
    root: Path
    # this run's superseded/<time> folder once made: everything the run sets aside goes there
    _superseded: list[Path] = field(default_factory=list, compare=False, repr=False)

    # -- paths
    @property
    def plan_file(self) -> Path:
        return self.root / "plan.toml"

    @property
    def heartbeat_file(self) -> Path:
        return self.root / "infer_heartbeat"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def sandbox_dir(self) -> Path:
        """Where code_exec programs run; cleared when a run starts."""
        return self.root / ".sandbox"

    def clear_leftovers(self) -> None:
        """Remove what a killed run can leave: half-written temporaries and sandbox folders.

        Only called with the work-dir lock held, so no other evaltui is writing them. Only names
        evaltui gives its own (see _LEFTOVER): a user's `.notes.tmp` beside them stays."""
        for folder in self.sandbox_dir.glob("evaltui-exec-*"):
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # not there, or holding something of someone else's
            self.sandbox_dir.rmdir()
        for sub in ("infer_status", "predictions", "results", "summary"):
            for tmp in (self.root / sub).rglob(".*.tmp"):
                if _LEFTOVER.match(tmp.name):
                    tmp.unlink(missing_ok=True)
        for tmp in self.root.glob(".*.tmp"):
            if _LEFTOVER.match(tmp.name):
                tmp.unlink(missing_ok=True)

    def status_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self.root / "infer_status" / model / f"{dataset}{shard_suffix(shard, shards)}.json"

    def checkpoint_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self.root / "predictions" / model / f"tmp_{dataset}{shard_suffix(shard, shards)}.jsonl"

    def predictions_file(self, model: str, dataset: str) -> Path:
        return self.root / "predictions" / model / f"{dataset}.json"

    def result_file(self, model: str, dataset: str) -> Path:
        return self.root / "results" / model / f"{dataset}.json"

    # -- whole-pair housekeeping
    def _pair_files(self, folder: Path, prefix: str, dataset: str, suffix: str) -> list[Path]:
        """`<prefix><dataset><suffix>` and its shards `<prefix><dataset>_<n><suffix>`, whatever the shard count."""
        if not folder.is_dir():
            return []
        found = []
        for p in folder.glob(f"{prefix}{dataset}*{suffix}"):
            stem = p.name[len(prefix) : len(p.name) - len(suffix)]
            if stem == dataset or (stem.startswith(dataset + "_") and stem[len(dataset) + 1 :].isdigit()):
                found.append(p)
        return sorted(found)

    def checkpoint_files(self, model: str, dataset: str) -> list[Path]:
        """Every checkpoint of the pair, including those of an earlier shard layout."""
        return self._pair_files(self.root / "predictions" / model, "tmp_", dataset, ".jsonl")

    def status_files(self, model: str, dataset: str) -> list[Path]:
        return self._pair_files(self.root / "infer_status" / model, "", dataset, ".json")

    def set_aside_pair(self, model: str, dataset: str) -> Path | None:
        """Move everything a run wrote for one model×dataset under `superseded/<time>/` (for
        --fresh and changed data or settings); the folder it went to, None if there was nothing.

        Answers cost model time: work that no longer counts is kept where a user can find it,
        never deleted. Status files go last: they hold the version that marks the rest as stale,
        so a kill half-way leaves the next run still knowing to set aside what is left.
        """
        files = [self.predictions_file(model, dataset), self.result_file(model, dataset)]
        files += self.checkpoint_files(model, dataset) + self.status_files(model, dataset)
        files = [p for p in files if p.exists()]
        if not files:
            return None
        folder = self.superseded_dir()
        for path in files:
            self._move_aside(path, folder)
        return folder

    def set_aside(self, path: Path) -> Path:
        """Move one file of the work dir under `superseded/<time>/`; the folder it went to."""
        folder = self.superseded_dir()
        self._move_aside(path, folder)
        return folder

    def superseded_dir(self) -> Path:
        """This run's `superseded/<time>` folder, made on first use; a name never used before, so
        nothing set aside earlier is overwritten."""
        if not self._superseded:
            base = self.root / "superseded"
            base.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            for n in range(1, 10_000):
                folder = base / (stamp if n == 1 else f"{stamp}-{n}")
                try:
                    folder.mkdir()
                except FileExistsError:
                    continue
                self._superseded.append(folder)
                break
            else:
                raise FileExistsError(f"no free folder name under {base}")
        return self._superseded[0]

    def _move_aside(self, path: Path, folder: Path) -> None:
        target = folder / path.relative_to(self.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        n = 1
        while target.exists():  # the same pair set aside twice in one run
            n += 1
            target = target.with_name(f"{path.name}.{n}")
        shutil.move(str(path), str(target))

    def predictions_complete(self, model: str, dataset: str) -> bool:
        """Whether the final predictions file exists and ends as evaltui ends it (not cut short)."""
        try:
            with open(self.predictions_file(model, dataset), "rb") as f:
                if f.read(1) != b"{":
                    return False
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2))
                return f.read() == b"}\n"
        except OSError:
            return False

    def prepare(self) -> None:
        for sub in ("infer_status", "predictions", "results", "summary", "logs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def lock(self) -> int:
        """Take the work dir for this process (WorkDirBusy if another evaltui has it); returns the fd.

        Two runs appending to the same checkpoints would duplicate samples; an flock on
        `.evaltui.lock` is released by the kernel however the holder dies, even by kill -9.
        """
        import fcntl

        path = self.root / ".evaltui.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise WorkDirBusy(f"work dir {self.root} is in use by another evaltui (pid {holder}); wait for it or pass --work-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    # -- heartbeat
    def beat(self) -> None:
        atomic_write_text(self.heartbeat_file, now_iso() + "\n")

    def heartbeat_age(self, now: float | None = None) -> float | None:
        """Seconds since the last beat, or None when there is no heartbeat file."""
        try:
            text = self.heartbeat_file.read_bytes().decode("utf-8", errors="replace")  # garbage: dated by mtime below
        except FileNotFoundError:
            return None
        at = parse_iso(text)
        if at is None:
            try:
                at = self.heartbeat_file.stat().st_mtime
            except FileNotFoundError:
                return None
        return (time.time() if now is None else now) - at

    # -- status
    def read_status(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> dict[str, Any] | None:
        """The status, or None when the file is missing or not one a writer of statuses could have
        made (torn, garbage, counts that are not integers): then the checkpoints decide."""
        data = read_json(self.status_file(model, dataset, shard, shards))
        if not isinstance(data, dict) or not isinstance(data.get("status"), str):
            return None
        for key in ("total", "completed", "failed"):
            value = data.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool):
                return None
        return data

    def read_result(self, model: str, dataset: str) -> dict[str, Any] | None:
        """A result file's metrics (or its error) without its per-sample details.

        Results evaltui wrote put the metrics on the lines before `"details"`, so only those are
        read: the leaderboard of a run over millions of samples does not parse them all again.
        A file cut short (copied half-way, a disk that filled) does not end as evaltui ends it:
        it is read whole, found invalid, and so scored again.
        """
        path = self.result_file(model, dataset)
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 2))
                whole = f.read() == b"}\n"
                f.seek(0)
                if whole and f.readline().rstrip() == b"{":
                    head: dict[str, Any] = {}
                    for _ in range(64):
                        line = f.readline().strip().rstrip(b",")
                        if line.startswith(b'"details": ['):
                            return head
                        try:
                            head.update(fastjson.loads(b"{" + line + b"}"))
                        except ValueError:
                            break
        except FileNotFoundError:
            return None
        data = read_json(path)  # another layout, or one without details (an error result)
        if not isinstance(data, dict):
            return None
        data.pop("details", None)
        return data

    def has_scored_result(self, model: str, dataset: str) -> bool:
        data = self.read_result(model, dataset)
        return data is not None and "error" not in data


class StatusBoard:
    """Writes status files and refuses to move a shard back from done/fail by a late write.

    The guard lives here, in the one writer, because the reference system's bug was a progress
    write racing the final one; `reset` is the deliberate exception used when a new run (or a
    retry) re-plans a failed shard.
    """

    def __init__(self, workdir: WorkDir):
        self.workdir = workdir
        self._final: dict[Path, str] = {}

    def write(
        self,
        model: str,
        dataset: str,
        shard: int,
        shards: int,
        status: str,
        *,
        total: int,
        completed: int,
        failed: int,
        error: str = "",
        version: str = "",
        reset: bool = False,
    ) -> bool:
        path = self.workdir.status_file(model, dataset, shard, shards)
        if not reset and path in self._final:
            return False
        data = {
            "status": status,
            "total": total,
            "completed": completed,
            "failed": failed,
            "error": error,
            "updated_at": now_iso(),
            "version": version,
        }
        atomic_write_json(path, data)
        if status in TERMINAL:
            self._final[path] = status
        else:
            self._final.pop(path, None)
        return True


class Checkpoint:
    """Append-only JSONL of finished samples for one shard.

    A new file starts with a `{"version": …}` line (the pair's version): if the status files
    that also carry it are lost, a changed prompt still cannot reuse these answers.

    Opened with `defer` (the event loop's `call_soon`), the lines of the samples that finish in
    one turn of the loop go out in one write at the end of that turn: at 256 requests in flight
    that is tens of lines per system call instead of one each. The engine awaits `written()`
    after each `append`, so a worker sends its next request only once its answer is on disk,
    and a kill -9 still loses no more than the requests in flight. A write that fails there (a
    full disk) is raised by `written()` to every worker whose answer it held, and by any later
    `append`, in the engine's tasks; `close` never raises (it runs where a run is put away).
    """

    def __init__(self, path: Path, version: str = ""):
        self.path = path
        self.version = version
        self._fd: int | None = None
        self._defer: Callable[[Callable[[], None]], object] | None = None
        self._pending: list[bytes] = []
        self._failed: OSError | None = None

    def open(self, defer: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Open for appending, first cutting off a torn last line so the next line starts clean."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(fd).st_size
        if size:
            tail_start = max(0, size - 65536)
            while True:
                data = os.pread(fd, size - tail_start, tail_start)
                if data.endswith(b"\n"):
                    break
                cut = data.rfind(b"\n")
                if cut >= 0:
                    os.ftruncate(fd, tail_start + cut + 1)
                    break
                if tail_start == 0:
                    os.ftruncate(fd, 0)
                    break
                tail_start = max(0, tail_start - 65536)
        self._fd = fd
        self._defer = defer
        self._failed = None
        if os.fstat(fd).st_size == 0 and self.version:
            self._write(json_bytes({"version": self.version}) + b"\n")

    def append(self, entry: dict[str, Any]) -> None:
        assert self._fd is not None, "checkpoint not open"
        self._raise_failed()
        line = json_bytes(entry) + b"\n"
        if self._defer is None:
            self._write(line)
            return
        if not self._pending:
            self._defer(self._flush_deferred)
        self._pending.append(line)

    async def written(self) -> None:
        """Once the lines appended so far are on disk (the end of this loop turn); raises a
        write that failed."""
        if self._pending:
            await asyncio.sleep(0)  # queued behind the flush the first append of the turn asked for
        self._raise_failed()

    def flush(self) -> None:
        """Write the lines still held (one write), now."""
        if self._pending and self._fd is not None:
            lines, self._pending = self._pending, []
            self._write(b"".join(lines))

    def _flush_deferred(self) -> None:
        try:
            self.flush()
        except OSError as e:  # no task to raise it in here: the engine's next call raises it
            self._failed = e

    def _raise_failed(self) -> None:
        if self._failed is not None:  # for good: each worker whose answer the lost write held must stop
            raise self._failed

    def _write(self, line: bytes) -> None:
        """The whole line or nothing: a short write (disk full) is cut back off and raised."""
        assert self._fd is not None
        start = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                if written <= 0:
                    raise OSError(f"could not write to {self.path}")
                view = view[written:]
        except OSError:
            os.ftruncate(self._fd, start)
            raise

    def close(self) -> None:
        """Write what is held and close. Lines held here are those of workers cancelled before
        their write (a run being stopped): if this write fails too, they are asked again next run."""
        if self._fd is not None:
            self._flush_deferred()
            os.close(self._fd)
            self._fd = None
            self._pending.clear()


def checkpoint_version(path: Path) -> str:
    """The version a checkpoint was started under ("" if it has none or cannot be read)."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return ""
    if first.startswith(b'{"version"'):
        try:
            return str(fastjson.loads(first).get("version", ""))
        except ValueError:
            return ""
    return ""


# A checkpoint line as Checkpoint.append writes it starts `{"index":N,` (`{"index": N, ` before
# evaltui wrote compact JSON). Inside a JSON string every quote is escaped, so `"error":{` can
# only be the key of a failure entry: lines can be classified without parsing them, which keeps
# resume and merge fast for millions of samples.
_ENTRY_HEAD = re.compile(rb'\{"index": ?(\d+), ?')
_ERROR_KEY = re.compile(rb'"error": ?\{')


def scan_checkpoint(path: Path) -> Iterator[tuple[int, bool, int]]:
    """(index, succeeded, byte offset) of each complete line; torn or foreign lines are skipped."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        offset = 0
        for line in f:
            start = offset
            offset += len(line)
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write: that sample is simply not done
            m = _ENTRY_HEAD.match(line)
            if m is not None:
                yield int(m.group(1)), _ERROR_KEY.search(line) is None, start
                continue
            try:
                entry = fastjson.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("index"), int):
                yield entry["index"], "error" not in entry, start


def merge_checkpoints(paths: list[Path], total: int, out: Path) -> int:
    """Write the final predictions file from the shards' checkpoints, streaming, in index order.

    Keeps 10 bytes per sample in memory (where its best line is), never the entries themselves,
    and copies each line's bytes with the `index` key dropped. Returns the entries written.
    """
    paths = [p for p in paths if p.exists()]  # a shard with no samples never wrote one
    where = array("q", [-1]) * total
    which = array("i", [0]) * total
    good = bytearray(total)
    for k, path in enumerate(paths):
        for index, ok, offset in scan_checkpoint(path):
            if 0 <= index < total and (where[index] < 0 or (ok and not good[index])):
                where[index], which[index], good[index] = offset, k, ok
    files = [open(p, "rb") for p in paths]
    written = 0
    try:
        with atomic_writer(out) as w:
            w.write(b"{")
            for index in range(total):
                if where[index] < 0:
                    continue
                f = files[which[index]]
                f.seek(where[index])
                line = f.readline().rstrip(b"\n")
                m = _ENTRY_HEAD.match(line)
                if m is not None:
                    value = b"{" + line[m.end() :]
                else:
                    entry = fastjson.loads(line)
                    entry.pop("index", None)
                    value = json_bytes(entry)
                w.write(b'%s\n  "%d": %s' % (b"," if written else b"", index, value))
                written += 1
            w.write(b"\n}\n")
    finally:
        for f in files:
            f.close()
    return written


def read_predictions(path: Path) -> list[dict[str, Any]] | None:
    data = read_json(path)
    if not isinstance(data, dict):
        return None
    return [{"index": int(k), **v} for k, v in sorted(data.items(), key=lambda kv: int(kv[0]))]


def predictions_to_checkpoint(predictions: Path, checkpoint: Path) -> None:
    """Write a final predictions file back as checkpoint lines (atomically: all or nothing)."""
    with atomic_writer(checkpoint) as w:
        for entry in iter_predictions(predictions):
            w.write(json_bytes(entry) + b"\n")


# Bytes of predictions file above which it is streamed. Whole is ~20 % faster to parse, but its
# objects take ~6× the file's size: above 1 MiB the memory would follow the dataset's size.
STREAM_ABOVE = 1024 * 1024
_PREDICTION_LINE = re.compile(rb'^  "(\d+)": (\{.*\}),?$')


def iter_predictions(path: Path) -> Iterator[dict[str, Any]]:
    """The final predictions file's entries in index order, streamed in batches.

    Files evaltui wrote hold one entry per line; any other valid layout (a file written by
    another tool) is read whole instead. ValueError/OSError when the file is unusable.
    """
    yielded = False
    with open(path, "rb") as f:
        # Small files parse fastest whole (one C call); only large ones are worth streaming.
        if os.fstat(f.fileno()).st_size > STREAM_ABOVE and f.readline().rstrip() == b"{":
            batch: list[dict[str, Any]] = []
            for raw in f:
                line = raw.rstrip(b"\r\n")
                if line == b"}":
                    yield from batch
                    return
                m = _PREDICTION_LINE.match(line)
                if m is None:
                    if yielded:
                        raise ValueError(f"{path.name}: malformed line in the predictions file")
                    break  # another layout: read it whole below
                batch.append({"index": int(m.group(1)), **fastjson.loads(m.group(2))})
                if len(batch) >= 256:
                    yielded = True
                    yield from batch
                    batch = []
            else:
                raise ValueError(f"{path.name}: truncated predictions file")
    entries = read_predictions(path)
    if entries is None:
        raise ValueError(f"{path.name}: not a JSON object of predictions")
    yield from entries
