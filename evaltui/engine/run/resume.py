"""Resume planning: what each pair keeps from earlier runs, and what is left for this one.

Work done under other settings (a changed data file, prompt or model) is set aside, never
deleted; a pair an earlier run finished as this plan wants it is announced and not run again;
any other pair resumes from its checkpoints, whatever shard layout wrote them. Planning reads
every checkpoint line and hashes the data file, so the session runs it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from evaltui.datasets import file_fingerprint, is_conversation
from evaltui.engine.disk.checkpoint import Checkpoint, Line, TurnNotes, checkpoint_version, in_order, scan_checkpoint
from evaltui.engine.disk.damaged import DAMAGED, Sorter
from evaltui.engine.disk.predictions import predictions_to_checkpoint
from evaltui.engine.disk.units import unit_key
from evaltui.engine.disk.versions import evaluator_version, pair_version
from evaltui.engine.disk.workdir import STATUS_BYTES, StatusWriter, WorkDir
from evaltui.engine.run.runs import DatasetRun, ShardRun, UnitFlags, shard_indices
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.engine.unit.tries import SampleTokens
from evaltui.fsutil import read_json
from evaltui.plan import DatasetConfig, Epochs, ModelConfig, Plan, samples_spec


def plan_pairs(
    plan: Plan,
    model: ModelConfig,
    wd: WorkDir,
    statuses: StatusWriter,
    totals: dict[str, int],
    datasets: list[DatasetConfig],
    emit: ev.Sink,
) -> list[DatasetRun]:
    """Decide per dataset what is left from earlier runs; write `pending` statuses.

    Its events (DatasetPlanned, notices) go to `emit`, which the caller replays on the loop.
    The runs returned are handed to the model's pool (`WorkerPool.add_runs`).
    """
    with wd.listed():  # each folder of pair files read once, not once a pair
        return _plan_pairs(plan, model, wd, statuses, totals, datasets, emit)


def plan_chunk(
    plan: Plan, model: ModelConfig, wd: WorkDir, statuses: StatusWriter, totals: dict[str, int], datasets: list[DatasetConfig], emit: ev.Sink
) -> tuple[list[DatasetRun], list[tuple[str, str]]]:
    """plan_pairs, and which of the pairs await scoring (no scored result): what a session plans
    of each chunk, in a thread or in the worker process."""
    runs = plan_pairs(plan, model, wd, statuses, totals, datasets, emit)
    m = model.abbr
    return runs, [(m, d.abbr) for d in datasets if not wd.has_scored_result(m, d.abbr)]


def _plan_pairs(
    plan: Plan, model: ModelConfig, wd: WorkDir, statuses: StatusWriter, totals: dict[str, int], datasets: list[DatasetConfig], emit: ev.Sink
) -> list[DatasetRun]:
    m = model.abbr
    runs = []
    moved: list[str] = []  # datasets whose answers came from another url
    for ds in datasets:
        total = totals[ds.abbr]
        epochs = plan.epochs(ds).count
        fresh = _untouched(wd, m, ds.abbr)
        if fresh:  # nothing of it to keep whole, read back or set aside
            version, urls = pair_version(model, ds, file_fingerprint(plan, ds) or ""), tuple(dict.fromkeys(model.urls))
            answered, failures = bytearray(total * epochs), bytearray(total * epochs)
            answered_turns: dict[int, dict[int, dict[str, Any]]] | None = {} if is_conversation(ds) else None
            rebuilt_now: list[Path] = []
        else:
            earlier = _earlier_work(plan, model, wd, ds, total, moved, emit)
            if earlier is None:  # kept whole (announced)
                continue
            version, urls, answered, failures, answered_turns, rebuilt_now = earlier
        indices: Sequence[int] = range(total) if ds.sample_ids is None else ds.sample_ids
        done, failed = UnitFlags(total * epochs, answered), UnitFlags(total * epochs, failures)  # failed: none since answered
        n = ds.shards
        samples = "" if ds.sample_ids is None else samples_spec(ds.sample_ids)
        shards = []
        for k, part in enumerate(shard_indices(indices, n)):
            cp = Checkpoint(wd.checkpoint_file(m, ds.abbr, k, n), version)
            shard = ShardRun(k, part, cp, completed=done.count_in(part, epochs), epochs=epochs)
            if plan.run.sample_log:
                shard.log = Checkpoint(wd.sample_log_file(m, ds.abbr, k, n), version)
            shards.append(shard)
            statuses.write(
                m, ds.abbr, k, n, "pending", total=shard.total, completed=shard.completed, failed=0, version=version, reset=True, epochs=epochs,
                samples=samples, urls=urls,
            )
        units = len(indices) * epochs
        run = DatasetRun(ds, units, version, shards, done, failed, records=total, epochs=epochs, remaining=units - len(done))
        run.selection, run.samples, run.urls, run.fresh = ds.sample_ids, samples, urls, fresh
        run.checkpoints = sorted({*wd.checkpoint_files(m, ds.abbr), *rebuilt_now, *(s.checkpoint.path for s in shards)})
        run.tokens = SampleTokens(ds.token_limit) if ds.token_limit else None
        run.turns = _unfinished(answered_turns, answered)
        runs.append(run)
        emit(ev.DatasetPlanned(m, ds.abbr, units, n, len(done), 0, PairStatus.PENDING))
    if moved:
        emit(ev.Notice(
            f"{m}: its url is not the one that answered earlier runs of {', '.join(moved)} (now {', '.join(model.urls)}): "
            "their answers are kept, as a url is not what makes an answer stale (--fresh starts over); results record each url", "warning"))
    return runs


# What a pair keeps of earlier runs (_earlier_work): its version, urls, units answered and failed, turns answered, checkpoint rebuilt
Earlier = tuple[str, tuple[str, ...], bytearray, bytearray, dict[int, dict[int, dict[str, Any]]] | None, list[Path]]


def _untouched(wd: WorkDir, m: str, dataset: str) -> bool:
    """Whether no file of the pair was there as planning listed the work dir (WorkDir.listed):
    then there is nothing to read, and a fresh run of 10,000 datasets looks for none of their
    files one by one (each look a system call, dearer still when the GIL is waited for after it)."""
    if not (wd.absent(wd.predictions_file(m, dataset)) and wd.absent(wd.result_file(m, dataset))):
        return False  # (asked first: a pair done before is told by a name, not a stat of its files as these lists make)
    return not wd.status_files(m, dataset) and not wd.checkpoint_files(m, dataset)


def _earlier_work(plan: Plan, model: ModelConfig, wd: WorkDir, ds: DatasetConfig, total: int, moved: list[str], emit: ev.Sink) -> Earlier | None:
    """What a pair keeps of the files earlier runs left: its version, urls, the units they
    answered and failed (a byte each, by key: disk/units.py), a conversation's turns answered and
    the checkpoint rebuilt from its final predictions (if it was); None when it is kept whole.
    `moved` gets the pair's dataset when its answers came from another url."""
    m, epochs = model.abbr, plan.epochs(ds).count
    version, urls, result = _drop_stale_work(plan, model, wd, ds, emit)
    scored = result is not None and "error" not in result  # (wd.has_scored_result, without reading it again)
    if len(urls) > len(model.urls):
        moved.append(ds.abbr)
    count = total if ds.sample_ids is None else len(ds.sample_ids)
    # A pair scored whole is kept without reading its checkpoints again; any other has them
    # read through first: a damaged line (set aside) means its predictions are to be rebuilt.
    if scored and _kept_whole(m, wd, ds, count, plan.epochs(ds), result, emit):
        return None
    chosen = None if ds.sample_ids is None else set(ds.sample_ids)
    answered, failures = bytearray(total * epochs), bytearray(total * epochs)
    damaged, answered_turns = _sort_lines(wd, m, ds, version, epochs, chosen, answered, failures, total)
    if damaged:
        _say_damaged(wd, m, ds.abbr, damaged, emit)
    elif not scored and _kept_whole(m, wd, ds, count, plan.epochs(ds), result, emit):
        return None
    rebuilt_now: list[Path] = []  # (the listing planning reads was made before it)
    if wd.predictions_complete(m, ds.abbr) and not wd.checkpoint_files(m, ds.abbr):
        # Checkpoints deleted after the merge (as OpenCompass users do): the final file
        # holds the same samples, so it becomes the checkpoint to resume from.
        predictions_to_checkpoint(wd.predictions_file(m, ds.abbr), rebuilt := wd.checkpoint_file(m, ds.abbr, 0, 1))
        _read_back(wd, m, ds.abbr, total, epochs, chosen, answered, failures)
        rebuilt_now.append(rebuilt)
    # Predictions for another limit, an unfinished shard or a file cut short: rebuild them.
    for old in (wd.predictions_file(m, ds.abbr), wd.result_file(m, ds.abbr)):
        if not wd.absent(old):
            old.unlink(missing_ok=True)
    return version, urls, answered, failures, answered_turns, rebuilt_now


