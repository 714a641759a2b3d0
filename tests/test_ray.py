"""`executor = "ray"` on a real Ray cluster started by this module on this machine (2 CPUs).

One Ray instance (ray.init in this process, module-scoped) serves every test here: the in-process
runs use it directly, the command-line runs join it by its address. The simulated servers are on
127.0.0.1; Ray's own processes talk over this machine's address. Each test states what the issue
promises: the same plan gives the same predictions and scores locally and on Ray; a Ray worker
killed mid-run loses nothing and duplicates nothing; a driver killed mid-run resumes from its
checkpoints; Ray missing or an address that does not answer is one line and exit 2; a local run
never imports Ray.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from planmaker import arithmetic, chat, gsm_dataset, key_for, lightllm, of_type, run_plan, write_jsonl, write_plan
from workfiles import checkpoint_entries, read_strict_json

from evaltui.cli import main
from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import Plan, load_plan
from evaltui.sim import ModelProfile, SimConfig, answers_correctly

REPO = Path(__file__).resolve().parents[1]
CODE_ROWS = [json.loads(line) for line in (REPO / "sample_configs" / "data" / "code.jsonl").read_text().splitlines()]
SAMPLING = {"temperature": 1.0, "max_new_tokens": 64}

try:
    import ray
except ImportError:  # the extra is not installed: only the tests that need no Ray run
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="Ray is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A Ray instance of 2 CPUs for this module; its GCS address. Shut down (every process of it) at the end."""
    if ray is None:
        pytest.skip("Ray is not installed (pip install -e '.[ray]')")
    import logging

    saved = os.environ.get("RAY_AUTH_MODE")
    # a short temp dir: Ray's unix sockets live in it, and their paths are limited to 107 bytes
    temp = Path(f"/tmp/evaltui-ray-{os.getpid()}")
    context = ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, _temp_dir=str(temp))
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)  # its logs and sockets
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)  # ray.init turned token authentication on for this process
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def actor_pids() -> set[int]:
    """The processes running a model's actor now, of the Ray instances this test process started
    (its descendants: under pytest -n another worker's cluster runs beside this one)."""
    actors, parents = set(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state, ppid = f.read().rsplit(b")", 1)[1].split()[:2]
        except OSError:
            continue
        parents[int(entry)] = int(ppid)
        if argv.startswith(b"ray::ModelActor") and state not in (b"Z", b"X"):
            actors.add(int(entry))
    me = os.getpid()

    def mine(pid: int) -> bool:
        for _ in range(64):  # (a bounded walk up the tree)
            pid = parents.get(pid, 0)
            if pid in (me, 0, 1):
                return pid == me
        return False

    return {pid for pid in actors if mine(pid)}


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pair_files(work_dir: Path) -> dict[str, Any]:
    """Every pair's final predictions and result, as JSON (duplicate keys refused)."""
    files = sorted(work_dir.glob("predictions/*/*.json")) + sorted(work_dir.glob("results/*/*.json"))
    return {str(p.relative_to(work_dir)): read_strict_json(p) for p in files}


def log_records(work_dir: Path) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    """The per-sample log's records without their times (which differ from run to run): each
    attempt's HTTP status, outcome (and replica) kept."""
    out = {}
    for path in sorted(work_dir.glob("logs/samples/*/*.jsonl")):
        for entry in checkpoint_entries(path):
            key = (path.parent.name, path.stem, entry["index"], entry.get("epoch", 0))
            out[key] = {k: v for k, v in entry.items() if k not in ("time", "took", "attempts")} | {"attempts": [a[2:] for a in entry["attempts"]]}
    return out


def run_with(runner: Runner) -> int:
    async def bounded() -> int:
        with anyio.fail_after(120):  # no test run may hang the suite
            return await runner.run()

    return anyio.run(bounded)


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "token"}


# ---------------------------------------------------------------------------- the same results


