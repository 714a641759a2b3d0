"""The worker process (`[run] scorer_process`): small light pairs scored (and datasets planned) in a
child process of their own give the same files as in the run's process; a pair retried while it is
scored there is never put in place; a child that dies or is killed loses no score (the run
scores the rest itself); and the child never outlives its run, even a `kill -9`-ed one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.run.runner import Runner
from evaltui.engine.run.scorer import PROCESS_PAIRS, wants_process
from evaltui.engine.score.gate import ScoreGate, StaleResult
from evaltui.engine.score.process import LOG_NAME, WorkerProcess
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig

PID = re.compile(r"in a process of its own \(pid (\d+)\)")


def _plan(tmp_path: Path, sim_url: str, datasets: int, choice: str, name: str = "plan.toml", per: int = 3, **model: Any) -> Path:
    entries = []
    for d in range(datasets):
        rows = arithmetic(per, prefix=f"D{d}Q")
        entries.append(gsm_dataset(f"d{d}", write_jsonl(tmp_path / "data" / f"d{d}.jsonl", rows)))
    if datasets > 1:  # one dataset of another light evaluator
        entries[1]["evaluator"] = {"type": "exact"}
    return write_plan(
        tmp_path, models=[lightllm("m", sim_url, **model)], datasets=entries, name=name,
        run={"work_dir": f"out-{choice}", "scorer_process": choice},
    )


def _key(datasets: int, per: int = 3) -> Any:
    return key_for(*[arithmetic(per, prefix=f"D{d}Q") for d in range(datasets)])


def _results(work_dir: Path) -> dict[str, Any]:
    return {p.name: json.loads(p.read_text()) for p in sorted((work_dir / "results" / "m").glob("*.json"))}


def _pids(events: list[ev.Event]) -> list[int]:
    return [int(m.group(1)) for e in of_type(events, ev.Notice) if (m := PID.search(e.message))]


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for init to reap it."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


def _requests_sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every request sent to a worker process from now on (its kind first), as it is sent."""
    requests: list[tuple[Any, ...]] = []
    call = WorkerProcess._call

    async def counted(self, request):  # type: ignore[no-untyped-def]
        requests.append(request)
        return await call(self, request)

    monkeypatch.setattr(WorkerProcess, "_call", counted)
    return requests


