"""The worker process (scoring) as a user meets it: an error result reads as if scored here, a quit or a
signal leaves no temporary and no false warning, a child that dies at start costs no pair its
score, a retry of a pair queued in it is scored from its new answers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.workdir import StatusWriter, WorkDir
from evaltui.engine.run.runner import Runner
from evaltui.engine.run.scorer import Scorer
from evaltui.engine.score.process import WorkerProcess
from evaltui.engine.stream import events as ev
from evaltui.fsutil import atomic_write_json
from evaltui.plan import load_plan
from evaltui.sim import ModelProfile, SimConfig

ROWS = arithmetic(3)


def _score_once(tmp_path: Path, offload: bool, spoil: Any) -> tuple[dict[str, Any], list[ev.Event]]:
    """One small gsm8k pair scored by a Scorer, in the scoring process or not, after `spoil(wd)`."""
    folder = tmp_path / ("offload" if offload else "here")
    data = write_jsonl(folder / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    plan = load_plan(write_plan(folder, models=[model], datasets=[gsm_dataset("d", data)], run={"watch_interval": 0.05}))
    wd = WorkDir(folder / "out")
    wd.prepare()
    golds = [r["answer"] for r in ROWS]
    atomic_write_json(wd.predictions_file("m", "d"), {str(i): {"origin_prompt": "q", "prediction": g, "gold": g} for i, g in enumerate(golds)})
    StatusWriter(wd).write("m", "d", 0, 1, "done", total=3, completed=3, failed=0)
    spoil(wd)
    events: list[ev.Event] = []
    scorer = Scorer(plan, wd, events.append)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            if offload:
                scorer.offload = WorkerProcess(plan, wd, 1, tg, events.append)
            try:
                scorer.add([("m", "d")])
                scorer.inference_finished()
                with anyio.fail_after(60):
                    await scorer.run()
            finally:
                if scorer.offload is not None:
                    await scorer.offload.aclose()
                tg.cancel_scope.cancel()

    anyio.run(main)
    return json.loads(wd.result_file("m", "d").read_text()), events


def _fifo(wd: WorkDir) -> None:
    path = wd.predictions_file("m", "d")
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("spoil", [_fifo], ids=["predictions-a-fifo"])
def test_an_evaluator_error_reads_the_same_scored_here_or_in_the_process(tmp_path: Path, spoil: Any) -> None:
    here, events_here = _score_once(tmp_path, False, spoil)
    there, events_there = _score_once(tmp_path, True, spoil)
    assert "error" in here

    def said(events: list[ev.Event], folder: str) -> set[str]:
        return {e.error.replace(str(tmp_path / folder), "W") for e in events if isinstance(e, ev.DatasetScored)}

    assert there["error"].replace(str(tmp_path / "offload"), "W") == here["error"].replace(str(tmp_path / "here"), "W")
    assert said(events_there, "offload") == said(events_here, "here")


def _datasets_in_the_process(tmp_path: Path, sim_factory: Any, n: int) -> tuple[Any, Any]:
    """A plan of `n` gsm8k datasets of 3 samples scored in the worker process, and its server."""
    sets = [arithmetic(3, prefix=f"D{d}Q") for d in range(n)]
    sim = sim_factory(SimConfig(answer_key=key_for(*sets), default=ModelProfile(latency=0.01)))
    entries = [gsm_dataset(f"d{d}", write_jsonl(tmp_path / "data" / f"d{d}.jsonl", rows)) for d, rows in enumerate(sets)]
    plan = load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=entries, run={"work_dir": "out", "scorer_process": "always"}))
    return plan, sim


def test_a_retry_of_a_pair_queued_in_a_stopped_scoring_process(tmp_path: Path, sim_factory) -> None:
    """`r` on a pair whose scoring waits in the child: the run ends with every pair scored right
    and no temporary left, as with scorer_process = "never"."""

    n = 8
    plan, sim = _datasets_in_the_process(tmp_path, sim_factory, n)
    events: list[ev.Event] = []
    child: list[int] = []
    queued = anyio.Event()

    def sink(e: ev.Event) -> None:
        events.append(e)
        if isinstance(e, ev.Notice) and (m := re.search(r"process of its own \(pid (\d+)\)", e.message)):
            child.append(int(m.group(1)))
            os.kill(child[0], signal.SIGSTOP)  # every pair now waits in the child
        if isinstance(e, ev.DatasetScoring) and e.dataset == "d0":
            queued.set()

    runner = Runner(plan, sink=sink)

    async def main() -> tuple[int, int]:
        codes = []
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:

                async def retry_then_resume() -> None:
                    await queued.wait()
                    await anyio.sleep(0.2)
                    assert child, "d0 was sent to no scoring process"
                    tg.start_soon(lambda: _note(codes, runner.retry([("m", "d0")])))
                    await anyio.sleep(0.5)
                    os.kill(child[0], signal.SIGCONT)

                tg.start_soon(retry_then_resume)
                codes.append(await runner.run())
        runner.close()
        return codes[0], codes[-1]

    first, second = anyio.run(main)
    assert (first, second) == (0, 0)
    results = {p.name: json.loads(p.read_text()) for p in (tmp_path / "out" / "results" / "m").glob("*.json")}
    assert len(results) == n and all(r.get("accuracy") == 100.0 for r in results.values()), results
    assert not list((tmp_path / "out").rglob(".*.tmp")), "a temporary left behind"  # (results/, and the `done` files a batch left there)


async def _note(codes: list[int], awaitable: Any) -> None:
    codes.append(await awaitable)


def test_a_scoring_process_that_dies_as_it_starts_costs_no_pair_its_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child ends before it has read its plan (an interpreter that cannot import evaltui, a
    crash at start): every pair is still scored here, none gets an error result."""
    n = 300  # a plan whose pickle is larger than a pipe holds: the send of it meets the dead child
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:9/generate"}
    entries = [{**gsm_dataset(f"d{d}", data), "prompt": f"{'x' * 400} {d} {{question}}"} for d in range(n)]
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=entries, run={"watch_interval": 0.05}))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    golds = [r["answer"] for r in ROWS]
    board = StatusWriter(wd)
    for d in range(n):
        atomic_write_json(wd.predictions_file("m", f"d{d}"), {str(i): {"origin_prompt": "q", "prediction": g, "gold": g} for i, g in enumerate(golds)})
        board.write("m", f"d{d}", 0, 1, "done", total=3, completed=3, failed=0)
    dead = tmp_path / "dead-python"
    dead.write_text("#!/bin/sh\nexit 3\n")
    dead.chmod(0o755)
    monkeypatch.setattr("sys.executable", str(dead))
    events: list[ev.Event] = []
    scorer = Scorer(plan, wd, events.append)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            scorer.offload = WorkerProcess(plan, wd, 1, tg, events.append)
            try:
                scorer.add([("m", f"d{d}") for d in range(n)])
                scorer.inference_finished()
                with anyio.fail_after(120):
                    await scorer.run()
            finally:
                await scorer.offload.aclose()
                tg.cancel_scope.cancel()

    anyio.run(main)
    errors = {e.dataset: e.error for e in events if isinstance(e, ev.DatasetScored) and e.error}
    assert errors == {}
    assert len([e for e in events if isinstance(e, ev.DatasetScored)]) == n


