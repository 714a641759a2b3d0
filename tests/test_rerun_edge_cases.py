"""Re-runs after the plan or the work dir changed, odd replies, odd outputs: found by trying to break it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planmaker import arithmetic, gsm_dataset, lightllm, of_type, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.guard import mark
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.sim import AnswerKey, Faults, ModelProfile, SimConfig


def setup(tmp_path: Path, sim_factory, n: int = 30, **sim_kw):  # type: ignore[no-untyped-def]
    rows = arithmetic(n)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, **sim_kw))
    return rows, sim, write_jsonl(tmp_path / "d.jsonl", rows)


def with_long_prompts(tmp_path: Path, sim_factory, n: int, long: int):  # type: ignore[no-untyped-def]
    """n samples whose first `long` prompts the server rejects as too long (400, not retried)."""
    rows = [{"question": ("long " * 10 if i < long else "") + f"q{i}", "answer": "#### 1"} for i in range(n)]
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    sim = sim_factory(SimConfig(answer_key=key, faults=Faults(max_prompt_chars=20)))
    return sim, write_jsonl(tmp_path / "d.jsonl", rows)


def test_a_larger_limit_runs_only_the_new_samples_and_scores_in_the_same_run(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, limit=10)]))[0] == 0
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, limit=30)]))
    assert code == 0
    assert sim.stats.requests_total == 20
    assert [(e.dataset, e.score) for e in of_type(events, ev.DatasetScored)] == [("d", 100.0)]


def test_a_changed_prompt_is_inferred_again_and_scored(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))[0] == 0
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, prompt="Q: {question}")]))
    assert code == 0 and sim.stats.requests_total == 30
    assert len(of_type(events, ev.DatasetScored)) == 1


def test_a_changed_evaluator_scores_again_without_inferring_again(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))[0] == 0
    sim.reset_stats()
    regex = {**gsm_dataset("d", data), "evaluator": {"type": "regex", "pattern": "#### (\\d+)"}}
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[regex]))
    assert code == 0 and sim.stats.requests_total == 0
    (scored,) = of_type(events, ev.DatasetScored)
    assert scored.score == 0.0  # the regex takes the number, the gold is the whole solution text
    assert runner.workdir.read_result("m", "d")["accuracy"] == 0.0


def test_a_truncated_predictions_file_is_rebuilt_from_the_checkpoint(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    wd = WorkDir(tmp_path / "out")
    final = wd.predictions_file("m", "d")
    final.write_bytes(final.read_bytes()[:500])
    wd.result_file("m", "d").unlink()
    sim.reset_stats()
    code, events, _ = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 0
    assert len(json.loads(final.read_text())) == 30
    assert of_type(events, ev.DatasetScored)[0].score == 100.0


def test_changing_shards_keeps_finished_work(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, limit=20)]))[0] == 0
    sim.reset_stats()
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=3)]))
    assert code == 0
    assert sim.stats.requests_total == 10  # only the 10 the first layout never ran
    assert len(json.loads(runner.workdir.predictions_file("m", "d").read_text())) == 30
    assert sorted(p.name for p in runner.workdir.status_files("m", "d")) == ["d_0.json", "d_1.json", "d_2.json"]


def test_more_shards_than_records(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, limit=3, shards=5)])
    for _ in range(2):  # and again, resuming
        code, events, _ = run_plan(plan)
        assert code == 0
    assert sim.stats.requests_total == 3


def test_fail_on_error_is_a_budget_for_the_whole_dataset_whatever_the_shards(tmp_path: Path, sim_factory) -> None:
    sim, data = with_long_prompts(tmp_path, sim_factory, 40, 10)  # all of them in the first shard
    outcomes = []
    for shards in (1, 2, 4):
        plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=shards, fail_on_error=0.25)], run={"work_dir": f"out{shards}"})
        code, events, _ = run_plan(plan)
        outcomes.append((code, [e.score for e in of_type(events, ev.DatasetScored)]))
    assert outcomes == [(0, [75.0])] * 3


def test_a_reply_with_a_lone_surrogate_is_kept_and_the_run_goes_on(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(5)
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], "odd \ud83d reply #### 1" if r is rows[0] else r["answer"])
    sim = sim_factory(SimConfig(answer_key=key))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, events, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))
    assert code == 0
    preds = json.loads(runner.workdir.predictions_file("m", "d").read_text())
    assert preds["0"]["prediction"] == "odd \ud83d reply #### 1"
    assert of_type(events, ev.DatasetScored)[0].score == 80.0


def test_a_second_evaltui_on_the_same_work_dir_is_refused(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    fd = wd.lock()  # as if another evaltui were running there (which marks its work dir at once)
    mark(wd.root)
    try:
        # The command line: one line on stderr naming the field, like the work dir's other refusals.
        r = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], capture_output=True, text=True, timeout=60)
        r2 = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--work-dir", str(wd.root)], capture_output=True, text=True, timeout=60)
        # The engine, for embedders: an error Notice and exit 2.
        code, events, _ = run_plan(plan)
    finally:
        import os

        os.close(fd)
    busy = f"is in use by another evaltui (pid {os.getpid()}); wait for it or pass --work-dir"
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"plan.toml: run.work_dir: {wd.root.resolve()} {busy}\n")
    assert (r2.returncode, r2.stdout, r2.stderr) == (2, "", f"plan.toml: --work-dir: {wd.root.resolve()} {busy}\n")
    assert code == 2 and [n.message for n in of_type(events, ev.Notice) if n.level == "error"] == [f"work dir {wd.root.resolve()} {busy}"]
    assert sim.stats.requests_total == 0


def test_a_work_dir_that_cannot_be_created_exits_2(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    r = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--work-dir", str(a_file / "w")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "cannot use the work dir" in r.stdout and "Traceback" not in r.stdout + r.stderr


def test_a_reader_that_leaves_early_does_not_stop_the_run(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory, default=ModelProfile(latency=0.01))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=2)], datasets=[gsm_dataset("d", data)])
    proc = subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    wd = WorkDir(tmp_path / "out")
    assert wd.has_scored_result("m", "d")
    assert "run finished" in (wd.logs_dir / "run.log").read_text()


def test_a_dataset_that_cannot_be_loaded_fails_alone_and_the_next_ones_run(tmp_path: Path, sim_factory) -> None:
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    _, sim, data = setup(tmp_path, sim_factory, default=ModelProfile(latency=0.01))
    b = write_jsonl(tmp_path / "b.jsonl", arithmetic(30))
    plan = load_plan(
        write_plan(
            tmp_path,
            models=[lightllm("m", sim.url, max_workers=4)],
            datasets=[gsm_dataset("a", data), gsm_dataset("b", b), gsm_dataset("c", data, limit=10)],
        )
    )
    events: list[ev.Event] = []

    def sink(e: ev.Event) -> None:
        events.append(e)
        if isinstance(e, ev.DatasetStarted) and e.dataset == "a":
            b.unlink()  # the file goes away after the run checked it, before b is loaded

    async def main() -> int:
        with anyio.fail_after(60):
            return await Runner(plan, sink=sink).run()

    assert anyio.run(main) == 1
    inferred = {e.dataset: e for e in of_type(events, ev.DatasetInferred)}
    assert inferred["b"].status == "fail" and "b.jsonl" in inferred["b"].error
    assert {e.dataset for e in of_type(events, ev.DatasetScored)} == {"a", "c"}


def test_an_edited_data_file_starts_the_pair_over(tmp_path: Path, sim_factory) -> None:
    rows, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 0
    write_jsonl(data, [{"question": "NEW first question", "answer": "#### 7"}, *rows])  # a record inserted
    sim.reset_stats()
    code, events, runner = run_plan(plan)
    assert code == 0 and sim.stats.requests_total == 31  # nothing kept from the old file
    preds = json.loads(runner.workdir.predictions_file("m", "d").read_text())
    assert preds["0"]["origin_prompt"] == "NEW first question" and len(preds) == 31


def test_a_record_that_no_longer_fits_the_template_fails_alone(tmp_path: Path, sim_factory) -> None:
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    rows, sim, data = setup(tmp_path, sim_factory)
    plan = load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, prompt="{question[0]}{question}")]))
    write_jsonl(data, [{"question": 5, "answer": "#### 1"}, *rows[1:]])  # changed after the check
    events: list[ev.Event] = []

    async def main() -> int:
        with anyio.fail_after(60):
            return await Runner(plan, sink=events.append).run()

    assert anyio.run(main) == 1  # one sample failed, fail_on_error is 0
    (failed,) = of_type(events, ev.SampleFailed)
    assert failed.sample_index == 0 and failed.error.type == "template" and "TypeError" in failed.error.message
    assert len(of_type(events, ev.SampleFinished)) == 29


def test_a_lower_fail_on_error_reopens_the_pair_and_retries_its_failures(tmp_path: Path, sim_factory) -> None:
    sim, data = with_long_prompts(tmp_path, sim_factory, 20, 5)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, fail_on_error=0.5)]))[0] == 0
    sim.reset_stats()
    code, events, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))
    assert code == 1
    assert sim.stats.requests_total == 5  # the five failures were tried again, nothing else
    assert of_type(events, ev.DatasetInferred)[0].status == "fail"


def test_final_predictions_are_the_checkpoint_when_the_checkpoints_were_deleted(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    assert run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)]))[0] == 0
    wd = WorkDir(tmp_path / "out")
    for cp in wd.checkpoint_files("m", "d"):
        cp.unlink()
    sim.reset_stats()
    code, _, _ = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data, shards=4)]))
    assert code == 0 and sim.stats.requests_total == 0
    assert len(json.loads(wd.predictions_file("m", "d").read_text())) == 30


def test_leftovers_of_a_killed_run_are_cleared(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    wd = WorkDir(tmp_path / "out")
    wd.prepare()
    mark(wd.root)  # a killed run had marked its work dir
    junk = [wd.root / "predictions" / "m" / ".d.json.abc123xy.tmp", wd.sandbox_dir / "evaltui-exec-x" / "program.py"]
    for j in junk:
        j.parent.mkdir(parents=True, exist_ok=True)
        j.write_text("left by a kill -9")
    assert run_plan(plan)[0] == 0
    assert not any(j.exists() for j in junk)


def test_a_full_disk_stops_the_run_with_a_message_and_keeps_the_work(tmp_path: Path, sim_factory, monkeypatch) -> None:
    import errno

    from evaltui.engine.disk import checkpoint as checkpoint_module

    _, sim, data = setup(tmp_path, sim_factory, default=ModelProfile(latency=0.005))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=2)], datasets=[gsm_dataset("d", data)])
    real_write = checkpoint_module.Checkpoint._write
    lines = {"n": 0}

    def fill_up(self, data: bytes) -> None:  # type: ignore[no-untyped-def]
        # the header and ten samples fit; a write of lines beyond that (one or a loop turn's
        # several) fails whole, as the real one cuts back a short write (the per-sample log,
        # written through the same class, is let through: what is counted is the checkpoint's)
        if not self.path.name.startswith("tmp_"):
            return real_write(self, data)
        if lines["n"] + data.count(b"\n") > 11:
            raise OSError(errno.ENOSPC, "No space left on device")
        lines["n"] += data.count(b"\n")
        real_write(self, data)

    monkeypatch.setattr(checkpoint_module.Checkpoint, "_write", fill_up)
    code, events, runner = run_plan(plan)
    assert code == 1
    assert any("No space left on device" in e.message and e.level == "error" for e in of_type(events, ev.Notice))
    assert of_type(events, ev.RunFinished)
    monkeypatch.setattr(checkpoint_module.Checkpoint, "_write", real_write)  # space freed
    sim.reset_stats()
    assert run_plan(plan)[0] == 0
    kept = lines["n"] - 1
    assert 0 < kept <= 10
    assert sim.stats.requests_total == 30 - kept  # the ones that were written are kept, once


def test_too_few_file_handles_for_max_workers_is_said_up_front(tmp_path: Path, sim_factory) -> None:
    _, sim, data = setup(tmp_path, sim_factory)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=300)], datasets=[gsm_dataset("d", data)])
    r = subprocess.run(
        ["bash", "-c", f"ulimit -n 128 && exec {sys.executable} -m evaltui {plan} --no-ui"], capture_output=True, text=True, timeout=120
    )
    assert "the open-files limit is 128" in r.stdout and "ulimit -n" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
