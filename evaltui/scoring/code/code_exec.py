"""HumanEval pass@1: run every sample's program, several at a time.

Each sample is a separate interpreter (see `sandbox`), so the threads here only wait on child
processes; a thread pool is enough to keep `workers` of them running.
"""

from __future__ import annotations

import re
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


#: The keys a record carries when the evaluator names its own program (`with_program`): the
#: template, and how the completion is taken from the reply. The record travels with the reply to
#: wherever programs run (a thread here, a Ray task), so the recipe travels with it.
PROGRAM, COMPLETION = "evaltui_program", "evaltui_completion"


def with_program(record: Any, program: str | None, completion: str) -> Any:
    """`record` carrying the evaluator's program template and completion rule (unchanged without one)."""
    if program is None or not isinstance(record, dict):
        return record
    return {**record, PROGRAM: program, COMPLETION: completion}


def judge_code(prediction: str, record: Any, *, timeout: float, memory_mb: int, tmp_root: str | None = None) -> tuple[str | None, str]:
    """(the completion run, the run's result) for one sample."""
    if isinstance(record, dict) and PROGRAM in record:
        completion = take_completion(prediction, str(record[COMPLETION]))
        try:
            program = str(record[PROGRAM]).format_map({**record, "completion": completion})
        except (KeyError, IndexError, ValueError) as e:
            return completion, f"failed: the evaluator's program cannot be filled from the record ({type(e).__name__}: {e})"
        return completion, run_program(program, timeout=timeout, memory_mb=memory_mb, tmp_root=tmp_root)
    missing = _missing_fields(record)
    if missing:
        return None, f"failed: dataset record lacks {', '.join(missing)}"
    completion = clean_completion(prediction, record["entry_point"])
    program = build_program(record, completion)
    return completion, run_program(program, timeout=timeout, memory_mb=memory_mb, tmp_root=tmp_root)


_V2_FENCE = re.compile(r"```\w*\n(.*?)```", re.DOTALL)


def take_completion(reply: str, rule: str) -> str:
    """The completion a reference runs: the reply as written (lm-eval), or OpenCompass's
    `humaneval_postprocess_v2` (its first fenced block if any, then `lstrip()`, which also strips
    a body's indentation), or evaltui's cleaning needs the record (not here: "cleaned" is judge_code's own path)."""
    if rule == "first_fence_lstrip":
        blocks = _V2_FENCE.findall(reply)
        return (blocks[0] if blocks else reply).lstrip()
    return reply


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