@needs_ray
def test_a_plan_gives_the_same_predictions_scores_and_log_locally_and_on_ray(tmp_path: Path, sim_factory, cluster: str) -> None:
    """Two models, a gsm8k dataset over two shards (two actors per model) and two epochs, and a
    code_exec dataset scored by Ray tasks: every predictions and result file is the same, and
    so is every unit's record in the per-sample log."""
    rows = arithmetic(30)
    key = key_for(rows)
    for r in CODE_ROWS:
        key.add_gen(r["prompt"], r["canonical_solution"])
    sim = sim_factory(SimConfig(answer_key=key, models={"a": ModelProfile(accuracy=0.6, jitter=0.01), "b": ModelProfile(accuracy=0.5, jitter=0.01)}))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code_data = write_jsonl(tmp_path / "code.jsonl", CODE_ROWS)
    datasets = [
        gsm_dataset("d", data, shards=2, epochs=2, evaluator={"type": "gsm8k", "reducer": "pass_at_k", "k": [1, 2]}),
        {"abbr": "code", "path": str(code_data), "prompt": "{prompt}", "target": "{canonical_solution}", "evaluator": {"type": "code_exec", "timeout": 5.0}},
    ]
    models = [lightllm("a", sim.url, generation_kwargs={"do_sample": True, "max_new_tokens": 64}), chat("b", sim.url, generation_kwargs=SAMPLING)]
    runs = {}
    for executor in ("local", "ray"):
        folder = tmp_path / executor
        folder.mkdir()
        code, events, runner = run_plan(write_plan(folder, models=models, datasets=datasets, run={"executor": executor, "max_num_workers": 2}))
        assert code == 0, [e for e in events if isinstance(e, ev.Notice)]
        runs[executor] = (events, runner.workdir.root)
    (local_events, local_dir), (ray_events, ray_dir) = runs["local"], runs["ray"]
    assert pair_files(ray_dir) == pair_files(local_dir)
    assert len(pair_files(local_dir)) == 8  # 2 models × 2 datasets × (predictions, result)
    assert log_records(ray_dir) == log_records(local_dir)
    scores = {(e.model, e.dataset): (e.score, e.extra) for e in of_type(ray_events, ev.DatasetScored)}
    assert scores == {(e.model, e.dataset): (e.score, e.extra) for e in of_type(local_events, ev.DatasetScored)}
    assert scores[("a", "code")][0] == round(100 * sum(answers_correctly("a", r["prompt"], 0.6) for r in CODE_ROWS) / len(CODE_ROWS), 2)
    assert len(of_type(ray_events, ev.SampleFinished)) == len(of_type(local_events, ev.SampleFinished)) == 2 * (30 * 2 + len(CODE_ROWS))
    loads = [e for e in of_type(ray_events, ev.ModelLoad) if e.samples]
    assert loads and all(e.in_flight <= e.max_workers for e in loads)


# ---------------------------------------------------------------------------- an actor dies


@needs_ray
@pytest.mark.reliability
@pytest.mark.crash
def test_a_ray_worker_killed_mid_run_loses_nothing_and_duplicates_nothing(tmp_path: Path, sim_factory, cluster: str) -> None:
    """SIGKILL to one of the model's two actors while its requests are out: the driver sends
    what it had not received to a new actor; every sample has exactly one line, the score is exact."""
    rows = arithmetic(240)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.7, latency=0.03)}))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), shards=2)],
                      run={"executor": "ray"})
    before = actor_pids()
    finished, killed = [], []

    def kill_one(event: ev.Event) -> None:
        """In the engine's loop, as the 60th answer is counted: one of the run's actors, gone."""
        if isinstance(event, ev.SampleFinished) and not killed:
            finished.append(event)
            mine = sorted(actor_pids() - before) if len(finished) >= 60 else []
            if mine:
                os.kill(mine[0], signal.SIGKILL)
                killed.append(mine[0])

    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=lambda e: (events.append(e), kill_one(e)))
    code = run_with(runner)
    assert killed, "no actor was found to kill"
    assert code == 0
    notices = [e.message for e in of_type(events, ev.Notice) if "Ray actor died" in e.message]
    assert len(notices) == 1 and "go to a new one" in notices[0]
    assert len(of_type(events, ev.SampleFinished)) == 240
    lines = [e for k in (0, 1) for e in checkpoint_entries(runner.workdir.root / "predictions" / "m" / f"tmp_d_{k}.jsonl")]
    indices = [e["index"] for e in lines]
    assert sorted(indices) == list(range(240))  # each sample once: none lost, none twice
    assert not any("error" in e for e in lines)
    expected = round(100 * sum(answers_correctly("m", r["question"], 0.7) for r in rows) / 240, 2)
    assert of_type(events, ev.DatasetScored)[0].score == expected
    assert sim.stats.to_json()["requests_total"] >= 240  # the killed actor's unanswered requests went out again


