"""Every path and file format of the work directory (SPEC §6), with OpenCompass's names.

Two kinds of writes, each safe against `kill -9` at any instant:
- whole JSON files (status, final predictions, results) go to a temporary name and are renamed
  into place, so a reader sees the old file or the new one;
- checkpoints are append-only JSONL, one `os.write` per finished sample; a kill mid-write can
  leave a torn last line, which reading skips and reopening cuts off, losing only that sample.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from evaltui.fsutil import atomic_write_json, atomic_write_text, read_json

TERMINAL = ("done", "fail")


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds")


def parse_iso(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def shard_suffix(shard: int, shards: int) -> str:
    return f"_{shard}" if shards > 1 else ""


@dataclass(frozen=True)
class WorkDir:
    root: Path

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
    def summary_dir(self) -> Path:
        return self.root / "summary"

    def status_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self.root / "infer_status" / model / f"{dataset}{shard_suffix(shard, shards)}.json"

    def checkpoint_file(self, model: str, dataset: str, shard: int = 0, shards: int = 1) -> Path:
        return self.root / "predictions" / model / f"tmp_{dataset}{shard_suffix(shard, shards)}.jsonl"

    def predictions_file(self, model: str, dataset: str) -> Path:
        return self.root / "predictions" / model / f"{dataset}.json"

    def result_file(self, model: str, dataset: str) -> Path:
        return self.root / "results" / model / f"{dataset}.json"

    # -- whole-pair housekeeping
    def forget_pair(self, model: str, dataset: str) -> None:
        """Remove everything a run wrote for one model×dataset (for --fresh and changed configs)."""
        for folder, pattern in (
            (self.root / "infer_status" / model, f"{dataset}*.json"),
            (self.root / "predictions" / model, f"tmp_{dataset}*.jsonl"),
        ):
            for p in folder.glob(pattern) if folder.is_dir() else ():
                stem = p.name.removeprefix("tmp_").rsplit(".", 1)[0]
                if stem == dataset or (stem.startswith(dataset + "_") and stem[len(dataset) + 1 :].isdigit()):
                    p.unlink(missing_ok=True)
        self.predictions_file(model, dataset).unlink(missing_ok=True)
        self.result_file(model, dataset).unlink(missing_ok=True)

    def prepare(self) -> None:
        for sub in ("infer_status", "predictions", "results", "summary", "logs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    # -- heartbeat
    def beat(self) -> None:
        atomic_write_text(self.heartbeat_file, now_iso() + "\n")

    def heartbeat_age(self, now: float | None = None) -> float | None:
        """Seconds since the last beat, or None when there is no heartbeat file."""
        try:
            text = self.heartbeat_file.read_text()
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
        data = read_json(self.status_file(model, dataset, shard, shards))
        return data if isinstance(data, dict) else None

    def read_result(self, model: str, dataset: str) -> dict[str, Any] | None:
        data = read_json(self.result_file(model, dataset))
        return data if isinstance(data, dict) else None

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
    """Append-only JSONL of finished samples for one shard."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def read(self) -> dict[int, dict[str, Any]]:
        """index → entry, a success beating an earlier failure; torn or foreign lines skipped."""
        entries: dict[int, dict[str, Any]] = {}
        for entry in iter_checkpoint(self.path):
            idx = entry["index"]
            old = entries.get(idx)
            if old is None or "error" in old:
                entries[idx] = entry
        return entries

    def open(self) -> None:
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

    def append(self, entry: dict[str, Any]) -> None:
        assert self._fd is not None, "checkpoint not open"
        os.write(self._fd, (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def iter_checkpoint(path: Path) -> Iterator[dict[str, Any]]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write: that sample is simply not done
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("index"), int):
                yield entry


def write_predictions(path: Path, entries: list[dict[str, Any]]) -> None:
    """The final predictions file: {"0": {...}, "1": {...}} in index order, falsy golds kept."""
    ordered = sorted(entries, key=lambda e: e["index"])
    out = {str(e["index"]): {k: v for k, v in e.items() if k != "index"} for e in ordered}
    atomic_write_json(path, out)


def read_predictions(path: Path) -> list[dict[str, Any]] | None:
    data = read_json(path)
    if not isinstance(data, dict):
        return None
    return [{"index": int(k), **v} for k, v in sorted(data.items(), key=lambda kv: int(kv[0]))]


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
