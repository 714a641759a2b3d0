"""The seam while a run is live: retry joining it, retry after it, scoring fenced off, planning off the loop.

All on real runs against the simulated server (in-process, or the bundled sim:// subprocess).
Waits are bounded; nothing here asserts a duration.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import failures_of
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, of_type, write_jsonl, write_plan

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.plan import load_plan
from evaltui.sim import Faults, ModelProfile, SimConfig


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.01)


async def run_and_retry(
    runner: Runner, pair: tuple[str, str], before: Callable[[], Any], after: Callable[[], Any], *, limit: float = 90
) -> dict[str, int]:
    """Run the plan; once `before` returns, retry `pair` beside the run; then `after`.
    The exit codes of the run and of the retry, by name."""
    codes: dict[str, int] = {}

    async def run() -> None:
        codes["run"] = await runner.run()

    async def retry() -> None:
        codes["retry"] = await runner.retry([pair])

    with anyio.fail_after(limit):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await before()
            tg.start_soon(retry)
            await after()
    return codes


async def live(body: Callable[[], Any]) -> None:
    await body()


def long_prompts(rows: list[dict[str, Any]]) -> set[str]:
    return {r["question"] for r in rows if len(r["question"]) > 20}


def test_retry_while_running_joins_the_run_and_reruns_only_the_failed_samples(tmp_path: Path, sim_factory) -> None:
    rows, slow_rows = arithmetic(40), arithmetic(200, prefix="S")
    # "slow" keeps the run going (0.2 s a request, 2 at a time) until the test lets it finish
    sim = sim_factory(SimConfig(answer_key=key_for(rows, slow_rows), faults=Faults(max_prompt_chars=20), models={"slow": ModelProfile(latency=0.2)}))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url), lightllm("slow", sim.url, max_workers=2)],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows)), gsm_dataset("s", write_jsonl(tmp_path / "s.jsonl", slow_rows))],
        run={"max_num_workers": 2},
    )
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    outcome: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(90):
            await live(tg_body)

    async def tg_body() -> None:
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                outcome["run"] = await runner.run()

            tg.start_soon(run)
            await until(lambda: runner.state.pairs.get(("m", "d")) is not None and runner.state.pairs[("m", "d")].status == PairStatus.FAIL, "m/d failed")
            assert runner.state.finished is None  # the run is still going
            assert ("m", "d") in runner.failed_pairs()
            failed_before = len(failures_of(runner.state, "m", "d"))
            assert failed_before == len(long_prompts(rows))
            sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))  # the server is fixed
            sim.reset_stats()

            async def retry() -> None:
                outcome["retry"] = await runner.retry([("m", "d")])

            tg.start_soon(retry)
            await until(lambda: runner.state.pairs[("m", "d")].status == PairStatus.SCORED, "m/d scored")
            outcome["sent"] = [r.prompt for r in sim.stats.log if r.model == "m"]
            outcome["state"] = (runner.state.pairs[("m", "d")].failed, failures_of(runner.state, "m", "d"), runner.state.finished)
            sim.call(lambda s: s.config.models.__setitem__("slow", ModelProfile(latency=0.0)))  # let the run end

    anyio.run(main)
    # Only the failed samples of d went out again (m also runs s, whose prompts start with "S").
    assert sorted(p for p in outcome["sent"] if p.startswith("Q")) == sorted(long_prompts(rows))
    failed, failures, finished = outcome["state"]
    assert failed == 0 and failures == [] and finished is None  # scored while the run still ran
    assert runner.state.pairs[("m", "d")].score == 100.0
    # The retry joined the live run: one run, one RunFinished, its exit code for both callers.
    assert len(of_type(events, ev.RunFinished)) == 1 and len(of_type(events, ev.RetryStarted)) == 1
    assert outcome["run"] == outcome["retry"]
    assert ("m", "d") not in runner.failed_pairs()
    assert runner.workdir.read_status("m", "d")["status"] == "done"
    assert json.loads(runner.workdir.result_file("m", "d").read_text())["accuracy"] == 100.0


def test_a_retry_asked_mid_run_goes_ahead_of_the_datasets_still_queued(tmp_path: Path, sim_factory) -> None:
    """`r` while a model still has datasets queued: the failed samples are sent next, beside the
    dataset being inferred, not after every dataset behind it (hours, on a long plan)."""
    rows, b1, b2 = arithmetic(12), arithmetic(150, prefix="B"), arithmetic(150, prefix="C")
    sim = sim_factory(SimConfig(default=ModelProfile(latency=0.02), answer_key=key_for(rows, b1, b2), faults=Faults(max_prompt_chars=20)))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=2)],
        datasets=[gsm_dataset(name, write_jsonl(tmp_path / f"{name}.jsonl", r)) for name, r in (("d", rows), ("b1", b1), ("b2", b2))],
    )
    runner = Runner(load_plan(plan))
    received: dict[str, list[float]] = {}

    async def before() -> None:
        await until(lambda: (p := runner.state.pairs.get(("m", "d"))) is not None and p.status == PairStatus.FAIL, "m/d failed")
        # b1 started early, as d's last samples went out (its file is opened in a thread: on a
        # loaded machine it may say so a moment after d has ended)
        await until(lambda: runner.state.pairs[("m", "b1")].status == PairStatus.RUNNING, "m/b1 running")
        assert runner.state.pairs[("m", "b2")].completed == 0  # queued behind b1
        sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))  # the server is fixed

    async def after() -> None:
        await until(lambda: runner.state.finished is not None, "the run to end", timeout=60)
        for r in sim.stats.log:
            received.setdefault(r.prompt[:1], []).append(r.t_received)

    codes = anyio.run(functools.partial(run_and_retry, runner, ("m", "d"), before, after))
    assert codes == {"run": 0, "retry": 0}
    retried = sorted(received["Q"])[-len(long_prompts(rows)):]  # the second tries of the long prompts
    assert max(retried) < min(received["C"])  # all sent before b2, queued behind b1, began
    assert max(retried) < max(received["B"])  # and beside b1, which went on after them
    assert runner.state.pairs[("m", "d")].score == 100.0


def sim_stats(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/sim/stats", timeout=10) as r:
        return json.loads(r.read())


def test_retry_after_the_run_reuses_the_simulator_and_clears_old_failures(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url), {"abbr": "s", "type": "lightllm", "url": "sim://?accuracy=1", "max_workers": 4}],
        datasets=[gsm_dataset("d", data)],
    )
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)

    async def main() -> tuple[int, int, dict[str, Any]]:
        with anyio.fail_after(90):
            first = await runner.run()
            assert failures_of(runner.state, "m", "d") and runner.failed_pairs() == [("m", "d")]
            sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
            second = await runner.retry(runner.failed_pairs())
            (started,) = of_type(events, ev.SimulatorStarted)
            served = sim_stats(started.url)  # the simulator of the first run, still up, still counting
            return first, second, served

    try:
        first, second, served = anyio.run(main)
    finally:
        runner.close()
    assert (first, second) == (1, 0)
    assert len(of_type(events, ev.SimulatorStarted)) == 1  # not restarted for the retry
    assert served["requests_total"] == 40  # what s asked during the run: the same process
    assert failures_of(runner.state, "m", "d") == [] and runner.state.pairs[("m", "d")].failed == 0
    assert runner.state.pairs[("m", "d")].status == PairStatus.SCORED and runner.failed_pairs() == []
    assert [f.exit_code for f in of_type(events, ev.RunFinished)] == [1, 0]
    runner.close()  # idempotent
    with pytest.raises(OSError):
        sim_stats(started_url(events))


def started_url(events: list[ev.Event]) -> str:
    return str(of_type(events, ev.SimulatorStarted)[0].url)


class BlockedScoring:
    """The first scoring reads its predictions, then waits for `release` (bounded); later ones
    run freely. `finished` is set once that first scoring's thread has returned or raised."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        import evaltui.engine.run.scorer as watch
        import evaltui.scoring as scoring

        self.release = threading.Event()
        self.finished = threading.Event()
        self.blocked = threading.Event()
        real_iter, real_score = scoring.iter_details, watch.score_pair
        calls = {"iter": 0, "score": 0}

        def iter_details(evaluator: Any, predictions: Any, *rest: Any) -> Iterator[dict[str, Any]]:
            calls["iter"] += 1
            if calls["iter"] == 1:
                items = list(predictions)  # the predictions as they are now
                self.blocked.set()
                self.release.wait(30)
                return real_iter(evaluator, items, *rest)
            return real_iter(evaluator, predictions, *rest)

        def score_pair(*args: Any) -> float:
            calls["score"] += 1
            first = calls["score"] == 1
            try:
                return real_score(*args)
            finally:
                if first:
                    self.finished.set()

        monkeypatch.setattr(scoring, "iter_details", iter_details)
        monkeypatch.setattr(watch, "score_pair", score_pair)
        monkeypatch.setattr(watch, "INLINE_BYTES", -1)  # in a thread, as a large pair is: only a thread can be left behind