@needs_ray
@pytest.mark.reliability
@pytest.mark.crash
def test_an_actor_that_keeps_dying_fails_its_samples_and_a_re_run_does_them(tmp_path: Path, sim_factory, cluster: str) -> None:
    """Every new actor SIGKILLed before it answers: after MAX_DEATHS in a row the model's units
    fail (type `worker`, with why) rather than the run waiting or re-sending for ever; the next run
    sends them again and keeps the ones answered."""
    from evaltui.engine.ray.model import MAX_DEATHS

    rows = arithmetic(120)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(latency=0.03)}))
    plan = load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))],
                                run={"executor": "ray"}))
    before = actor_pids()
    events: list[ev.Event] = []
    killed: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        """Once 20 samples are in: each of the run's actors, as soon as it is there (MAX_DEATHS of them)."""
        while not stop.is_set() and len(killed) < MAX_DEATHS:
            if len(of_type(events, ev.SampleFinished)) >= 20:
                for pid in sorted(actor_pids() - before - set(killed)):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.005)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        code = run_with(Runner(plan, sink=events.append))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert len(killed) == MAX_DEATHS
    assert code == 1
    assert [e.level for e in of_type(events, ev.Notice) if "Ray actor died" in e.message] == ["warning"] * (MAX_DEATHS - 1) + ["error"]
    failed = of_type(events, ev.SampleFailed)
    assert failed and {f.error.type for f in failed} == {"worker"}
    assert f"died {MAX_DEATHS} times in a row" in failed[0].error.message
    answered = len(of_type(events, ev.SampleFinished))
    assert answered + len(failed) == 120

    code, events, runner = run_plan(plan)
    assert code == 0
    assert len(of_type(events, ev.SampleFinished)) == len(failed)  # only those: the answered ones are kept
    lines = checkpoint_entries(runner.workdir.root / "predictions" / "m" / "tmp_d.jsonl")
    assert sorted(e["index"] for e in lines if "error" not in e) == list(range(120))


# ---------------------------------------------------------------------------- the command line


@needs_ray
@pytest.mark.reliability
@pytest.mark.crash
def test_the_command_line_joins_a_cluster_and_a_killed_driver_resumes_from_its_checkpoints(tmp_path: Path, sim_factory, cluster: str) -> None:
    """`--executor ray --ray-address ADDR`: SIGKILL to the driver mid-run takes its actors with it
    (Ray ends an owner's actors); the same command again resumes — an actor of its SIGKILLed too,
    which Ray reports to the driver, not on its stdout — and ends as an uninterrupted run would."""
    rows = arithmetic(400)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=0.8, latency=0.03)}))
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows))])
    argv = [sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--executor", "ray", "--ray-address", cluster]
    checkpoint = tmp_path / "out" / "predictions" / "m" / "tmp_d.jsonl"
    before = actor_pids()

    def answered() -> int:
        return len(checkpoint_entries(checkpoint)) if checkpoint.exists() else 0

    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env())
    try:
        wait_until(lambda: answered() >= 60 or driver.poll() is not None, 90, "the first answers")
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
        assert actor_pids() - before, "the run's actor is not running"
        driver.kill()
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
    done_at_kill = answered()
    assert 60 <= done_at_kill < 400
    wait_until(lambda: not (actor_pids() - before), 60, "the killed driver's actor to end")

    again = subprocess.Popen([*argv, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        wait_until(lambda: answered() >= done_at_kill + 40 or again.poll() is not None, 90, "the re-run's first answers")
        mine = sorted(actor_pids() - before)
        assert again.poll() is None and mine, "the re-run ended before its actor could be killed"
        os.kill(mine[0], signal.SIGKILL)
        out, err = again.communicate(timeout=120)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate(timeout=30)
    assert again.returncode == 0, err
    summary = json.loads(out)  # stdout holds the JSON summary alone: nothing of Ray's on it
    assert summary["exit_code"] == 0
    assert "Ray actor died" in err and "(raylet)" not in err
    indices = [e["index"] for e in checkpoint_entries(checkpoint)]
    assert sorted(indices) == list(range(400))  # every sample once: those done before the kill were not asked again
    result = read_strict_json(tmp_path / "out" / "results" / "m" / "d.json")
    assert result["accuracy"] == round(100 * sum(answers_correctly("m", r["question"], 0.8) for r in rows) / 400, 2)
    assert sim.stats.to_json()["requests_total"] <= 400 + 2 * 8  # at most max_workers again per kill


@pytest.mark.reliability
def test_executor_ray_without_ray_installed_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Ray hidden from the interpreter (as where the extra is not installed): `--executor ray`,
    or the plan's `run.executor = "ray"`, says how to install it."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None  # import ray raises ImportError\n")
    env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{REPO}"}
    model = lightllm("m", "http://127.0.0.1:9")
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(3))
    for extra, run, field in ((["--executor", "ray"], {}, "--executor ray"), ([], {"executor": "ray"}, "run.executor")):
        plan = write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", data)], run=run, name=f"plan{len(extra)}.toml")
        proc = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui", *extra], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"{plan.name}: {field}: Ray is not installed (import of ray halted; None in sys.modules); "
                                                    "install it with: pip install 'evaltui[ray]' (or pip install 'ray>=2.10')"]
        assert not (tmp_path / "out").exists()