def test_the_scoring_process_writes_the_results_the_run_itself_would(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from evaltui.engine.run import ending

    # The datasets end together (a batch: ending.py) and are scored in one request (score_many).
    monkeypatch.setattr(ending, "BATCH_WAIT", 3600.0)
    requests = _requests_sent(monkeypatch)
    sim = sim_factory(SimConfig(answer_key=_key(6), models={"m": ModelProfile(accuracy=0.5)}))
    scored = {}
    for choice in ("always", "never"):
        code, events, _ = run_plan(_plan(tmp_path, sim.url, 6, choice, name=f"{choice}.toml"))
        assert code == 0
        scored[choice] = _results(tmp_path / f"out-{choice}")
        pids = _pids(events)
        if choice == "always":
            assert len(pids) == 1 and (tmp_path / f"out-{choice}" / "logs" / LOG_NAME).is_file()
            assert not _alive(pids[0]), "the worker process outlived its run"
        else:
            assert pids == []
        assert len(of_type(events, ev.DatasetScored)) == 6
    assert len(scored["always"]) == 6
    assert scored["always"] == scored["never"]
    assert [(r[0], len(r[1])) for r in requests] == [("score_many", 6)]  # one request for the six
    assert 0 < scored["always"]["d0.json"]["accuracy"] < 100  # a real mix of right and wrong answers was judged


def test_the_done_files_made_in_the_worker_process_are_those_made_here(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A batch of small datasets' `done` files (ending.py) made in the worker process under
    temporary names and put in place here: the same predictions and status files as a run that
    makes them itself, and no temporary left."""
    requests = _requests_sent(monkeypatch)
    sim = sim_factory(SimConfig(answer_key=_key(40), models={"m": ModelProfile(accuracy=0.5, latency=0.005)}))
    files = {}
    for choice in ("always", "never"):
        code, events, _ = run_plan(_plan(tmp_path, sim.url, 40, choice, name=f"{choice}.toml", max_workers=4))
        assert code == 0 and len(of_type(events, ev.DatasetScored)) == 40
        out = tmp_path / f"out-{choice}"
        files[choice] = {
            p.relative_to(out).as_posix(): re.sub(r'"updated_at": "[^"]*"', "", p.read_text())
            for folder in ("predictions", "infer_status") for p in sorted((out / folder).rglob("*.json"))
        }
        assert not list(out.rglob(".*.tmp")), "a temporary left behind"
    assert "files" in [r[0] for r in requests]  # the batches went to the worker process
    assert len(files["always"]) == 80 and files["always"] == files["never"]


def test_a_batch_the_worker_process_is_late_with_is_written_here_and_its_late_files_never_put_in_place(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Given up on at once (ELSEWHERE_WAIT 0: a worker stopped, or busy planning), a batch's
    `done` files are written here, and the pool's later batches too: one request only, every pair
    scored right, no temporary left. (What a stopped worker makes once it goes on is removed as its
    reply comes: tests/test_worker_process_faults.py::test_a_retry_of_a_pair_queued_in_a_stopped_scoring_process.)"""
    from evaltui.engine.run import ending

    monkeypatch.setattr(ending, "ELSEWHERE_WAIT", 0.0)
    requests = _requests_sent(monkeypatch)
    sim = sim_factory(SimConfig(answer_key=_key(30), default=ModelProfile(latency=0.005)))
    code, events, _ = run_plan(_plan(tmp_path, sim.url, 30, "always", max_workers=4))
    assert code == 0
    out = tmp_path / "out-always"
    assert [r[0] for r in requests].count("files") == 1
    assert all(r.get("accuracy") == 100.0 for r in _results(out).values()) and len(_results(out)) == 30
    assert not list(out.rglob(".*.tmp")), "a temporary left behind"


def test_a_scoring_process_killed_mid_run_loses_no_score(tmp_path: Path, sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=_key(30), default=ModelProfile(latency=0.01)))
    killed: list[int] = []

    def kill_it(e: ev.Event) -> None:
        if isinstance(e, ev.Notice) and (m := PID.search(e.message)) and not killed:
            killed.append(int(m.group(1)))
            os.kill(killed[0], signal.SIGKILL)

    events: list[ev.Event] = []
    runner = Runner(load_plan(_plan(tmp_path, sim.url, 30, "always")), sink=lambda e: (events.append(e), kill_it(e)))

    async def run() -> int:
        with anyio.fail_after(120):
            return await runner.run()

    code = anyio.run(run)
    assert code == 0 and killed
    warnings = [e.message for e in of_type(events, ev.Notice) if e.level == "warning"]
    assert any("the worker process stopped" in w and LOG_NAME in w for w in warnings), warnings
    results = _results(tmp_path / "out-always")
    assert len(results) == 30 and all(r.get("accuracy") == 100.0 for r in results.values())
    assert not list((tmp_path / "out-always" / "results" / "m").glob(".*.tmp")), "a temporary left behind"


def test_a_pair_retried_while_the_process_scores_it_is_not_put_in_place(tmp_path: Path, sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=_key(2)))
    plan_path = _plan(tmp_path, sim.url, 2, "never")
    assert run_plan(plan_path)[0] == 0
    plan, workdir = load_plan(plan_path), WorkDir(tmp_path / "out-never")
    result = workdir.result_file("m", "d0")
    scored_here = result.read_bytes()
    result.unlink()
    statuses = [workdir.read_status("m", "d0", 0, 1)]

    async def main() -> None:
        gate = ScoreGate()
        async with anyio.create_task_group() as tg:
            process = WorkerProcess(plan, workdir, 1, tg, lambda e: None)
            try:
                token = gate.token(("m", "d0"))
                gate.invalidate(("m", "d0"))  # a retry began while it was scored
                with pytest.raises(StaleResult):
                    await process.score(("m", "d0"), statuses, gate.replacer(("m", "d0"), token))
                assert not result.exists()
                scored = await process.score(("m", "d0"), statuses, gate.replacer(("m", "d0"), gate.token(("m", "d0"))))
                assert scored is not None and scored.metrics["accuracy"] == 100.0
            finally:
                await process.aclose()
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert result.read_bytes() == scored_here
    assert not list(result.parent.glob(".*.tmp")), "the stale result's temporary was left behind"

    # Pairs scored in one request (score_many): the stale one is not put in place, the other is.
    other = workdir.result_file("m", "d1")
    other_here = other.read_bytes()
    result.unlink()
    other.unlink()
    both = [(("m", d), [workdir.read_status("m", d, 0, 1)]) for d in ("d0", "d1")]

    async def many() -> list[Any] | None:
        gate = ScoreGate()
        async with anyio.create_task_group() as tg:
            process = WorkerProcess(plan, workdir, 1, tg, lambda e: None)
            try:
                tokens = [gate.token(pair) for pair, _ in both]
                gate.invalidate(("m", "d0"))  # a retry of d0 began while they were scored
                return await process.score_many([(pair, st, gate.replacer(pair, token)) for (pair, st), token in zip(both, tokens, strict=True)])
            finally:
                await process.aclose()
                tg.cancel_scope.cancel()

    outcomes = anyio.run(many)
    assert outcomes is not None and isinstance(outcomes[0], StaleResult) and outcomes[1].metrics["accuracy"] == 100.0
    assert not result.exists() and other.read_bytes() == other_here
    assert not list(result.parent.glob(".*.tmp")), "the stale result's temporary was left behind"