def test_a_scoring_cancelled_by_quit_never_writes_its_result(tmp_path: Path, sim_factory, monkeypatch) -> None:
    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])))
    blocked = BlockedScoring(monkeypatch)

    async def main() -> int:
        with anyio.fail_after(60):
            return await body()

    async def body() -> int:
        async with anyio.create_task_group() as tg:
            code: list[int] = []

            async def run() -> None:
                code.append(await runner.run())

            tg.start_soon(run)
            await until(blocked.blocked.is_set, "scoring started")
            runner.cancel()
            runner.cancel()  # idempotent
        return code[0]

    assert anyio.run(main) == 130
    runner.cancel()  # nothing runs: still nothing happens
    blocked.release.set()
    assert blocked.finished.wait(30)  # the abandoned thread has finished its work...
    result = runner.workdir.result_file("m", "d")
    assert not result.exists()  # ...and wrote nothing
    assert not list(result.parent.glob(".*.tmp"))
    assert runner.workdir.predictions_file("m", "d").exists()  # the inference is kept: a re-run scores it


def test_a_scoring_abandoned_by_a_retry_never_overwrites_the_new_result(tmp_path: Path, sim_factory, monkeypatch) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    # t tolerates its failures, so it is scored with them (25 %) — and that scoring is held up
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("t", write_jsonl(tmp_path / "t.jsonl", rows), fail_on_error=0.9)])
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    blocked = BlockedScoring(monkeypatch)

    async def main() -> int:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runner.run)
                await until(blocked.blocked.is_set, "first scoring started")
                sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
                return await runner.retry([("m", "t")])  # joins the run, whose scoring is stuck

    assert anyio.run(main) == 0
    assert [e.score for e in of_type(events, ev.DatasetScored)] == [100.0]  # the stale 25 % never reported
    blocked.release.set()
    assert blocked.finished.wait(30)
    result = json.loads(runner.workdir.result_file("m", "t").read_text())
    assert result["accuracy"] == 100.0  # the stale thread computed 25 % and was refused the rename
    assert not list(runner.workdir.result_file("m", "t").parent.glob(".*.tmp"))
    assert runner.state.pairs[("m", "t")].status == PairStatus.SCORED


