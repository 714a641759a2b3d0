"""SIGKILL at two dozen seeded random moments, a plain re-run after each: the same predictions and
results as an uninterrupted run, no duplicate sample, every status file readable (SPEC §5, §6).

Runs are forked from one long-lived process that has imported evaltui already (tests/crashkid.py),
so each of the ~50 runs costs its own work only. Which phase a kill landed in is read from the
files after the kill (a killed process writes nothing more), and the test insists that every
phase named in issue 8 was hit: inference, a checkpoint line half-written, scoring, the summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan
from workfiles import checkpoint_entries, index_of, read_strict_json

from evaltui.sim import AnswerKey, ModelProfile, SimConfig

pytestmark = [pytest.mark.reliability, pytest.mark.crash]

HERE = Path(__file__).resolve().parent
SEED = 20261202
KILLS = 24
MAX_CYCLES = 40  # a kill at a random time may come after the run has ended: then it does not count
MAX_WORKERS = 8
SIZES = {"d": 40, "s": 45}  # "s" is split in 3 shards
SHARDS = {"d": 1, "s": 3}
NAMED_PHASES = ("inference", "checkpoint line", "scoring", "summary")
RUN_DEADLINE = 60.0


class ForkServer:
    """The test's side of tests/crashkid.py: start a run, kill it, wait for it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(HERE / "crashkid.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        self.pid: int | None = None

    def _message(self, timeout: float) -> dict[str, Any] | None:
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            if select.select([self._out], [], [], left)[0]:
                chunk = os.read(self._out, 4096)
                if not chunk:
                    raise AssertionError(f"the fork server died; see {self.tail()}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def start(self, plan: Path, work_dir: Path, hold: dict[str, Any] | None = None) -> None:
        argv = [str(plan), "--no-ui", "--work-dir", str(work_dir)]
        self._in.write(json.dumps({"argv": argv, "log": str(self.log), "hold": hold}).encode() + b"\n")
        self._in.flush()
        msg = self._message(RUN_DEADLINE)
        assert msg is not None, "the fork server did not start a run"
        self.pid = msg["pid"]

    def poll(self, timeout: float = 0.0) -> int | None:
        """The run's exit code once it has ended (-9 when killed), else None."""
        msg = self._message(timeout)
        if msg is None:
            return None
        assert msg["pid"] == self.pid
        self.pid = None
        return int(msg["exit"])

    def wait(self, timeout: float = RUN_DEADLINE) -> int:
        code = self.poll(timeout)
        if code is None:
            self.kill()
            raise AssertionError(f"a run did not end within {timeout:g} s; see {self.tail()}")
        return code

    def kill(self) -> int:
        """SIGKILL the run; its exit code (0 when it had just ended by itself)."""
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):  # it ended, and was reaped, a moment ago
            os.kill(self.pid, signal.SIGKILL)
        return self.wait(10.0)

    def tail(self, lines: int = 12) -> str:
        """The log's last lines, for a failure's message: CI keeps the message, not the file."""
        try:
            last = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            last = []
        return f"{self.log}, which ends:\n" + "\n".join(last)

    def run(self, plan: Path, work_dir: Path) -> int:
        self.start(plan, work_dir)
        return self.wait()

    def close(self) -> None:
        if self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
        self._in.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# --------------------------------------------------------------------------- reading a work dir
def checkpoints(wd: Path) -> list[Path]:
    return sorted((wd / "predictions" / "m").glob("tmp_*.jsonl"))


def check_invariants(wd: Path, datasets: dict[str, int] = SIZES) -> None:
    """What must hold at any moment, killed or not: readable status files, no duplicate sample."""
    statuses = list((wd / "infer_status").rglob("*.json"))
    for path in statuses:
        data = json.loads(path.read_text())
        assert data["status"] in ("pending", "running", "done", "fail"), (path, data)
        assert 0 <= data["completed"] + data["failed"] <= data["total"], (path, data)
    for path in checkpoints(wd):
        indices = [index_of(e) for e in checkpoint_entries(path)]
        assert len(indices) == len(set(indices)), f"duplicate sample index in {path}"
    for ds in datasets:
        pred = wd / "predictions" / "m" / f"{ds}.json"
        if pred.exists():
            read_strict_json(pred)


def outcome(wd: Path, datasets: dict[str, int] = SIZES) -> dict[str, Any]:
    """Predictions and results; a result's `urls` (which server answered: a reference run may
    have had a server of its own) left out."""
    files = {f"{kind}/{ds}": read_strict_json(wd / kind / "m" / f"{ds}.json") for kind in ("predictions", "results") for ds in datasets}
    for ds in datasets:
        files[f"results/{ds}"].pop("urls", None)
    return files