def _drop_stale_work(
    plan: Plan, model: ModelConfig, wd: WorkDir, ds: DatasetConfig, emit: ev.Sink
) -> tuple[str, tuple[str, ...], dict[str, Any] | None]:
    """Forget what earlier runs did under other settings; the pair's version for this run, the
    urls whose answers it holds (earlier runs' kept, as their status files say), and its result
    file's head as it is now (None once set aside), which planning reads no more."""
    m = model.abbr
    data = file_fingerprint(plan, ds)
    version = pair_version(model, ds, data or "")
    current = {wd.status_file(m, ds.abbr, k, ds.shards) for k in range(ds.shards)}
    listed = wd.status_files(m, ds.abbr)
    statuses = [read_json(p, STATUS_BYTES) for p in listed]
    seen = {s.get("version") for s in statuses if isinstance(s, dict)}
    seen |= {v for v in map(checkpoint_version, wd.checkpoint_files(m, ds.abbr)) if v}
    # An unreadable file (a mount gone away) proves nothing changed: keep the work; the
    # dataset fails when it is loaded, and the next run carries on.
    earlier = [u for s in statuses if isinstance(s, dict) and isinstance(s.get("urls"), list) for u in s["urls"] if isinstance(u, str)]
    if data is not None and seen - {version, ""}:
        earlier, listed = [], []  # (its status files are set aside with the rest)
        folder = wd.set_aside_pair(m, ds.abbr)
        # A status without a version was not written by evaltui (OpenCompass writes that layout).
        why = ("was written by another tool (no evaltui version in its status files)" if None in seen
               else "the data file, the dataset's prompts or the model's settings changed since the last run")
        emit(ev.Notice(f"{m}/{ds.abbr}: {why}; starting it over (the earlier work is in {folder})", "warning"))
    for stale in set(listed) - current:
        stale.unlink(missing_ok=True)  # another shard layout: its samples are read back from its checkpoints
    result = wd.read_result(m, ds.abbr)
    if result is not None and result.get("scored_with") != evaluator_version(ds):
        wd.set_aside(wd.result_file(m, ds.abbr))  # scored another way (or failed): score again
        result = None
    return version, tuple(dict.fromkeys([*earlier, *model.urls])), result


