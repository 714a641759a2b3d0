"""Planning looks for a pair's earlier files in the listing of the work dir's folders, not one by
one (issue 23): 10,000 fresh datasets cost ~500 us each to plan, most of it spent asking the
file system for results, predictions and statuses that the listing already said were not there.
What planning decides is the same either way."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, run_plan, write_jsonl, write_plan

from evaltui.datasets import count_records
from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.resume import plan_pairs
from evaltui.engine.stream import events as ev
from evaltui.plan import Plan, load_plan


def _plan(tmp_path: Path, n: int) -> Plan:
    datasets = [gsm_dataset(f"d{d}", write_jsonl(tmp_path / "data" / f"d{d}.jsonl", arithmetic(3, prefix=f"D{d}Q"))) for d in range(n)]
    models = [{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=1.0&latency=0.001", "max_workers": 4}]
    return load_plan(write_plan(tmp_path, models=models, datasets=datasets))


def _missed(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """The files under `root` that a lookup (open, stat, unlink) found missing, from now on;
    not the temporaries of atomic writes (the first in a folder not made yet fails once)."""
    missed: list[str] = []

    def counted(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return real(path, *args, **kwargs)
            except FileNotFoundError:
                text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ""
                if text.startswith(str(root)) and not os.path.basename(text).endswith(".tmp"):
                    missed.append(text)
                raise

        return call

    for name in ("open", "stat", "lstat", "unlink"):
        monkeypatch.setattr(os, name, counted(getattr(os, name)))
    return missed


def _planned(plan: Plan, wd: WorkDir) -> tuple[list[Any], list[ev.Event]]:
    wd.prepare()
    events: list[ev.Event] = []
    totals = {d.abbr: count_records(plan, d) for d in plan.datasets}
    runs = plan_pairs(plan, plan.models[0], wd, StatusWriter(wd), totals, plan.datasets, events.append)
    return runs, events


def test_planning_a_fresh_work_dir_looks_for_none_of_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pair planned: its `pending` status written with its version (SPEC §6), its run handed
    over with all of its samples left; and no file of it looked for one by one."""
    plan = _plan(tmp_path, 5)
    wd = WorkDir(plan.default_work_dir())
    missed = _missed(monkeypatch, wd.root)
    runs, events = _planned(plan, wd)
    assert missed == []
    assert [r.cfg.abbr for r in runs] == [f"d{d}" for d in range(5)]
    assert all(r.remaining == 3 and len(r.done) == 0 and r.urls == ("sim://?accuracy=1.0&latency=0.001",) for r in runs)
    for d in range(5):
        status = json.loads(wd.status_file("m", f"d{d}").read_text())
        assert status["status"] == "pending" and status["total"] == 3 and status["completed"] == 0 and status["version"] == runs[d].version
    assert [(e.dataset, e.status) for e in events if isinstance(e, ev.DatasetPlanned)] == [(f"d{d}", ev.PairStatus.PENDING) for d in range(5)]


def test_a_pair_an_earlier_run_finished_is_kept_beside_one_it_never_began(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier run of d0 and d1 scored both; d1's results are deleted, and d2 is new: d0 is
    kept whole as it was scored, d1 is kept without being run again (its predictions are
    complete: scored again), and only d2 is run — without its files being looked for."""
    plan = _plan(tmp_path, 2)
    code, _, _ = run_plan(plan)
    assert code == 0
    wd = WorkDir(plan.default_work_dir())
    wd.result_file("m", "d1").unlink()
    plan = _plan(tmp_path, 3)
    missed = _missed(monkeypatch, wd.root)
    runs, events = _planned(plan, wd)
    assert [r.cfg.abbr for r in runs] == ["d2"]
    planned = {e.dataset: e for e in events if isinstance(e, ev.DatasetPlanned)}
    assert planned["d0"].status == ev.PairStatus.SCORED and planned["d0"].score == 100.0
    assert planned["d1"].status == ev.PairStatus.DONE and planned["d1"].completed == 3
    assert planned["d2"].status == ev.PairStatus.PENDING
    assert not any("d2" in path for path in missed), missed
