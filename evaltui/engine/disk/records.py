"""A work dir read back without running anything: its plan, each pair's state and metrics, and
each (sample, epoch)'s record — the per-sample log joined with the result's details.

What `evaltui show`, its export and `evaltui compare` read, and the details screen for the
few units it shows. Everything streams: records come in (index, epoch) order from an index of
a few bytes per unit (checkpoint.LineIndex), details from the result file a line at a time.
A unit the per-sample log lacks (run with sample_log = false, or by an evaltui that wrote no
log) has its record made from its checkpoint line (prompt, answer, error; no attempts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from evaltui import fastjson
from evaltui.datasets import DatasetError, count_records
from evaltui.engine.disk.checkpoint import ANY_SIZE, LINE_BYTES, scan_checkpoint
from evaltui.engine.disk.lockstate import local_filesystem, run_holder
from evaltui.engine.disk.samplelog import latest_records
from evaltui.engine.disk.workdir import NotAWorkDir, WorkDir
from evaltui.fsutil import Unreadable, open_regular
from evaltui.plan import DatasetConfig, Plan, PlanError, parse_samples, read_snapshot
from evaltui.scoring.score import epoch_verdict


def load_snapshot(root: Path) -> Plan:
    """The plan a work dir was run with (`<work_dir>/plan.toml`, read as `evaltui watch` reads it:
    its schema is checked, not its surroundings — its data files and API keys need not be there
    to read what was done); NotAWorkDir when there is none, or it cannot be read."""
    path = root / "plan.toml"
    if not path.exists():
        raise NotAWorkDir(f"{root}: not an evaltui work dir (no plan.toml)")
    try:
        return read_snapshot(path)
    except PlanError as e:  # each problem names the file: the first is said after what it is
        first = e.problems[0].removeprefix(f"{path}: ").removeprefix(f"{path.name}: ")
        raise NotAWorkDir(f"{path}: cannot read the plan a run wrote there: {first}") from None


class PairView(NamedTuple):
    """One model×dataset as its files say it stands."""

    model: str
    dataset: str
    # pending | running | done | fail (its shards' statuses combined); stopped (a status left
    # running, but no process holds the work dir: killed); scored, error, or "" (no trace of it)
    status: str
    version: str  # the pair's fingerprint (status files): prompts, data and model settings
    epochs: int
    samples: str  # the selection run ("3,17,40-60"), "" for all
    total: int  # units: samples × epochs, as the status files count them
    completed: int
    failed: int
    metrics: dict[str, float] | None  # the result's metrics, main first; None until scored
    dataset_version: str  # the result's fingerprint of the dataset (see versions.dataset_fingerprint); "" before
    error: str  # why inference or scoring failed
    parts: dict[str, dict[str, Any]] = {}  # a grouped benchmark's parts: {part: {metric: value, "samples": n}}
    uncertainty: dict[str, dict[str, Any]] = {}  # each metric's {stderr, ci95, n}, as the result holds it


def result_parts(result: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A result's `parts` (a grouped benchmark's), {} when it has none."""
    parts = (result or {}).get("parts")
    return {str(k): v for k, v in parts.items() if isinstance(v, dict)} if isinstance(parts, dict) else {}