def test_planning_runs_in_a_worker_thread_while_the_loop_keeps_ticking(tmp_path: Path, sim_factory, monkeypatch) -> None:
    import evaltui.engine.run.resume as resume

    rows = arithmetic(60)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    assert anyio.run(Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, limit=30)]))).run) == 0
    # The re-run with a larger limit reads the first run's checkpoint back while planning. The
    # scan waits until the loop has ticked a few more times: were it on the loop, no tick could
    # come and the wait would run out.
    ticks = [0]
    scans: list[tuple[bool, bool]] = []

    class Sorter(resume.Sorter):  # planning reads each checkpoint through (damaged lines set aside)
        def __iter__(self) -> Iterator[Any]:
            start = ticks[0]
            deadline = time.monotonic() + 10
            while ticks[0] < start + 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            scans.append((threading.current_thread() is threading.main_thread(), ticks[0] >= start + 3))
            return super().__iter__()

    monkeypatch.setattr(resume, "Sorter", Sorter)
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])))

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            async def ticker() -> None:
                while True:
                    ticks[0] += 1
                    await anyio.sleep(0.005)

            tg.start_soon(ticker)
            with anyio.fail_after(60):
                code = await runner.run()
            tg.cancel_scope.cancel()
        return code

    sim.reset_stats()
    assert anyio.run(main) == 0
    assert scans and all(not on_main and ticked for on_main, ticked in scans)
    assert sim.stats.requests_total == 30  # the scan was used: only the new samples ran