def test_a_pair_forgotten_after_its_scan_put_it_in_a_batch_is_passed_by(tmp_path: Path, sim_factory) -> None:
    """A retry of a pair (forget) in the turn between the scan that put it in a batch and the
    batch's start: the batch scores the other pairs and passes it by (no error, nothing written
    for it, nothing said), as a pair forgotten before its own scoring began."""
    from evaltui.engine.run.scorer import Scorer

    sim = sim_factory(SimConfig(answer_key=_key(3)))
    plan_path = _plan(tmp_path, sim.url, 3, "never")
    assert run_plan(plan_path)[0] == 0
    plan, workdir = load_plan(plan_path), WorkDir(tmp_path / "out-never")
    for d in ("d0", "d1", "d2"):
        workdir.result_file("m", d).unlink()
    events: list[ev.Event] = []

    async def main() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                process = WorkerProcess(plan, workdir, 1, tg, lambda e: None)
                try:
                    await process.start()
                    while not process.ready:
                        await anyio.sleep(0.01)
                    scorer = Scorer(plan, workdir, events.append, inferring=lambda: True)
                    scorer.offload = process
                    async with anyio.create_task_group() as scoring:
                        scorer.add([("m", d) for d in ("d0", "d1", "d2")])
                        scorer._scan(scoring, 0.0, 1e9)  # the three go to one batch, not started yet
                        scorer.forget(("m", "d1"))  # a retry of d1 began in the same turn
                finally:
                    await process.aclose()
                    tg.cancel_scope.cancel()

    anyio.run(main)
    assert sorted(e.dataset for e in of_type(events, ev.DatasetScored)) == ["d0", "d2"]
    assert workdir.read_result("m", "d0")["accuracy"] == 100.0 and not workdir.result_file("m", "d1").exists()


def test_the_scoring_process_ends_with_a_killed_run(tmp_path: Path, sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=_key(40), default=ModelProfile(latency=0.05)))
    plan = _plan(tmp_path, sim.url, 40, "always", max_workers=2)
    proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    child = None
    deadline = time.monotonic() + 60
    for line in proc.stdout:  # bounded by the run itself and the deadline
        if (m := PID.search(line)) or time.monotonic() > deadline:
            child = int(m.group(1)) if m else None
            break
    assert child is not None and _alive(child)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    end = time.monotonic() + 15
    while time.monotonic() < end and _alive(child):
        time.sleep(0.02)
    assert not _alive(child), "the worker process outlived the evaltui that started it"


