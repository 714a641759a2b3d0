"""One model×dataset scored from its files into its result file (SPEC §7): what the watch-scorer
(scorer.py) runs for each pair, in a worker thread or, for a small light pair, on the loop."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evaltui.datasets import load_records
from evaltui.engine.disk.predictions import iter_predictions, read_predictions
from evaltui.engine.disk.versions import dataset_fingerprint, evaluator_version
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.fsutil import atomic_writer, dumps_readable, json_bytes
from evaltui.plan import DatasetConfig, Epochs, Plan, samples_spec

if TYPE_CHECKING:
    from evaltui.scoring.code.code_exec import CodeRunner
    from evaltui.scoring.reference.parts import PartSums

Replace = Callable[[str, Path], None]


class ScoringFailed(Exception):
    """A pair's scoring raised in the scoring process; its message is what `failure_message` said
    there (an exception need not pickle), so an error result reads the same wherever it was scored."""


def failure_message(e: Exception) -> str:
    """What a pair's error result (and its event) says: the exception, and when the machine failed
    (a full disk, no file handles), not the evaluator, that the predictions are safe and the next
    run scores them."""
    if isinstance(e, ScoringFailed):
        return str(e)
    if not isinstance(e, OSError):
        return f"{type(e).__name__}: {e}"
    fix = "free space and run again" if e.errno == errno.ENOSPC else "fix this and run again"
    return f"{type(e).__name__}: {e} — the predictions are kept; {fix} to score them"


class Scored(NamedTuple):
    metrics: dict[str, float]  # the main one first
    parts: ev.Parts = ()  # a grouped benchmark's parts
    intervals: ev.Intervals = ()  # each metric's standard error and 95 % interval


def score_pair(
    plan: Plan, workdir: WorkDir, model: str, dataset: str, workers: int, replace: Replace = os.replace, run_code: CodeRunner | None = None,
    statuses: Sequence[Mapping[str, Any]] | None = None,
) -> Scored:
    """Score one pair from its files, write its result file, return its metrics (the main one first).

    Runs in a worker thread, or a small light one on the loop (Scorer._score_on_loop). `statuses`:
    its shards' status files as the scorer read them to find it ready (read here otherwise).
    Text evaluators stream: predictions are read, judged and written
    out as details one at a time, so scoring a million samples holds none of them; code_exec
    runs samples in parallel subprocesses (or Ray tasks: `run_code`) and takes the (small)
    dataset whole.
    """
    from evaltui import scoring  # first imported here, in a worker thread, off the start-up path
    from evaltui.engine.judge.judging import scoring_judge
    from evaltui.scoring.reference.parts import as_parts, mean_of_parts
    from evaltui.scoring.think import stripped_entries

    ds = plan.dataset(dataset)
    epochs = plan.epochs(ds)
    path = workdir.predictions_file(model, dataset)
    scored_with = evaluator_version(ds)  # a later run with another evaluator scores again
    out = workdir.result_file(model, dataset)
    if ds.evaluator.type == "code_exec":
        predictions = read_predictions(path)
        if predictions is None:
            raise ValueError(f"predictions file missing or unreadable: {path}")
        runner = {} if run_code is None else {"run_code": run_code}
        predictions = list(stripped_entries(predictions, plan.model(model).reasoning_tags))
        result = scoring.score(ds.evaluator, predictions, load_records(plan, ds), workers=workers, tmp_root=str(workdir.sandbox_dir), epochs=epochs, **runner)
        details = result.pop("details")
        uncertainty = result.pop("uncertainty", {})
        head = {**_run_as(plan, ds, epochs, workdir, model, statuses), **({"uncertainty": uncertainty} if uncertainty else {})}
        with atomic_writer(out, replace=replace) as w:
            w.write(dumps_readable({**result, **head, "scored_with": scored_with, "details": details}).encode("utf-8"))
        return Scored({name: float(value) for name, value in result.items()}, intervals=scoring.result_intervals(head))
    reduction = scoring.Reduction.of(ds.evaluator, epochs)
    sums = scoring.MetricSums(reduction)
    parts = _part_sums(plan, ds, reduction)
    if not out.parent.is_dir():  # (a details file past 4 MiB is made there)
        out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+b", dir=str(out.parent)) as details:  # a file past 4 MiB
        answers = stripped_entries(iter_predictions(path), plan.model(model).reasoning_tags)  # a reasoning model's thinking cut out
        for detail in scoring.iter_details(ds.evaluator, answers, reduction, scoring_judge(plan, workdir, model, ds)):
            details.write(b"%s\n    %s" % (b"," if sums.count else b"", json_bytes(detail)))
            sums.add(detail)
            if parts is not None:
                parts.add(detail)
        metrics, head, intervals = sums.result(), _run_as(plan, ds, epochs, workdir, model, statuses), sums.intervals()
        if parts is not None:
            head["parts"] = by_part = parts.result()
            if ds.evaluator.aggregate == "parts":  # OpenCompass's naive average of the parts
                metrics = mean_of_parts(by_part, reduction.metrics)
                intervals = parts.mean_intervals(metrics)
        if intervals:
            head["uncertainty"] = {name: interval.as_json() for name, interval in intervals.items()}
        details.seek(0)
        with atomic_writer(out, replace=replace) as w:
            w.write(b"{\n")
            for name, value in {**metrics, **head}.items():
                w.write(b"  %s: %s,\n" % (json.dumps(name).encode(), json.dumps(value).encode()))
            w.write(b'  "scored_with": "%s",\n  "details": [' % scored_with.encode())
            shutil.copyfileobj(details, w)
            w.write(b"\n  ]\n}\n" if sums.count else b"]\n}\n")
    return Scored(metrics, as_parts(head.get("parts"), reduction.metrics), tuple(intervals.items()))


def _part_sums(plan: Plan, ds: DatasetConfig, reduction: Any) -> PartSums | None:
    """A grouped benchmark's per-part sums (its records name each sample's `subset`), else None."""
    if not ds.benchmark:
        return None
    records = load_records(plan, ds)
    if not records or "subset" not in records[0]:
        return None
    from evaltui.scoring.reference.parts import PartSums

    def part_of(index: int) -> str | None:
        return records[index].get("subset") if 0 <= index < len(records) else None

    return PartSums(reduction, part_of)


def _run_as(
    plan: Plan, ds: DatasetConfig, epochs: Epochs, workdir: WorkDir, model: str, statuses: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """What a result says of how its samples were run: the dataset's fingerprint (which
    `evaltui compare` checks), and when not all once by mean, its epochs and reducer, the
    selection (`samples`) when not all of them; the urls whose answers it scored (its status
    files keep them over runs: a server moved to another host is on record)."""
    head: dict[str, Any] = {"dataset_version": dataset_fingerprint(plan, ds)}
    if not epochs.trivial:
        head.update(epochs=epochs.count, reducer=epochs.reducer)
    if ds.sample_ids is not None:
        head["samples"] = samples_spec(ds.sample_ids)
    urls: dict[str, None] = {}
    if statuses is None:
        statuses = [workdir.read_status(model, ds.abbr, k, ds.shards) or {} for k in range(ds.shards)]
    for status in statuses:
        urls.update((u, None) for u in status.get("urls", ()) if isinstance(u, str))
    if urls:
        head["urls"] = list(urls)
    return head