@needs_ray
@pytest.mark.reliability
def test_an_address_where_no_cluster_answers_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(3)))])
    proc = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"],
                          capture_output=True, text=True, env=cli_env(), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"plan.toml: --ray-address: no Ray cluster answers at 127.0.0.1:{port}: Connection refused "
                                                "(start one with `ray start --head`, or check --ray-address / RAY_ADDRESS)"]
    assert not (tmp_path / "out").exists()


@needs_ray
@pytest.mark.reliability
def test_an_address_that_answers_http_is_one_line_at_once(tmp_path: Path) -> None:
    """Ray's dashboard port, or a model server's, given as the cluster (RAY_ADDRESS here): said
    at once in one line, not after ray.init's 60 s wait with Ray's native log lines on stderr."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Web(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Web)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(3)))],
                          run={"executor": "ray"})
        proc = subprocess.run([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], capture_output=True, text=True,
                              env={**cli_env(), "RAY_ADDRESS": address}, timeout=60)
    finally:
        server.shutdown()
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"plan.toml: RAY_ADDRESS: {address} answers HTTP (404), not as a Ray cluster does (Ray's dashboard, :8265, "
                                                "or a model server?): give the head node's address, HOST:6379 (ray:// HOST:10001 for Ray Client)"]
    assert not (tmp_path / "out").exists()


@needs_ray
@pytest.mark.reliability
def test_a_ray_instance_started_for_the_run_holds_no_api_key(tmp_path: Path) -> None:
    """The GCS, raylet and workers a driver starts inherit its environment and are dumpable:
    the plan's key variables are kept out of them, and back in the driver's environment after."""
    secret = "sk-RAYHIDDEN-0123456789abcdef"
    script = """
import os, sys
from evaltui.engine.ray.connect import connect, disconnect
connect(None, hide=["EVALTUI_TEST_KEY"])
import ray

@ray.remote
def scan(secret, driver):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(pid) != driver and secret.encode() in open(f"/proc/{pid}/environ", "rb").read():
                found.append(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0].decode(errors="replace"))
        except OSError:
            pass
    return found

print("restored", os.environ.get("EVALTUI_TEST_KEY") == sys.argv[1])
print("holding it:", ray.get(scan.remote(sys.argv[1], os.getpid())))
disconnect()
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "EVALTUI_TEST_KEY": secret}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", script, secret], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.stdout.strip().splitlines() == ["restored True", "holding it: []"], proc.stderr[-2000:]


def test_a_ray_address_for_a_local_run_is_refused(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(3)))])
    assert main([str(plan), "--no-ui", "--ray-address", "10.0.0.5:6379"]) == 2
    assert not (tmp_path / "out").exists()