def test_retry_while_running_restarts_a_model_whose_pool_had_ended(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    # "slow" keeps the run going (0.5 s a request, one at a time) until the test lets it finish
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20), models={"slow": ModelProfile(latency=0.5)}))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url), lightllm("slow", sim.url, max_workers=1)],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))],
        run={"max_num_workers": 2},
    )
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    sent: list[str] = []

    async def before() -> None:
        # m's only dataset has failed, and its pool has nothing left: it has ended
        await until(lambda: any(isinstance(e, ev.ModelLoad) and e.model == "m" and e.samples == 40 and e.in_flight == 0 for e in events), "m ended")
        await until(lambda: ("m", "d") in runner.failed_pairs(), "m/d failed")
        assert runner.state.finished is None
        sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
        sim.reset_stats()

    async def after() -> None:
        await until(lambda: runner.state.pairs[("m", "d")].status == PairStatus.SCORED, "m/d scored")
        sent.extend(r.prompt for r in sim.stats.log if r.model == "m")
        sim.call(lambda s: s.config.models.__setitem__("slow", ModelProfile(latency=0.0)))

    codes = anyio.run(run_and_retry, runner, ("m", "d"), before, after)
    run_code, retry_code = codes["run"], codes["retry"]
    assert sorted(sent) == sorted(long_prompts(rows))
    assert run_code == retry_code and len(of_type(events, ev.RunFinished)) == 1
    assert runner.state.pairs[("m", "d")].score == 100.0 and failures_of(runner.state, "m", "d") == []


def test_a_retry_of_a_pair_still_being_inferred_leaves_it_to_finish(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=0.5)))
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=1)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])))
    events: list[ev.Event] = []
    runner.subscribe(events.append)

    async def before() -> None:
        await until(lambda: bool(of_type(events, ev.SampleFinished)), "m/d running")

    async def after() -> None:
        await until(lambda: any("not retried, still running: m/d" in n.message for n in runner.state.notices), "refused")
        sim.call(lambda s: setattr(s.config, "default", ModelProfile(latency=0.0)))

    assert anyio.run(run_and_retry, runner, ("m", "d"), before, after) == {"run": 0, "retry": 0}
    assert not of_type(events, ev.RetryStarted) and len(of_type(events, ev.DatasetStarted)) == 1
    assert sim.stats.requests_total == 20  # nothing sent twice


def test_a_retry_after_the_checkpoints_were_deleted_resends_only_the_failed_samples(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    # fail_on_error lets the long prompts fail: the pair is done, its final predictions written
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), fail_on_error=0.9)])
    runner = Runner(load_plan(plan))

    async def main() -> tuple[int, int]:
        with anyio.fail_after(60):
            first = await runner.run()
            assert runner.workdir.predictions_complete("m", "d")
            for cp in runner.workdir.checkpoint_files("m", "d"):
                cp.unlink()  # as OpenCompass users do after the merge
            sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
            sim.reset_stats()
            return first, await runner.retry([("m", "d")])

    try:
        first, second = anyio.run(main)
    finally:
        runner.close()
    assert second == 0
    assert sorted(r.prompt for r in sim.stats.log) == sorted(long_prompts(rows))
    assert runner.state.pairs[("m", "d")].status == PairStatus.SCORED and runner.state.pairs[("m", "d")].score == 100.0