def phase_at_kill(wd: Path) -> str:
    """Where the killed run was, read from what it left (a SIGKILLed process writes nothing more)."""
    if any(p.stat().st_size and not p.read_bytes().endswith(b"\n") for p in checkpoints(wd)):
        return "checkpoint line"
    if any((wd / "summary").glob(".*.tmp")):
        return "summary"
    if any((wd / "results").rglob(".*.tmp")):
        return "scoring"
    inferred = scored = 0
    for ds, n in SHARDS.items():
        names = [f"{ds}.json"] if n == 1 else [f"{ds}_{k}.json" for k in range(n)]
        done = all((wd / "infer_status" / "m" / name).exists() and json.loads((wd / "infer_status" / "m" / name).read_text())["status"] == "done" for name in names)
        if done and (wd / "predictions" / "m" / f"{ds}.json").exists():
            inferred += 1
            scored += (wd / "results" / "m" / f"{ds}.json").exists()
    if inferred > scored:
        return "scoring"
    if scored == len(SIZES):
        return "after scoring"
    if any(checkpoint_entries(p) for p in checkpoints(wd)):
        return "inference"
    return "start-up"


def lines_written(wd: Path) -> int:
    return sum(len(checkpoint_entries(p)) for p in checkpoints(wd))


def kill_when(fs: ForkServer, ready: Callable[[], bool]) -> bool:
    """SIGKILL the run once `ready()` holds; False when it ended first."""
    end = time.monotonic() + RUN_DEADLINE
    while time.monotonic() < end:
        code = fs.poll(0.001)
        if code is not None:
            assert code == 0, f"a run failed on its own (exit {code}); see {fs.tail()}"
            return False
        if ready():
            code = fs.kill()
            assert code in (0, -signal.SIGKILL), f"a run failed on its own (exit {code}); see {fs.tail()}"
            return code != 0
    fs.kill()
    raise AssertionError("the run neither reached its kill point nor ended in time")


def test_sigkill_at_random_moments_then_rerun_matches_an_uninterrupted_run(tmp_path: Path, sim_factory) -> None:
    rng = random.Random(SEED)
    key = AnswerKey()
    data = {}
    for ds, n in SIZES.items():
        rows = arithmetic(n, prefix=ds.upper())
        for r in rows:
            key.add_gen(r["question"], r["answer"])
        data[ds] = write_jsonl(tmp_path / f"{ds}.jsonl", rows)
    sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.7, latency=0.002, jitter=0.004)}))
    plan = write_plan(
        tmp_path,
        models=[lightllm("m", sim.url, max_workers=MAX_WORKERS)],
        datasets=[gsm_dataset(ds, data[ds], shards=SHARDS[ds]) for ds in SIZES],
        run={"heartbeat_interval": 0.5, "watch_interval": 0.5},
    )
    total = sum(SIZES.values())
    fs = ForkServer(tmp_path / "runs.log")
    try:
        started = time.monotonic()
        assert fs.run(plan, tmp_path / "reference") == 0
        reference_seconds = time.monotonic() - started
        reference = outcome(tmp_path / "reference")

        # Seeded and shuffled: a kill at a random time since start, at a random number of
        # checkpoint lines, inside a random checkpoint line, while a result or the summary is renamed.
        kinds = ["time"] * 8 + ["lines"] * 4 + ["tear"] * 4 + ["results"] * 4 + ["summary"] * 4
        rng.shuffle(kinds)
        span = reference_seconds  # how long a whole run takes, as last seen (time kills fall within it)
        phases: Counter[str] = Counter()
        landed: list[str] = []
        for i in range(MAX_CYCLES):
            if sum(phases.values()) >= KILLS:
                break
            kind = kinds[i % len(kinds)]
            wd = tmp_path / f"crash{i:02d}"
            sim.reset_stats()
            hold: dict[str, Any] | None = None
            if kind == "time":
                at = time.monotonic() + rng.uniform(0.0, span)
                def ready(at=at) -> bool:
                    return time.monotonic() >= at  # type: ignore[misc]
            elif kind == "lines":
                n = rng.randrange(1, total)
                def ready(n=n, wd=wd):
                    return lines_written(wd) >= n  # type: ignore[misc]
            elif kind == "tear":
                hold = {"tear_line": rng.randrange(2, total + 1)}  # line 1 is the version header of the first checkpoint
                def ready(wd=wd):
                    return any(p.stat().st_size and not p.read_bytes().endswith(b"\n") for p in checkpoints(wd))  # type: ignore[misc]
            else:
                hold = {"replace": kind}
                def ready(wd=wd, kind=kind):
                    return any((wd / kind).rglob(".*.tmp"))  # type: ignore[misc]
            started = time.monotonic()
            fs.start(plan, wd, hold)
            if kill_when(fs, ready):
                phase = phase_at_kill(wd)
                phases[phase] += 1
                check_invariants(wd)
            else:
                phase = "(ended first)"
                span = time.monotonic() - started
            landed.append(f"{kind}: {phase}")
            assert fs.run(plan, wd) == 0, f"the re-run after kill {i} ({kind}) did not finish; see {fs.tail()}"
            check_invariants(wd)
            assert outcome(wd) == reference, f"kill {i} ({kind}): the re-run's predictions or results differ"
            # A kill loses at most the requests in flight: nothing finished is asked again.
            attempts = sim.stats.attempts
            assert max(attempts.values()) <= 2, f"kill {i} ({kind}): a sample was sent more than twice"
            assert sum(attempts.values()) <= total + MAX_WORKERS, f"kill {i} ({kind}): finished samples were sent again"
    finally:
        fs.close()
    print(f"\ncrash suite: {sum(phases.values())} kills by phase {dict(phases)}; reference run {reference_seconds:.2f} s\n{landed}")
    assert sum(phases.values()) >= KILLS
    missing = [p for p in NAMED_PHASES if not phases[p]]
    assert not missing, f"no kill landed in {missing}: {dict(phases)}"