def test_a_local_run_never_imports_ray(tmp_path: Path) -> None:
    """The local path's start-up and speed owe nothing to the extra: `ray` is not imported."""
    plan = write_plan(tmp_path, models=[{"abbr": "m", "type": "lightllm", "url": "sim://", "max_workers": 4}],
                      datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(5)))])
    script = (
        "import sys\n"
        "from evaltui.cli import main\n"
        f"code = main([{str(plan)!r}, '--no-ui'])\n"
        "print('exit', code, 'ray imported' if 'ray' in sys.modules else 'ray not imported')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "exit 0 ray not imported", proc.stderr


def test_a_model_runs_on_as_many_actors_as_its_datasets_have_shards() -> None:
    """At most max_workers of them (each holds at least one unit), and one for a model whose
    limits hold only within one process (a rate, tokens_per_minute, per-url caps, adaptive)."""
    plan = Plan.model_validate({
        "models": [{"abbr": "a", "type": "lightllm", "url": "http://h/generate", "max_workers": 3},
                   {"abbr": "b", "type": "lightllm", "url": "http://h/generate", "rate_per_worker": 5.0},
                   {"abbr": "c", "type": "lightllm", "url": ["http://h/generate", "http://g/generate"], "concurrency": "adaptive"}],
        "datasets": [{"abbr": "d", "path": "d.jsonl", "prompt": "{q}", "target": "{a}", "shards": 4},
                     {"abbr": "e", "path": "e.jsonl", "prompt": "{q}", "target": "{a}"}],
    })
    if ray is None:
        pytest.skip("Ray is not installed (pip install -e '.[ray]')")
    from evaltui.engine.ray.model import actors_for

    assert [actors_for(plan, m) for m in plan.models] == [3, 1, 1]


@needs_ray
@pytest.mark.reliability
@pytest.mark.crash
def test_token_limit_holds_across_an_actor_that_dies(tmp_path: Path, sim_factory, cluster: str) -> None:
    """One sample, 3 epochs, token_limit 20, ~13 tokens a reply: locally two epochs are answered
    and the third fails token-limit. The actor SIGKILLed after the first answer: its successor is
    told the tokens the sample spent (the driver keeps each answer's count), so the same holds."""
    rows = arithmetic(1)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(accuracy=1.0, latency=0.3)}))
    dataset = gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), epochs=3, token_limit=20, score_on_error=True)
    plan = write_plan(tmp_path, models=[chat("m", sim.url, max_workers=3, generation_kwargs=SAMPLING)], datasets=[dataset], run={"executor": "ray"})
    before = actor_pids()
    killed: list[int] = []

    def kill_after_the_first_answer(event: ev.Event) -> None:
        if isinstance(event, ev.SampleFinished) and not killed:
            mine = sorted(actor_pids() - before)
            if mine:
                os.kill(mine[0], signal.SIGKILL)
                killed.append(mine[0])

    events: list[ev.Event] = []
    runner = Runner(load_plan(plan), sink=lambda e: (events.append(e), kill_after_the_first_answer(e)))
    assert run_with(runner) == 0
    assert killed, "no actor was found to kill"
    assert [e.message for e in of_type(events, ev.Notice) if "Ray actor died" in e.message]
    failed = of_type(events, ev.SampleFailed)
    assert [f.error.type for f in failed] == ["token-limit"], [(f.epoch, f.error.type, f.error.message) for f in failed]
    assert len(of_type(events, ev.SampleFinished)) == 2


@needs_ray
def test_a_dead_replica_is_said_ejected_once_whatever_the_actors(tmp_path: Path, sim_factory, cluster: str) -> None:
    """Two actors (shards = 2) each find the dead replica for themselves: one line says it."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/generate"
    rows = arithmetic(40)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), models={"m": ModelProfile(latency=0.02)}))
    model = lightllm("m", sim.url, max_workers=8, retry=0)
    model["url"] = [dead, model["url"]]
    plan = write_plan(tmp_path, models=[model], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", rows), shards=2)], run={"executor": "ray"})
    code, events, _ = run_plan(plan)
    assert code == 0
    # an ejection is said once (runlog: `ejected` with no failed probe); on a slow machine the run
    # outlives the first probe, whose failure keeps it ejected (failed_probes = 1): no second ejection
    ejected = [e for e in of_type(events, ev.ReplicaStateChanged) if e.url == dead and e.state == "ejected" and not e.failed_probes]
    assert len(ejected) == 1, ejected
    assert len(of_type(events, ev.SampleFinished)) == 40