def test_a_full_disk_at_the_merge_leaves_the_shard_pending_not_running(tmp_path: Path, sim_factory, monkeypatch) -> None:
    import errno

    import evaltui.engine.run.ending as ending

    def disk_full(*_: Any, **__: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ending, "merge_checkpoints", disk_full)
    rows = arithmetic(10)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    assert anyio.run(runner.run) == 1
    assert any("No space left" in n.message for n in of_type(events, ev.Notice))
    assert runner.workdir.read_status("m", "d")["status"] == "pending"
    assert runner.state.pairs[("m", "d")].status != PairStatus.RUNNING  # skipped: not inferred, not scored


def test_a_retry_joining_a_run_that_fails_to_start_does_not_wait_forever(tmp_path: Path, sim_factory, monkeypatch) -> None:
    import evaltui.engine.run.runner as runner_module
    from evaltui.datasets import DatasetError

    counting = threading.Event()
    release = threading.Event()

    def unreadable(*_: Any) -> int:
        counting.set()
        release.wait(20)
        raise DatasetError("d.jsonl: unreadable")

    monkeypatch.setattr(runner_module, "count_records", unreadable)
    monkeypatch.setattr(runner_module, "known_count", lambda *_: None)  # not counted by load_plan: the run reads it (and hangs there)
    rows = arithmetic(5)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    runner = Runner(load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])))
    async def before() -> None:
        await until(counting.is_set, "planning began")  # the retry then finds a session that has not opened

    async def after() -> None:
        await anyio.sleep(0.1)
        release.set()

    codes = anyio.run(functools.partial(run_and_retry, runner, ("m", "d"), before, after, limit=20))
    assert codes == {"run": 1, "retry": 1}


def test_a_retry_joining_the_run_stops_early_when_the_server_is_down_now(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    other = sim_factory(SimConfig(answer_key=key_for(rows), models={"slow": ModelProfile(latency=0.2)}))  # keeps the run going
    # m's one url is a fleet of one: a server that answered earlier and is gone now is waited for
    # (down_timeout), then the model stops; a short wait keeps the test short
    plan = write_plan(
        tmp_path, models=[lightllm("m", sim.url, down_timeout=1.0), lightllm("slow", other.url, max_workers=2)],
        datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))], run={"max_num_workers": 2},
    )
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)

    def inferred() -> int:
        return sum(1 for e in of_type(events, ev.DatasetInferred) if e.model == "m")

    async def main() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runner.run)
                # m's pool answered the short prompts (the server was there), then ended
                await until(lambda: inferred() == 1 and runner._live is not None and "m" not in runner._live._running, "m done")
                sim.stop()
                tg.start_soon(runner.retry, [("m", "d")])
                await until(lambda: inferred() == 2, "m/d retried")
                other.call(lambda s: s.config.models.__setitem__("slow", ModelProfile(latency=0.0)))

    anyio.run(main)
    assert len(of_type(events, ev.RunFinished)) == 1  # the retry joined the live run
    assert any("stopping this model" in n.message for n in of_type(events, ev.Notice))


def test_an_abandoned_scoring_keeps_its_eval_workers_slot_until_its_thread_ends(tmp_path: Path, sim_factory, monkeypatch) -> None:
    import evaltui.engine.run.scorer as watch

    rows = arithmetic(20)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))], run={"eval_workers": 1})
    runner = Runner(load_plan(plan))
    events: list[ev.Event] = []
    runner.subscribe(events.append)
    blocked = BlockedScoring(monkeypatch)
    inner, lock, active, most = watch.score_pair, threading.Lock(), [0], [0]

    def counted(*args: Any) -> float:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            return inner(*args)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(watch, "score_pair", counted)

    async def main() -> int:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runner.run)
                await until(blocked.blocked.is_set, "first scoring started")
                retried: list[int] = []

                async def retry() -> None:
                    retried.append(await runner.retry([("m", "d")]))  # abandons the stuck scoring

                tg.start_soon(retry)
                await until(lambda: len(of_type(events, ev.DatasetScoring)) == 2, "second scoring began")
                await anyio.sleep(0.3)  # room for a second scoring thread to start, were it let
                blocked.release.set()
            return retried[0]

    assert anyio.run(main) == 0
    assert most[0] == 1  # eval_workers = 1: never two scorings at once, the abandoned one included
    assert runner.state.pairs[("m", "d")].status == PairStatus.SCORED