def test_auto_starts_the_process_for_a_plan_of_many_small_light_pairs(tmp_path: Path) -> None:
    def plan_of(datasets: int, choice: str = "auto", evaluator: str = "gsm8k") -> Any:
        path = write_jsonl(tmp_path / "data" / "d.jsonl", arithmetic(2))
        entries = [{**gsm_dataset(f"d{d}", path), "evaluator": {"type": evaluator}} for d in range(datasets)]
        return load_plan(write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=entries, run={"scorer_process": choice}))

    assert wants_process(plan_of(PROCESS_PAIRS))
    assert not wants_process(plan_of(PROCESS_PAIRS - 1))
    assert not wants_process(plan_of(PROCESS_PAIRS, "never"))
    assert wants_process(plan_of(1, "always"))
    assert not wants_process(plan_of(PROCESS_PAIRS, evaluator="code_exec"))  # not a light evaluator


def test_a_run_stopped_with_pairs_queued_in_the_process_leaves_no_file_and_a_rerun_scores_them(tmp_path: Path, sim_factory) -> None:
    sim = sim_factory(SimConfig(answer_key=_key(20)))
    plan = load_plan(_plan(tmp_path, sim.url, 20, "always"))
    child: list[int] = []
    inferred: list[str] = []

    def sink(e: ev.Event) -> None:
        if isinstance(e, ev.Notice) and (m := PID.search(e.message)) and not child:
            child.append(int(m.group(1)))
            os.kill(child[0], signal.SIGSTOP)  # the pairs sent to it queue up, unscored
        if isinstance(e, ev.DatasetInferred):
            inferred.append(e.dataset)
            if len(inferred) == 20:
                runner.cancel()  # Ctrl-C with every pair waiting on the worker process
                threading.Timer(0.3, os.kill, (child[0], signal.SIGCONT)).start()

    runner = Runner(plan, sink=sink)

    async def main() -> int:
        with anyio.fail_after(60):
            return await runner.run()

    assert anyio.run(main) == 130 and child
    results = tmp_path / "out-always" / "results" / "m"
    assert not list(results.glob(".*.tmp")), "a stopped run left a temporary behind"
    assert len(list(results.glob("*.json"))) < 20  # the stop came before they were all scored
    assert not _alive(child[0])
    sim.reset_stats()
    code, _, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0  # every answer was kept
    assert len(_results(tmp_path / "out-always")) == 20


