"""Before a run counts its datasets: the benchmarks' files, downloaded from the Hub when its cache lacks them.

Done here rather than when the plan loads so that the download is part of the run both front
ends show: each reports its bytes as Notice events (at most one a second), which the headless
lines, the log and the interactive session all say. A benchmark's data are then checked as a
plain dataset's are when its plan loads.
"""

from __future__ import annotations

from functools import partial

import anyio
import anyio.lowlevel

from evaltui.datasets import check_dataset
from evaltui.engine.stream import events as ev
from evaltui.plan import DatasetConfig, Plan


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


async def fetch_benchmarks(plan: Plan, emit: ev.Sink) -> bool:
    """Every benchmark dataset's data at hand and checked; False after saying what is wrong."""
    ok = True
    for ds in plan.datasets:
        if ds.benchmark and not await _fetch(plan, ds, emit):
            ok = False
    return ok


async def _fetch(plan: Plan, ds: DatasetConfig, emit: ev.Sink) -> bool:
    from evaltui.benchmarks import DataUnavailable, fetch, lookup

    repo = lookup(ds.benchmark or "").hub.repo
    loop = anyio.lowlevel.current_token()  # the download reports from huggingface_hub's own threads

    def progress(done: int, total: int) -> None:
        verb = "downloaded" if done >= total else "downloading"
        anyio.from_thread.run_sync(emit, ev.Notice(f"{ds.abbr}: {verb} {repo} from the Hub: {_size(done)} of {_size(total)}"), token=loop)

    try:
        await anyio.to_thread.run_sync(partial(fetch, ds, plan.base_dir, progress))
    except DataUnavailable as e:
        emit(ev.Notice(f"{ds.abbr}: {e}", "error"))
        return False
    problems = await anyio.to_thread.run_sync(check_dataset, plan, ds)
    for p in problems:
        emit(ev.Notice(f"{ds.abbr}: {p}", "error"))
    return not problems
