"""How a run's end is judged: which result files are this plan's, and what stopped it.

A stop can leave earlier files in place — a `--samples` run's result, say, before the plan's
whole dataset was run — and the leaderboard and the exit code must not take them for this
run's: a result says which dataset it scored (`dataset_version`), and only this plan's counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from evaltui.engine.disk.versions import dataset_fingerprint
from evaltui.engine.disk.workdir import WorkDir
from evaltui.plan import Plan


def current_result(
    plan: Plan, workdir: WorkDir, model: str, dataset: str, fingerprint: Callable[[str], str] | None = None
) -> dict[str, Any] | None:
    """A pair's result, when it scored this plan's dataset: one of another selection of samples
    (an earlier `--samples` run), another limit, epochs, data or evaluator is not this dataset's
    score, whatever a stop left in place. A result without a version (an older evaltui's) counts.
    `fingerprint`: the dataset's fingerprint by abbr, when the caller keeps them (EndReads)."""
    result = workdir.read_result(model, dataset)
    version = result.get("dataset_version") if result is not None else None
    if isinstance(version, str) and version:
        current = fingerprint(dataset) if fingerprint is not None else dataset_fingerprint(plan, plan.dataset(dataset))
        if current and version != current:
            return None
    return result


class EndReads:
    """One run end's view of its results: each pair's file read once (`current_result`), each
    dataset's fingerprint made once, for the exit code and the leaderboard alike.

    The end used to read every result twice (the exit code, then the leaderboard) and fingerprint
    each dataset's data file again for every read: with 10,000 small datasets that was most of
    the end. Nothing scores between the two (the session has ended, abandoned scorings are fenced
    off by the gate), so one read per pair is the same verdict."""

    def __init__(self, plan: Plan, workdir: WorkDir):
        self.plan = plan
        self.workdir = workdir
        self._results: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._fingerprints: dict[str, str] = {}

    def __call__(self, model: str, dataset: str) -> dict[str, Any] | None:
        key = (model, dataset)
        if key not in self._results:
            self._results[key] = current_result(self.plan, self.workdir, model, dataset, self._fingerprint)
        return self._results[key]

    def _fingerprint(self, dataset: str) -> str:
        if dataset not in self._fingerprints:
            self._fingerprints[dataset] = dataset_fingerprint(self.plan, self.plan.dataset(dataset))
        return self._fingerprints[dataset]


def only_os_errors(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` when it (or every non-cancellation part of its group) is one."""
    if isinstance(exc, OSError):
        return exc
    parts = getattr(exc, "exceptions", None)
    if not parts:
        return None
    found: OSError | None = None
    for part in parts:
        if isinstance(part, anyio.get_cancelled_exc_class()):
            continue
        inner = only_os_errors(part)
        if inner is None:
            return None
        found = found or inner
    return found
