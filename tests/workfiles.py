"""Read a work dir as a user (or a second tool) would: JSON lines and JSON files, no engine code.

The reliability suites check the engine's files against its promises; reading them with the
engine's own readers would let a bug in those readers hide the bug being looked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def index_of(entry: dict[str, Any]) -> int:
    """A sample's index in a checkpoint line or failures.jsonl line."""
    value = entry.get("sample_index", entry.get("index"))
    assert isinstance(value, int) and not isinstance(value, bool), entry
    return value


def checkpoint_entries(path: Path) -> list[dict[str, Any]]:
    """The complete sample lines of one checkpoint (not its version header, not a torn last line)."""
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        entry = json.loads(raw)
        if "version" not in entry:
            out.append(entry)
    return out


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json `object_pairs_hook` that fails on a key written twice (json.loads keeps the last)."""
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    assert not dup, f"duplicate keys {dup}"
    return dict(pairs)


def read_strict_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=no_duplicate_keys)


@dataclass
class PairAccount:
    """What the files say became of every sample of one model×dataset."""

    succeeded: set[int] = field(default_factory=set)
    failed: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> its error
    completed: int = 0  # the status files' counts
    failed_count: int = 0
    statuses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the status files' reasons for a `fail`


def account(work_dir: Path, model: str, dataset: str) -> PairAccount:
    """Read a pair's checkpoints and status files; fails on a sample run again after it succeeded."""
    acc = PairAccount()
    folder = work_dir / "predictions" / model
    for path in sorted(folder.glob(f"tmp_{dataset}.jsonl")) + sorted(folder.glob(f"tmp_{dataset}_*.jsonl")):
        for entry in checkpoint_entries(path):
            # A failed sample is tried again by the next run (a second line); a finished one never is.
            i = index_of(entry)
            assert i not in acc.succeeded, f"sample {i} again after it succeeded, in {path}"
            if "error" in entry:
                acc.failed[i] = entry["error"]
            else:
                acc.failed.pop(i, None)
                acc.succeeded.add(i)
    for path in sorted((work_dir / "infer_status" / model).glob(f"{dataset}*.json")):
        if path.stem != dataset and not path.stem[len(dataset) + 1 :].isdigit():
            continue
        data = json.loads(path.read_text())
        acc.statuses.append(data["status"])
        acc.errors.append(data.get("error", ""))
        acc.completed += data["completed"]
        acc.failed_count += data["failed"]
    return acc


def failure_log(work_dir: Path) -> list[dict[str, Any]]:
    path = work_dir / "logs" / "failures.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