STORM_KILLS = 20
STORM = {"long": 600}  # at 20 ms a request and 4 workers, ~3 s of inference: the storm ends well before it


def test_a_storm_of_sigkills_over_one_long_run_ends_as_an_uninterrupted_run(tmp_path: Path, sim_factory) -> None:
    """One long run, killed with SIGKILL 20 times at seeded random moments since each restart
    (each kill lands before the run could end, most mid-inference), restarted at once each time,
    then let finish: its predictions and results are those of an uninterrupted run, with no
    sample twice in any checkpoint, and no more asked again than the requests in flight."""
    rng = random.Random(SEED + 14)
    rows = arithmetic(STORM["long"], prefix="L")
    key = AnswerKey()
    for r in rows:
        key.add_gen(r["question"], r["answer"])
    data = write_jsonl(tmp_path / "long.jsonl", rows)

    def plan_for(latency: float, name: str) -> tuple[Path, Any]:
        sim = sim_factory(SimConfig(answer_key=key, models={"m": ModelProfile(accuracy=0.7, latency=latency)}))
        model = lightllm("m", sim.url, max_workers=4)
        run = {"heartbeat_interval": 0.5, "watch_interval": 0.5}
        return write_plan(tmp_path, models=[model], datasets=[gsm_dataset("long", data, shards=2)], run=run, name=name), sim

    quick, _ = plan_for(0.0, "quick.toml")  # the same answers (latency changes when, not what)
    stormy, sim = plan_for(0.02, "storm.toml")
    fs = ForkServer(tmp_path / "storm.log")
    phases: Counter[str] = Counter()
    try:
        assert fs.run(quick, tmp_path / "reference") == 0
        reference = outcome(tmp_path / "reference", STORM)
        wd = tmp_path / "storm"
        for i in range(STORM_KILLS):
            fs.start(stormy, wd)
            ended = fs.poll(rng.uniform(0.05, 0.35))
            assert ended is None, f"run {i} ended (exit {ended}) before its kill: the storm must land mid-run; see {fs.tail()}"
            assert fs.kill() == -signal.SIGKILL, f"run {i} ended before its kill; see {fs.tail()}"
            phases[phase_at_kill(wd)] += 1
            check_invariants(wd, STORM)
        assert not (wd / "predictions" / "m" / "long.json").exists()  # still mid-run after the last kill
        assert fs.run(stormy, wd) == 0
        check_invariants(wd, STORM)
        assert outcome(wd, STORM) == reference
    finally:
        fs.close()
    attempts = sim.stats.attempts
    print(f"\nkill storm: {STORM_KILLS} kills by phase {dict(phases)}; {sum(attempts.values())} requests for {STORM['long']} samples")
    assert phases["inference"] + phases["checkpoint line"] >= STORM_KILLS // 2, dict(phases)
    assert sum(attempts.values()) <= STORM["long"] + STORM_KILLS * 4  # at most the requests in flight lost per kill


def test_the_bundled_simulator_dies_with_a_killed_evaltui(tmp_path: Path) -> None:
    from conftest import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui", str(REPO / "sample_configs" / "demo.toml"), "--no-ui", "--work-dir", str(tmp_path / "w")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:  # bounded by the run itself (the demo ends) and the deadline
        if "simulator: listening on" in line or time.monotonic() > deadline:
            break
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    sim_pids = [int(p) for p in children if "evaltui.sim" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(sim_pids) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    end = time.monotonic() + 10
    while time.monotonic() < end and _alive(sim_pids[0]):
        time.sleep(0.02)
    assert not _alive(sim_pids[0]), "the simulator outlived the evaltui that started it"


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for init to reap it."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