def test_a_run_stopped_while_pairs_wait_in_the_scoring_process_leaves_no_temporary(tmp_path: Path, sim_factory) -> None:
    """A quit (`q`, Ctrl-C, SIGTERM: Runner.cancel) while pairs are queued in the child: the run
    ends, and results/ holds no `.tmp` of a pair nobody will put in place, as with "never"."""

    n = 60
    sets = [arithmetic(3, prefix=f"D{d}Q") for d in range(n)]
    sim = sim_factory(SimConfig(answer_key=key_for(*sets)))
    entries = [gsm_dataset(f"d{d}", write_jsonl(tmp_path / "data" / f"d{d}.jsonl", rows)) for d, rows in enumerate(sets)]
    path = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=entries, run={"work_dir": "out", "scorer_process": "always"})
    assert run_plan(path)[0] == 0
    results = tmp_path / "out" / "results"
    for result in results.rglob("*.json"):
        result.unlink()  # every pair inferred, none scored: all of them sent to the child at once
    child: list[int] = []
    sent = 0

    def sink(e: ev.Event) -> None:
        nonlocal sent
        if isinstance(e, ev.Notice) and (m := re.search(r"process of its own \(pid (\d+)\)", e.message)):
            child.append(int(m.group(1)))
            os.kill(child[0], signal.SIGSTOP)  # they all wait in it
        sent += isinstance(e, ev.DatasetScoring)

    runner = Runner(load_plan(path), sink=sink)

    async def main() -> int:
        async with anyio.create_task_group() as tg:

            async def quit_once_all_are_sent() -> None:
                while not child or sent < n:
                    await anyio.sleep(0.01)
                await anyio.sleep(0.3)
                threading.Timer(0.5, os.kill, (child[0], signal.SIGCONT)).start()  # it goes on as the run ends
                runner.cancel()

            tg.start_soon(quit_once_all_are_sent)
            with anyio.fail_after(60):
                return await runner.run()

    code = anyio.run(main)
    runner.close()
    assert code != 0 and child
    assert not Path(f"/proc/{child[0]}").exists() or "State:\tZ" in Path(f"/proc/{child[0]}/status").read_text()
    left = list(results.rglob(".*.tmp"))
    assert left == [], f"{len(left)} temporaries left in results/"