def test_datasets_planned_in_the_worker_are_planned_as_here(tmp_path: Path, sim_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Resume planning in the worker process: the same runs, events, pending pairs and files as
    planning in this process, on two copies of one work dir (a dataset changed since, whose work
    is set aside; a result deleted, whose pair awaits scoring again; one untouched). Its reply is
    read as made for the run (heap.made_for_the_run: frozen, no collection walks it)."""
    import shutil

    from evaltui.engine.score import process as process_module

    kinds: list[bool] = []  # what each reply read was said to be: lasting (a chunk planned) or not
    made_for_the_run = process_module.made_for_the_run

    def seen(load, *, lasting: Any):  # type: ignore[no-untyped-def]
        def told(made: Any) -> bool:
            said: bool = lasting(made)
            kinds.append(said)
            return said

        return made_for_the_run(load, lasting=told)

    monkeypatch.setattr(process_module, "made_for_the_run", seen)

    from evaltui.engine.disk.workdir import StatusWriter
    from evaltui.engine.run.resume import plan_pairs

    sim = sim_factory(SimConfig(answer_key=_key(3)))
    plan_path = _plan(tmp_path, sim.url, 3, "never")
    assert run_plan(plan_path)[0] == 0
    write_jsonl(tmp_path / "data" / "d2.jsonl", arithmetic(4, prefix="D2Q"))  # changed: its answers are stale
    (tmp_path / "out-never" / "results" / "m" / "d1.json").unlink()
    plan = load_plan(plan_path)
    totals = {"d0": 3, "d1": 3, "d2": 4}
    here, there = tmp_path / "here", tmp_path / "there"
    shutil.copytree(tmp_path / "out-never", here)
    shutil.copytree(tmp_path / "out-never", there)
    events_here: list[ev.Event] = []
    runs_here = plan_pairs(plan, plan.models[0], WorkDir(here), StatusWriter(WorkDir(here)), totals, plan.datasets, events_here.append)

    async def main() -> Any:
        async with anyio.create_task_group() as tg:
            process = WorkerProcess(plan, WorkDir(there), 1, tg, lambda e: None)
            try:
                return await process.plan_chunk("m", plan.datasets, totals)
            finally:
                await process.aclose()
                tg.cancel_scope.cancel()

    planned = anyio.run(main)
    assert planned is not None
    assert True in kinds  # the chunk planned: made for the run

    def described(runs: list[Any], root: Path) -> list[Any]:
        return [
            (r.cfg.abbr, r.total, r.version, r.remaining, [(s.shard, s.completed, str(s.checkpoint.path.relative_to(root))) for s in r.shards])
            for r in runs
        ]

    assert described(planned.runs, there) == described(runs_here, here)
    assert [r.cfg.abbr for r in planned.runs] == ["d2"]  # d0 and d1 kept whole (d1 to be scored again), d2 run again
    assert all(r.cfg is plan.dataset(r.cfg.abbr) for r in planned.runs)  # this process's own configs
    assert [type(e).__name__ for e in planned.events] == [type(e).__name__ for e in events_here]
    assert planned.pending == [("m", "d1"), ("m", "d2")]

    def files(root: Path) -> dict[str, Any]:
        out = {}
        for p in sorted(root.rglob("*")):
            if p.is_file() and "logs" not in p.parts:
                rel = re.sub(r"\d{8}-\d{6}(-\d+)?", "<time>", str(p.relative_to(root)))
                text = p.read_text(errors="replace")
                out[rel] = re.sub(r'"updated_at": "[^"]*"', "", text) if "infer_status" in rel else text
        return out

    assert files(there) == files(here)
    assert any("superseded" in name for name in files(there))  # d2's stale work set aside, in the worker too


def test_a_frame_sends_datasets_by_abbr_and_the_receiver_links_its_own(tmp_path: Path) -> None:
    """A reply of planned runs names each dataset (a few bytes) and the engine links its own
    DatasetConfig: 10,000 copies would each be unpickled and compared for nothing."""
    import io
    import pickle

    from evaltui.engine.score.frames import HEADER, PlanLinks, frame

    plan = load_plan(_plan(tmp_path, "http://127.0.0.1:9", 3, "auto"))
    sent = load_plan(_plan(tmp_path, "http://127.0.0.1:9", 3, "auto", name="again.toml"))  # the worker's copy of the same plan
    reply = (7, None, {"runs": [sent.datasets[2], sent.datasets[0]], "also": [sent.datasets[2]]}, None)
    body = frame(reply, by_abbr=True)[HEADER.size :]
    assert sent.datasets[2].prompt not in body.decode("latin-1")  # not the dataset's fields: its abbr
    got = PlanLinks(io.BytesIO(body), plan).load()
    assert got[2]["runs"][0] is plan.datasets[2] and got[2]["runs"][1] is plan.datasets[0] and got[2]["also"][0] is plan.datasets[2]
    with pytest.raises(pickle.UnpicklingError):  # outside PlanLinks there is no plan to link to
        pickle.loads(body)
    whole = pickle.loads(frame(reply)[HEADER.size :])  # without by_abbr: copies, as the plan itself goes
    assert whole[2]["runs"][0] == plan.datasets[2] and whole[2]["runs"][0] is not plan.datasets[2]


class _Registered:
    """A type a user's evaluator module gives copyreg a reducer for, after evaltui was imported."""

    def __init__(self, value: int) -> None:
        self.value = value


def _rebuilt(value: int) -> _Registered:
    return _Registered(value * 10)


def test_a_frame_by_abbr_honours_a_reducer_registered_after_import(tmp_path: Path) -> None:
    import copyreg
    import io

    from evaltui.engine.score.frames import HEADER, PlanLinks, frame

    copyreg.pickle(_Registered, lambda r: (_rebuilt, (r.value,)))
    try:
        plan = load_plan(_plan(tmp_path, "http://127.0.0.1:9", 1, "auto"))
        got = PlanLinks(io.BytesIO(frame((1, None, _Registered(4), None), by_abbr=True)[HEADER.size :]), plan).load()
        assert isinstance(got[2], _Registered) and got[2].value == 40  # through the reducer
    finally:
        copyreg.dispatch_table.pop(_Registered, None)