def _kept_whole(m: str, wd: WorkDir, ds: DatasetConfig, total: int, of: Epochs, result: dict[str, Any] | None, emit: ev.Sink) -> bool:
    """Whether an earlier run finished this pair as this plan wants it (then it is announced);
    `result` is its result file's head (WorkDir.read_result)."""
    n, epochs = ds.shards, of.count
    statuses = [s for s in (wd.read_status(m, ds.abbr, k, n) for k in range(n)) if s is not None]
    if not wd.predictions_complete(m, ds.abbr) or len(statuses) != n or not all(s.get("status") == "done" for s in statuses):
        return False
    samples = "" if ds.sample_ids is None else samples_spec(ds.sample_ids)
    if any(s.get("epochs", 1) != epochs or s.get("samples", "") != samples for s in statuses):  # other epochs, another selection
        return False
    if sum(s.get("total", -1) for s in statuses) != total * epochs:  # another limit
        return False
    if any(s.get("failed", 0) for s in statuses):
        # Samples that fail_on_error let pass are still tried again on every re-run (SPEC §5):
        # the pair resumes from its checkpoints, where only they are left to do.
        return False
    completed = sum(s.get("completed", 0) for s in statuses)
    if result is None or "error" in result:
        emit(ev.DatasetPlanned(m, ds.abbr, total * epochs, n, completed, 0, PairStatus.DONE))
        return True
    from evaltui.scoring import Reduction  # only when an earlier score is kept
    from evaltui.scoring.reference.parts import as_parts
    from evaltui.scoring.summary import result_intervals

    metrics = Reduction.of(ds.evaluator, of).metrics
    metric, *others = metrics
    extra = tuple((name, _number(result.get(name))) for name in others)
    parts = as_parts(result.get("parts"), metrics)
    score = _number(result.get(metric))
    emit(ev.DatasetPlanned(m, ds.abbr, total * epochs, n, completed, 0, PairStatus.SCORED, metric, score, extra, parts, result_intervals(result)))
    return True