def test_a_sigterm_that_reaches_the_scoring_process_is_its_parents_to_act_on(tmp_path: Path, sim_factory) -> None:
    """`kill -- -PGID` (a terminal, a job control tool) reaches the child too, as Ctrl-C does:
    the run decides (here it was not itself signalled, so it goes on), and the child neither
    dies mid-pair (a `.tmp` left, a 'worker process stopped' warning as the run quits) nor
    is lost to the run."""

    n = 30
    plan, sim = _datasets_in_the_process(tmp_path, sim_factory, n)
    events: list[ev.Event] = []
    child: list[int] = []

    def sink(e: ev.Event) -> None:
        events.append(e)
        if isinstance(e, ev.Notice) and (m := re.search(r"process of its own \(pid (\d+)\)", e.message)):
            child.append(int(m.group(1)))
        if isinstance(e, ev.DatasetScored) and len(child) == 1:  # it is at work
            os.kill(child.pop(), signal.SIGTERM)

    runner = Runner(plan, sink=sink)

    async def main() -> int:
        with anyio.fail_after(60):
            return await runner.run()

    assert anyio.run(main) == 0
    runner.close()
    assert [e.message for e in events if isinstance(e, ev.Notice) and e.level == "warning"] == []


def test_the_scoring_process_is_not_given_the_plans_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's `api_key_env` need not end in _KEY: the child, which asks no model anything, is
    not given it either (plan.key_variables, as Ray's workers are not)."""
    monkeypatch.setenv("GATEWAY_AUTH", "s3cret")
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    model = {"abbr": "m", "type": "openai-chat", "url": "http://127.0.0.1:9/v1", "model": "x", "api_key_env": "GATEWAY_AUTH"}
    plan = load_plan(write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", data)]))
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    said: list[ev.Event] = []
    environ: list[bytes] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            process = WorkerProcess(plan, wd, 1, tg, said.append)
            with contextlib.suppress(Exception):  # no predictions: an error result, but it started
                await process.score(("m", "d"), [], lambda tmp, path: None)
            pid = next(int(m.group(1)) for e in said if isinstance(e, ev.Notice) and (m := re.search(r"pid (\d+)", e.message)))
            environ.append(Path(f"/proc/{pid}/environ").read_bytes())
            await process.aclose()
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert b"GATEWAY_AUTH" not in environ[0]


def test_a_worker_stopped_as_it_makes_a_batchs_files_leaves_no_temporary(tmp_path: Path) -> None:
    """SIGUSR1 (its parent stopping it: _stop raises SystemExit) as a dataset's status is being
    made, its predictions already left under a temporary name: neither goes into a reply, and
    none is left in the work dir."""
    import functools

    from evaltui.engine import worker
    from evaltui.engine.disk.predictions import DoneFiles, merge_checkpoints

    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    checkpoint = tmp_path / "ck.jsonl"
    checkpoint.write_bytes(b"")

    class Stopped(StatusWriter):
        def write(self, *args: Any, **fields: Any) -> bool:
            raise SystemExit(0)

    out = wd.predictions_file("m", "d")
    done = DoneFiles(functools.partial(merge_checkpoints, [checkpoint], 0, out), ("m", "d", 0, 1, "done"), {"total": 0, "completed": 0, "failed": 0})
    with pytest.raises(SystemExit):
        worker._make_files(Stopped(wd), 1, (done, done))
    assert not list((tmp_path / "out").rglob(".*.tmp")) and not out.exists()
