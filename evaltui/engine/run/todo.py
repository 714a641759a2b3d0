"""The (sample, epoch) units a dataset has left, in the order they are sent.

Sample by sample in index order (a sample's epochs one after the other), each with its record
read from the data file as workers take them: a dataset's records are never all in memory.
Units that failed in an earlier run go last, after every unit never tried: a dataset that
stops early once its failures exceed fail_on_error (permanent ones, a prompt too long) would
otherwise stop again at the same samples on every re-run, and never get further.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from typing import Any

from evaltui.datasets import DatasetError
from evaltui.engine.disk.units import sample_keys, unit_of
from evaltui.engine.run.runs import DatasetRun, Job

Records = Iterator[dict[str, Any] | None]
Reopen = Callable[[Container[int]], Records]  # the records again, None for the samples in the container


def todo(run: DatasetRun, records: Records, reopen: Reopen) -> Iterator[Job]:
    """Every unit not in `run.done`: the never-tried ones from `records`, then those that failed
    before from the file opened again (`reopen`) — only if any did."""
    retry = run.failed_before
    yield from _units(run, records, failed_before=False)
    if not retry:
        return
    samples = {unit_of(key, run.epochs)[0] for key in retry}  # within the selection: planning kept no other
    try:
        again = reopen(_Except(samples))
    except (DatasetError, OSError) as e:
        again = _failing(str(e))
    yield from _units(run, again, failed_before=True)


def _units(run: DatasetRun, records: Records, *, failed_before: bool) -> Iterator[Job]:
    """The units not done that failed before (or, `failed_before` false, that did not), with
    their records; a record that cannot be read (the file changed since the plan was checked)
    makes its units fail with the reason, and those after it too. (The flags are read as bytes:
    a resume walks every unit, done or not, before its first request.)"""
    problem = ""
    done, failed, want, epochs = run.done.flags, run.failed_before.flags, int(failed_before), run.epochs
    at = 0  # the index of the record `records` gives next
    for s in run.shards:
        for i in s.indices:
            record: dict[str, Any] | str | None = problem
            if not problem:
                try:
                    while at < i:  # a sample not selected (its record skipped, not read)
                        next(records)
                        at += 1
                    record = next(records)  # None for a sample skipped when the file was opened (not read)
                    at += 1
                except StopIteration:
                    problem = record = f"{run.cfg.path} now has only {at} records, expected {run.records}"
                except DatasetError as e:
                    problem = record = str(e)
            units = [epoch for epoch, key in enumerate(sample_keys(i, epochs)) if not done[key] and failed[key] == want]
            if units and run.tokens is not None:
                run.tokens.expect(i, len(units))
            for epoch in units:
                assert record is not None
                yield s, i, epoch, record


def first_pass_skip(run: DatasetRun) -> Container[int]:
    """The samples whose records the first pass does not read: every epoch done or failed
    before, or not selected."""
    settled = run.done.whole_samples(run.epochs, run.failed_before)
    if run.selection is None:
        return settled
    return _Except({i for i in run.selection if i not in settled})


class _Except:
    """Every index but these."""

    def __init__(self, kept: set[int]):
        self.kept = kept

    def __contains__(self, index: object) -> bool:
        return index not in self.kept


def _failing(why: str) -> Records:
    raise DatasetError(why)
    yield  # a generator: the error comes when its first record is asked for
