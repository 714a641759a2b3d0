"""HumanEval pass@1: run every sample's program, several at a time.

Each sample is a separate interpreter (see `sandbox`), so the threads here only wait on child
processes; a thread pool is enough to keep `workers` of them running.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .completion import build_program, clean_completion
from .sandbox import PASSED, run_program

_RECORD_FIELDS = ("prompt", "test", "entry_point")


def _missing_fields(record: Any) -> list[str]:
    if not isinstance(record, dict):
        return list(_RECORD_FIELDS)
    return [name for name in _RECORD_FIELDS if not isinstance(record.get(name), str)]


def judge_code(prediction: str, record: Any, *, timeout: float, memory_mb: int, tmp_root: str | None = None) -> tuple[str | None, str]:
    """(the cleaned completion, the run's result) for one sample."""
    missing = _missing_fields(record)
    if missing:
        return None, f"failed: dataset record lacks {', '.join(missing)}"
    completion = clean_completion(prediction, record["entry_point"])
    program = build_program(record, completion)
    return completion, run_program(program, timeout=timeout, memory_mb=memory_mb, tmp_root=tmp_root)


class CodeRunner(Protocol):
    """What runs a dataset's programs: `run_code_samples` here, or Ray tasks (engine/ray/code.py)."""

    def __call__(
        self, jobs: Sequence[tuple[str, Any]], *, timeout: float, memory_mb: int, workers: int, tmp_root: str | None = None
    ) -> list[tuple[str | None, str]]: ...


def run_code_samples(
    jobs: Sequence[tuple[str, Any]],
    *,
    timeout: float,
    memory_mb: int,
    workers: int,
    tmp_root: str | None = None,
) -> list[tuple[str | None, str]]:
    """Results in the order of `jobs`, each a (prediction, record) pair."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(int(workers), len(jobs))), thread_name_prefix="evaltui-exec") as pool:
        futures = [
            pool.submit(judge_code, prediction, record, timeout=timeout, memory_mb=memory_mb, tmp_root=tmp_root)
            for prediction, record in jobs
        ]
        return [future.result() for future in futures]


def is_pass(result: str) -> bool:
    return result == PASSED
