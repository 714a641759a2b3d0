"""code_exec's programs as Ray tasks (`executor = "ray"`): the cores of the whole cluster score a dataset.

The programs are split into chunks, about TASKS_PER_CPU per CPU of the cluster so that a slow
chunk does not hold the rest up; each chunk is one task claiming one CPU, which runs its
programs one after the other with `judge_code`, the sandbox of a local run, in a scratch
folder of the node it runs on. A task whose worker dies is run again by Ray (a program is
judged from its text alone, so running it twice changes nothing). The watch-scorer calls this
from its scoring thread and waits for every chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ray

from evaltui.redaction import undumpable
from evaltui.scoring.code.code_exec import judge_code

TASKS_PER_CPU = 4


@ray.remote(num_cpus=1)
def _judge_chunk(chunk: list[tuple[str, Any]], timeout: float, memory_mb: int) -> list[tuple[str | None, str]]:
    undumpable()  # the programs' parent: its environment (a node's, perhaps with keys in it) kept from them
    return [judge_code(prediction, record, timeout=timeout, memory_mb=memory_mb) for prediction, record in chunk]


def run_code_on_ray(
    jobs: Sequence[tuple[str, Any]], *, timeout: float, memory_mb: int, workers: int, tmp_root: str | None = None
) -> list[tuple[str | None, str]]:
    """Results in the order of `jobs` (as `run_code_samples`; `workers` and `tmp_root`, which are
    this machine's, do not apply: the cluster's CPUs and each node's scratch folder do)."""
    if not jobs:
        return []
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
    size = max(1, math.ceil(len(jobs) / (TASKS_PER_CPU * cpus)))
    refs = [_judge_chunk.remote(list(jobs[i : i + size]), timeout, memory_mb) for i in range(0, len(jobs), size)]
    return [result for chunk in ray.get(refs) for result in chunk]