def _uncertainty(result: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A result's `uncertainty` ({metric: {stderr, ci95, n}}), {} when it has none."""
    found = (result or {}).get("uncertainty")
    return {str(k): v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) and "error" not in (result or {}) else {}


def iter_result_details(path: Path) -> Iterator[dict[str, Any]]:
    """The details of a result file, in its order (evaltui writes one per line); nothing when
    the pair is not scored (yet) or the file is not evaltui's."""
    try:
        f = open_regular(path, ANY_SIZE)
    except Unreadable:
        raise
    except OSError:
        return
    with f:
        while raw := f.readline(LINE_BYTES):
            line = raw.strip().rstrip(b",")
            if not (line.startswith(b'{"index"') and line.endswith(b"}")):
                continue
            try:
                detail = fastjson.loads(line)
            except ValueError:
                continue
            if isinstance(detail, dict):
                yield detail


class WorkDirView:
    def __init__(self, root: Path):
        self.workdir = WorkDir(root.resolve())
        self.plan = load_snapshot(self.workdir.root)
        self._holder: int | None = -1  # not looked up yet

    def holder(self) -> int | None:
        """The pid of the process running in the work dir, 0 for none, None when it cannot be
        told (lockstate.py: the lock is never taken; a run on another host holds a lock that a
        shared filesystem's work dir does not show here); looked up once."""
        if self._holder == -1:
            self._holder = run_holder(self.workdir.root, local_filesystem(self.workdir.root), self.plan.run.heartbeat_interval)
        return self._holder

    def pairs(self, models: list[str] | None = None, datasets: list[str] | None = None) -> list[PairView]:
        """The plan's pairs (those named, in plan order) as their files say they stand."""
        return [
            self.pair(m.abbr, d)
            for m in self.plan.tested
            if models is None or m.abbr in models
            for d in self.plan.datasets
            if datasets is None or d.abbr in datasets
        ]

    def pair(self, model: str, ds: DatasetConfig) -> PairView:
        wd = self.workdir
        statuses = [s for s in (wd.read_status(model, ds.abbr, k, ds.shards) for k in range(ds.shards)) if s is not None]
        status, error = self._inferred(statuses, ds.shards)
        result = wd.read_result(model, ds.abbr)
        metrics = None
        if result is not None and "error" in result:
            status, error = "error", str(result["error"])
        elif result is not None:
            status = "scored"
            metrics = {k: float(v) for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "epochs"}
        first = statuses[0] if statuses else {}
        completed, failed = self._counts(model, ds)
        return PairView(
            model, ds.abbr, status, str(first.get("version", "")), int(first.get("epochs", self.plan.epochs(ds).count)), str(first.get("samples", "")),
            sum(s["total"] for s in statuses), completed, failed, metrics, str((result or {}).get("dataset_version", "")), error,
            result_parts(result), _uncertainty(result),
        )

    def _counts(self, model: str, ds: DatasetConfig) -> tuple[int, int]:
        """(completed, failed) units of the pair: a finished shard's as its status file says, an
        unfinished one's from its checkpoint — a run writes its status every few samples, its
        checkpoint every sample, so a killed run's status is behind what is on disk (`evaltui
        watch` counts the same lines)."""
        completed = failed = 0
        for k in range(ds.shards):
            status = self.workdir.read_status(model, ds.abbr, k, ds.shards)
            if status is None:
                continue
            if status["status"] in ("done", "fail"):
                completed, failed = completed + status["completed"], failed + status["failed"]
                continue
            ok, standing = checkpoint_counts(self.workdir.checkpoint_file(model, ds.abbr, k, ds.shards))
            completed, failed = completed + ok, failed + standing
        return completed, failed

    def _inferred(self, statuses: list[dict[str, Any]], shards: int) -> tuple[str, str]:
        """The shards' statuses combined, and why they failed; `stopped` when they say running
        but no process holds the work dir (killed), as `evaltui watch` tells a run alive."""
        status = _combined([s["status"] for s in statuses], shards)
        error = next((s.get("error", "") for s in statuses if s.get("status") == "fail" and s.get("error")), "")
        if status == "running" and self.holder() == 0:
            return "stopped", "killed or interrupted"
        return status, error

    def records(self, model: str, dataset: str) -> Iterator[dict[str, Any]]:
        """Every (sample, epoch)'s record, in order, joined with its verdict when scored: the
        log's, or the checkpoint's for a unit the log lacks."""
        ds = self.plan.dataset(dataset)
        logs, checkpoints = self.workdir.sample_log_files(model, dataset), self.workdir.checkpoint_files(model, dataset)
        extent = sample_extent(self.workdir, self.plan, model, ds, [*checkpoints, *logs])
        found = latest_records(logs, extent, self.plan.epochs(ds).count, checkpoints=checkpoints)
        yield from _joined(found, iter_result_details(self.workdir.result_file(model, dataset)))


def sample_extent(wd: WorkDir, plan: Plan, model: str, ds: DatasetConfig, paths: list[Path]) -> int:
    """How many sample indices a pair's records can have (one more than the highest): as its
    status files count them (the highest selected index + 1 for a selection), else its data
    file; only when neither says, the highest index in `paths`. A stray line far beyond (an
    index of 10 digits) is left out instead of making room for it."""
    statuses = [s for s in (wd.read_status(model, ds.abbr, k, ds.shards) for k in range(ds.shards)) if s is not None]
    if statuses and len(statuses) == ds.shards:
        if statuses[0].get("samples"):
            with contextlib.suppress(ValueError):
                return 1 + max(parse_samples(str(statuses[0]["samples"])))
        epochs = max(1, int(statuses[0].get("epochs", 1)))
        return sum(int(s.get("total", 0)) for s in statuses) // epochs
    with contextlib.suppress(DatasetError, OSError):
        return count_records(plan, ds)
    return 1 + max((line.sample for path in paths for line in scan_checkpoint(path)), default=-1)


def checkpoint_counts(path: Path) -> tuple[int, int]:
    """(answered, failed and never answered since) units of a checkpoint."""
    ok: set[tuple[int, int]] = set()
    failed: set[tuple[int, int]] = set()
    for line in scan_checkpoint(path):
        unit = (line.sample, line.epoch)
        if line.ok:
            ok.add(unit)
            failed.discard(unit)
        elif unit not in ok:
            failed.add(unit)
    return len(ok), len(failed)


def _combined(statuses: list[str], shards: int) -> str:
    if not statuses:
        return ""
    if len(statuses) < shards or "running" in statuses or "pending" in statuses:
        return "running" if "running" in statuses else "pending"
    return "fail" if "fail" in statuses else "done"


def _joined(units: Iterator[dict[str, Any]], details: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Records in (index, epoch) order with the verdict of their sample's detail (details are in
    index order): its gold, the epoch's extracted answer and verdict, the sample's reduced scores."""
    detail: dict[str, Any] | None = next(details, None)
    for unit in units:
        index, epoch = unit["index"], unit.get("epoch", 0)
        while detail is not None and _index(detail) < index:
            detail = next(details, None)
        record = {**unit, "epoch": epoch, "attempts": [_attempt(a) for a in unit.get("attempts", [])]}
        if detail is not None and _index(detail) == index:
            record.update(_verdict(detail, epoch))
        yield record


def _index(detail: dict[str, Any]) -> int:
    value = detail.get("index")
    return value if isinstance(value, int) else -1


def _verdict(detail: dict[str, Any], epoch: int) -> dict[str, Any]:
    found: dict[str, Any] = {"gold": detail.get("gold")}
    own = epoch_verdict(detail, epoch)
    for key in ("extracted", "correct", "result", "explanation"):
        if key in own:
            found[key] = own[key]
    if "why" in own:  # scoring failed this unit (a judge without a grade, a python evaluator that raised)
        found["error"] = {"type": own.get("error"), "status": None, "message": own["why"]}
    if isinstance(detail.get("scores"), dict):
        found["scores"] = detail["scores"]
    return found


def _attempt(a: Any) -> dict[str, Any]:
    """An attempt of the log ([start, seconds, status, outcome(, replica)]) as an object."""
    if not isinstance(a, list) or len(a) < 4:
        return {"raw": a}
    out = {"at": a[0], "seconds": a[1], "status": a[2], "outcome": a[3]}
    if len(a) > 4:
        out["replica"] = a[4]
    return out