def _sort_lines(
    wd: WorkDir, m: str, ds: DatasetConfig, version: str, epochs: int, chosen: set[int] | None, answered: bytearray, failures: bytearray, total: int
) -> tuple[int, dict[int, dict[int, dict[str, Any]]] | None]:
    """Each checkpoint line of the pair read: the units it answered or failed marked, a damaged
    line set aside (how many), and for a conversation dataset the requests answered of each
    unit not done (its turn lines, read before a damaged line is cut out), by unit key."""
    damaged = 0
    turns: dict[int, dict[int, dict[str, Any]]] | None = {} if is_conversation(ds) else None
    for sorter in [Sorter(p, version, TurnNotes(epochs) if turns is not None else None) for p in wd.checkpoint_files(m, ds.abbr)]:
        _mark(sorter, total, epochs, chosen, answered, failures)
        if sorter.turns is not None and turns is not None:
            sorter.turns.read(sorter.path, answered, turns)
        damaged += sorter.set_aside()
    return damaged, turns


def _unfinished(turns: dict[int, dict[int, dict[str, Any]]] | None, answered: bytearray) -> dict[int, list[dict[str, Any]]] | None:
    """A conversation dataset's units that no line answered, each with its requests answered in order."""
    if turns is None:
        return None
    return {key: in_order(by_number) for key, by_number in turns.items() if not answered[key]}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _read_back(wd: WorkDir, m: str, dataset: str, total: int, epochs: int, chosen: set[int] | None, answered: bytearray, failures: bytearray) -> None:
    """The units of a checkpoint just rebuilt from the final predictions (written here: whole)."""
    _mark(scan_checkpoint(wd.checkpoint_file(m, dataset, 0, 1)), total, epochs, chosen, answered, failures)


def _mark(lines: Iterable[Line], total: int, epochs: int, chosen: set[int] | None, answered: bytearray, failures: bytearray) -> None:
    """Each unit a line answered, or failed when none answered it (of this run's samples)."""
    for index, epoch, ok, _ in lines:
        if 0 <= index < total and epoch < epochs and (chosen is None or index in chosen):
            key = unit_key(index, epoch, epochs)
            if ok:
                answered[key], failures[key] = 1, 0
            elif not answered[key]:
                failures[key] = 1


def _say_damaged(wd: WorkDir, m: str, dataset: str, damaged: int, emit: ev.Sink) -> None:
    where = wd.checkpoint_file(m, dataset).name + DAMAGED
    lines = f"{damaged} checkpoint line that is" if damaged == 1 else f"{damaged} checkpoint lines that are"
    emit(ev.Notice(f"{m}/{dataset}: {lines} no complete entry of this dataset set aside (in predictions/{m}/{where} and the like); "
                   "their samples are sent again", "warning"))
