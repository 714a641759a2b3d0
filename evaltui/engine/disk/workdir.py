"""Every path of the work directory (SPEC §6), with OpenCompass's names, and its status files.

Two kinds of writes, each safe against `kill -9` at any instant:
- whole JSON files (status, final predictions, results) go to a temporary name and are renamed
  into place, so a reader sees the old file or the new one;
- checkpoints are append-only JSONL (checkpoint.py), whose torn last line reading skips.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from evaltui import fastjson
from evaltui.engine.disk.lockstate import lock_holder
from evaltui.fsutil import Listing, Listings, Unreadable, atomic_write_json, atomic_write_text, open_regular, read_json, read_regular, read_small
from evaltui.text import now_iso, parse_iso

TERMINAL = ("done", "fail")
# What each kind of work-dir file may weigh when it is read (fsutil.open_regular: a FIFO, a
# device or a folder in its place is Unreadable, said in one line naming it, never a hang).
STATUS_BYTES = 64 << 20  # a few hundred bytes; a selection of millions of sample_ids, tens of MB
HEARTBEAT_BYTES = 4096  # an ISO time
RESULT_LINE_BYTES = 64 << 20  # a line of a result's head (metrics; a selection's samples)
RESULT_BYTES = 1 << 30  # a result read whole (another layout, an error); a larger one is scored again
RESULT_SMALL = 64 << 10  # a result read in one go, its head split in memory (a few samples' details)
ANY_SIZE = 1 << 50  # files read in pieces (checkpoints, predictions, results): only their kind is checked
# The temporary a killed atomic write leaves: `.<name>.<8 random>.tmp` (fsutil's mkstemp), where
# <name> is a file evaltui writes in that folder — each folder's names, below; nothing else is ours.
_RANDOM = r"\.[a-z0-9_]{8}\.tmp$"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # an abbr (plan/schema.py's ABBR_RE)
_LEFTOVERS = {
    ".": re.compile(r"^\.(?:plan\.toml|infer_heartbeat)" + _RANDOM),
    "infer_status/*": re.compile(rf"^\.{_NAME}\.json" + _RANDOM),
    "predictions/*": re.compile(rf"^\.(?:{_NAME}\.json|tmp_{_NAME}\.jsonl)" + _RANDOM),
    "results/*": re.compile(rf"^\.{_NAME}\.json" + _RANDOM),
    "summary": re.compile(r"^\.(?:summary_\d{8}_\d{6}\.(?:txt|csv|md)|(?:models|cost)_\d{8}_\d{6}\.csv)" + _RANDOM),
}


class WorkDirBusy(Exception):
    """Another evaltui process is using the work directory."""


class NotAWorkDir(Exception):
    """The folder holds no run a reader (`evaltui watch`, `show`, `compare`) can read; the message says why."""


def in_use(pid: object) -> str:
    """Why a work dir held by `pid` cannot be used now (after the field or path naming it)."""
    return f"is in use by another evaltui (pid {pid}); wait for it or pass --work-dir"


def shard_suffix(shard: int, shards: int) -> str:
    return f"_{shard}" if shards > 1 else ""


@dataclass(frozen=True)
class WorkDir:
    root: Path
    # this run's superseded/<time> folder once made: everything the run sets aside goes there
    _superseded: list[Path] = field(default_factory=list, compare=False, repr=False)
    _listings: threading.local = field(default_factory=threading.local, compare=False, repr=False)  # see listed()
    _paths: dict[tuple[str, str, str], Path] = field(default_factory=dict, compare=False, repr=False)  # see _file()

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
        evaltui gives its own (see _LEFTOVERS): a user's `.notes.tmp` beside them stays."""
        for folder in self.sandbox_dir.glob("evaltui-exec-*"):
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # not there, or holding something of someone else's
            self.sandbox_dir.rmdir()
        for where, ours in _LEFTOVERS.items():
            for tmp in self.root.glob(f"{where}/.*.tmp"):
                if ours.match(tmp.name) and tmp.is_file() and not tmp.is_symlink():
                    tmp.unlink(missing_ok=True)

    def status_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self._file("infer_status", model, f"{dataset}{shard_suffix(shard, shards)}.json")

    def checkpoint_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self._file("predictions", model, f"tmp_{dataset}{shard_suffix(shard, shards)}.jsonl")

    def predictions_file(self, model: str, dataset: str) -> Path:
        return self._file("predictions", model, f"{dataset}.json")

    def result_file(self, model: str, dataset: str) -> Path:
        return self._file("results", model, f"{dataset}.json")

    def verdicts_file(self, model: str, dataset: str) -> Path:
        """A judged pair's verdicts, one line each as the judge gave it (engine/judge/verdicts.py)."""
        return self._file("judgments", model, f"{dataset}.jsonl")

    def sample_log_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self._file("logs/samples", model, f"{dataset}{shard_suffix(shard, shards)}.jsonl")

    def _file(self, folder: str, model: str, name: str = "") -> Path:
        """`<root>/<folder>/<model>/<name>` (the folder itself for name ""), made once: a run of
        10,000 datasets asks each pair's paths dozens of times, and each was three pathlib joins."""
        key = (folder, model, name)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = self._file(folder, model) / name if name else self.root / folder / model
        return path

    # -- whole-pair housekeeping
    def _pair_files(self, folder: Path, prefix: str, dataset: str, suffix: str) -> list[Path]:
        """`<prefix><dataset><suffix>` and its shards `<prefix><dataset>_<n><suffix>`, whatever the shard count."""
        listings: Listings | None = getattr(self._listings, "folders", None)
        if listings is None:
            return sorted(folder / name for name in Listing(folder).by_stem(prefix, suffix).get(dataset, ()))
        found = (folder / name for name in listings[os.fspath(folder)].by_stem(prefix, suffix).get(dataset, ()))
        return sorted(p for p in found if p.exists())

    @contextmanager
    def listed(self) -> Iterator[None]:
        """Within it, this thread lists each folder of pair files once: a pair's files are those there
        as it began (and still there), not those made meanwhile — what planning wants, which reads a
        pair's earlier files before it writes any — and one not there then is not looked for (`absent`)."""
        self._listings.folders = Listings()
        try:
            yield
        finally:
            self._listings.folders = None

    def absent(self, path: Path) -> bool:
        """Within listed(): whether `path` was not in its folder as listed (False when not known)."""
        listings: Listings | None = getattr(self._listings, "folders", None)
        folder, _, name = os.fspath(path).rpartition(os.sep)  # (a path of this work dir: os.path.split's cases are not its)
        return listings is not None and listings[folder].lacks(name)

    def checkpoint_files(self, model: str, dataset: str) -> list[Path]:
        """Every checkpoint of the pair, including those of an earlier shard layout."""
        return self._pair_files(self._file("predictions", model), "tmp_", dataset, ".jsonl")

    def status_files(self, model: str, dataset: str) -> list[Path]:
        return self._pair_files(self._file("infer_status", model), "", dataset, ".json")

    def sample_log_files(self, model: str, dataset: str) -> list[Path]:
        """Every per-sample log of the pair, of any shard layout."""
        return self._pair_files(self._file("logs/samples", model), "", dataset, ".jsonl")

    def set_aside_pair(self, model: str, dataset: str) -> Path | None:
        """Move everything a run wrote for one model×dataset under `superseded/<time>/` (for
        --fresh and changed data or settings); the folder it went to, None if there was nothing.

        Answers cost model time: work that no longer counts is kept where a user can find it,
        never deleted. Status files go last: they hold the version that marks the rest as stale,
        so a kill half-way leaves the next run still knowing to set aside what is left.
        """
        files = [self.predictions_file(model, dataset), self.result_file(model, dataset)]
        files += self.checkpoint_files(model, dataset) + self._pair_files(self._file("predictions", model), "tmp_", dataset, ".jsonl.damaged")
        files += self.sample_log_files(model, dataset) + self.status_files(model, dataset)
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
        """Whether the final predictions file exists and ends as evaltui ends it (not cut short);
        Unreadable when it is no regular file."""
        path = self.predictions_file(model, dataset)
        if self.absent(path):
            return False
        try:
            with open_regular(path, ANY_SIZE) as f:
                if f.read(1) != b"{":
                    return False
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2))
                return f.read() == b"}\n"
        except Unreadable:
            raise
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
            raise WorkDirBusy(f"work dir {self.root} {in_use(holder)}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def holder(self) -> int | None:
        """The pid of the process that holds the work dir's lock, None when none does or it
        cannot be told (lockstate.py): found out without taking the lock, so the command line
        can refuse a busy work dir before a run (or the TUI) starts; lock() stays the guard."""
        return lock_holder(self.root / ".evaltui.lock") or None

    # -- heartbeat
    def beat(self) -> None:
        atomic_write_text(self.heartbeat_file, now_iso() + "\n")

    def heartbeat_age(self, now: float | None = None) -> float | None:
        """Seconds since the last beat, or None when there is no heartbeat file (Unreadable for
        one that is no regular file, or far longer than a time)."""
        try:
            text = read_regular(self.heartbeat_file, HEARTBEAT_BYTES).decode("utf-8", errors="replace")  # garbage: dated by mtime below
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
        path = self.status_file(model, dataset, shard, shards)
        data = None if self.absent(path) else read_json(path, STATUS_BYTES)
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
        if self.absent(path):
            return None
        try:
            data = read_small(path, RESULT_SMALL)
            if data is not None:
                size, found = len(data), _head(io.BytesIO(data)) if data.endswith(b"}\n") else None
            else:
                with open_regular(path, ANY_SIZE) as f:
                    size = os.fstat(f.fileno()).st_size
                    f.seek(max(0, size - 2))
                    whole = f.read() == b"}\n"
                    f.seek(0)
                    found = _head(f) if whole else None
        except FileNotFoundError:
            return None
        if found is not None:
            return found
        if size > RESULT_BYTES:  # too large to read whole, and not as evaltui writes it: scored again
            return None
        result = read_json(path, RESULT_BYTES)  # another layout, or one without details (an error result)
        if not isinstance(result, dict):
            return None
        result.pop("details", None)
        return result

    def has_scored_result(self, model: str, dataset: str) -> bool:
        data = self.read_result(model, dataset)
        return data is not None and "error" not in data


class StatusWriter:
    """Writes status files and refuses to move a shard back from done/fail by a late write (a
    final status may be written again as itself: a failed shard given the dataset's last count).

    The guard lives here, in the one writer, because the reference system's bug was a progress
    write racing the final one; `reset` is the deliberate exception used when a new run (or a
    retry) re-plans a failed shard.
    """

    def __init__(self, workdir: WorkDir):
        self.workdir = workdir
        self._final: dict[Path, str] = {}

    def write(
        self, model: str, dataset: str, shard: int, shards: int, status: str, *, total: int, completed: int, failed: int, error: str = "",
        version: str = "", reset: bool = False, epochs: int = 1, samples: str = "", urls: tuple[str, ...] = (),
        replace: Callable[[str, Path], None] = os.replace,
    ) -> bool:
        """`epochs` > 1: the counts are of (sample, epoch) units, and the file says how many epochs;
        `samples`: the selection run (sample_ids, --samples) when not all of them; `urls`: the
        model's urls whose answers the pair holds (this run's and earlier runs')."""
        path = self.workdir.status_file(model, dataset, shard, shards)
        if not reset and self._final.get(path, status) != status:  # (a final one restated as itself: its error's count)
            return False
        data = {"status": status, "total": total, "completed": completed, "failed": failed, "error": error, "updated_at": now_iso(), "version": version}
        if epochs != 1:
            data["epochs"] = epochs
        if samples:
            data["samples"] = samples
        if urls:
            data["urls"] = list(urls)
        atomic_write_json(path, data, replace=replace)
        if status in TERMINAL:
            self._final[path] = status
        else:
            self._final.pop(path, None)
        return True


    def settled(self, model: str, dataset: str, shard: int, shards: int, status: str) -> None:
        """A final status put in place here but written elsewhere (the worker process: a batch's `done`s)."""
        self._final[self.workdir.status_file(model, dataset, shard, shards)] = status


def _head(f: BinaryIO) -> dict[str, Any] | None:
    """A result's metrics, on its lines before `"details"` (None: not laid out as evaltui writes it)."""
    return fastjson.object_head(f, b'"details": [', RESULT_LINE_BYTES)
