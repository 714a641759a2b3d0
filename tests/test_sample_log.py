"""The per-sample log (logs/samples/): every (sample, epoch)'s prompt, attempts, answer and usage,
append-only and torn-line safe like the checkpoints; off with [run] sample_log = false."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan

from evaltui.engine.disk.samplelog import latest_records
from evaltui.sim import Faults, ModelProfile, SimConfig


def log_lines(path: Path) -> list[dict[str, Any]]:
    """The complete sample lines of a log, read as any tool would (not the version header)."""
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        if raw.endswith(b"\n"):
            line = json.loads(raw)
            if "index" in line:
                out.append(line)
    return out


def test_every_sample_and_epoch_has_its_prompt_attempts_answer_and_usage(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(5)
    # each prompt's first attempt gets a 503
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(fail_first=1, fail_first_kind="503")))
    model = chat("m", sim.url, max_workers=1, retry=1, generation_kwargs={"temperature": 1.0, "max_new_tokens": 64})
    ds = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=2, system="Be brief.")
    code, _, runner = run_plan(write_plan(tmp_path, models=[model], datasets=[ds]))
    assert code == 0
    path = runner.workdir.sample_log_file("m", "d")
    lines = log_lines(path)
    assert sorted((r["index"], r.get("epoch", 0)) for r in lines) == [(i, e) for i in range(5) for e in range(2)]
    first = next(r for r in lines if r["index"] == 0 and "epoch" not in r)
    assert (first["prompt"], first["system"], first["answer"]) == (rows[0]["question"], "Be brief.", rows[0]["answer"])
    assert [(a[2], a[3]) for a in first["attempts"]] == [(503, "http"), (200, "ok")]
    assert all(a[0] >= first["time"] and a[1] >= 0 for a in first["attempts"]) and first["took"] >= first["attempts"][-1][1]
    assert first["usage"]["completion_tokens"] > 0 and first["usage"]["prompt_tokens"] > 0
    later = next(r for r in lines if r["index"] == 0 and r.get("epoch") == 1)
    assert [(a[2], a[3]) for a in later["attempts"]] == [(200, "ok")]  # the prompt's first attempt was epoch 0's
    records = list(latest_records(runner.workdir.sample_log_files("m", "d"), 5, 2))
    assert [(r["index"], r.get("epoch", 0)) for r in records] == [(i, e) for i in range(5) for e in range(2)]


def test_a_failed_sample_logs_each_try_and_a_re_run_adds_its_answer(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(2)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(fail_first=4, fail_first_kind="500")))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, retry=1)], datasets=[gsm_dataset("d", data, retry_on_error=1)])
    code, _, runner = run_plan(plan)
    assert code == 1
    lines = log_lines(runner.workdir.sample_log_file("m", "d"))
    assert {r["tries"] for r in lines} == {2}
    assert {tuple((a[2], a[3]) for a in r["attempts"]) for r in lines} == {((500, "http"),) * 4}
    assert {r["error"]["type"] for r in lines} == {"http"} and all(len(r["error"]["tries"]) == 2 for r in lines)
    code, _, runner = run_plan(plan)  # the fifth attempt of each prompt answers
    assert code == 0
    assert len(log_lines(runner.workdir.sample_log_file("m", "d"))) == 4  # the earlier record is kept: a history
    records = list(latest_records(runner.workdir.sample_log_files("m", "d"), 2, 1))
    assert [("error" in r, r["answer"]) for r in records] == [(False, rows[0]["answer"]), (False, rows[1]["answer"])]


def test_the_log_can_be_turned_off(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(3)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))], run={"sample_log": False})
    code, _, runner = run_plan(plan)
    assert code == 0 and not (runner.workdir.root / "logs" / "samples").exists()


def test_a_torn_last_line_is_skipped_when_read_and_cut_off_when_written_again(tmp_path: Path, sim_factory) -> None:
    rows = [{"question": "long " * 10, "answer": "#### 1"}, *arithmetic(3)]
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(max_prompt_chars=20)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", data)])
    assert run_plan(plan)[0] == 1  # sample 0 is refused
    path = tmp_path / "out" / "logs" / "samples" / "m" / "d.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"index":2,"time":1.0,"prompt":"half a li')  # killed mid-write
    assert [r["index"] for r in latest_records([path], 4, 1)] == [0, 1, 2, 3]  # the torn line is not a record
    sim.call(lambda s: setattr(s.config.faults, "max_prompt_chars", 0))
    code, _, _ = run_plan(plan)  # the re-run appends to the log: the torn line goes first
    assert code == 0
    lines = log_lines(path)
    assert path.read_bytes().endswith(b"\n") and b"half a li" not in path.read_bytes()
    assert sorted(r["index"] for r in lines) == [0, 0, 1, 2, 3] and lines[-1]["index"] == 0 and "error" not in lines[-1]
    assert [("error" in r) for r in latest_records([path], 4, 1)] == [False] * 4


def test_a_kill_inside_a_log_write_then_a_re_run_leaves_a_whole_log(tmp_path: Path, sim_factory) -> None:
    from test_crash import ForkServer, kill_when

    rows = arithmetic(30)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(latency=0.005)}))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url, max_workers=4)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    wd = tmp_path / "w"
    path = wd / "logs" / "samples" / "m" / "d.jsonl"

    def torn() -> bool:
        return path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")

    fs = ForkServer(tmp_path / "runs.log")
    try:
        fs.start(plan, wd, {"tear_log_line": 4})  # the version header is the first write
        assert kill_when(fs, torn), "the run ended before the kill"
        assert fs.run(plan, wd) == 0
    finally:
        fs.close()
    assert path.read_bytes().endswith(b"\n")
    lines = log_lines(path)  # every line parses
    assert {r["index"] for r in lines} == set(range(30))
    assert [r["index"] for r in latest_records([path], 30, 1)] == list(range(30))
