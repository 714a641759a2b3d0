"""`evaltui watch`'s engine side: the follower reads a work dir another process writes and says
it in the engine's own events — a run followed to its end from another process, a finished run,
a killed one — never writing a byte there nor taking its lock."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from planmaker import arithmetic, gsm_dataset, key_for, lightllm, run_plan, write_jsonl, write_plan
from watchkit import follow_to_end, of, start_writer, tree, wait_for, watch_plan

from evaltui.engine.disk import lockstate
from evaltui.engine.disk.checkpoint import scan_checkpoint
from evaltui.engine.disk.lockstate import local_filesystem, lock_holder
from evaltui.engine.disk.runlog import event_line
from evaltui.engine.disk.workdir import NotAWorkDir, WorkDir, WorkDirBusy
from evaltui.engine.follow.follower import Follower, open_view
from evaltui.engine.follow.tail import AppendedLines
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import PairStatus
from evaltui.plan import load_plan, select
from evaltui.sim import SimConfig
from evaltui.sim.config import Faults, ModelProfile


def _slow_sim(sim_factory, rows, latency: float = 0.04, **faults):
    return sim_factory(SimConfig(answer_key=key_for(rows), default=ModelProfile(latency=latency), faults=Faults(**faults)))


def test_a_finished_run_is_told_as_the_run_told_it(tmp_path: Path, sim_factory) -> None:
    """Scores, counts, statuses and each failed sample with its error, read back from the files."""
    rows = arithmetic(30)
    sim = sim_factory(SimConfig(answer_key=key_for(rows), faults=Faults(rate_400=0.2, seed=3)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    plan = write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data, fail_on_error=0.9), gsm_dataset("b", data, shards=2, fail_on_error=0.9)])
    code, _, runner = run_plan(plan)
    work = runner.workdir.root
    before = tree(work)

    followed, events, follower = follow_to_end(work)

    assert followed == code == 0
    for key, p in runner.state.pairs.items():
        q = follower.state.pairs[key]
        assert (q.status, q.completed, q.failed, q.total, q.score) == (p.status, p.completed, p.failed, p.total, p.score)
    assert sorted((f.model, f.dataset, f.sample_index, f.error) for f in follower.state.failures) == sorted(
        (f.model, f.dataset, f.sample_index, f.error) for f in runner.state.failures
    )
    assert follower.state.failures, "the faults made some samples fail"
    (finished,) = of(events, ev.RunFinished)
    assert finished.leaderboard.rows() == runner.leaderboard().rows() and not finished.interrupted
    assert tree(work) == before


def test_a_run_of_some_datasets_is_watched_as_that_run(tmp_path: Path, sim_factory) -> None:
    """`--datasets b`: the plan snapshot names every dataset, the run took up one; the watcher
    shows the run's rows and table (b, and an Average of it), not the plan's."""
    rows = arithmetic(8)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    full = load_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data), gsm_dataset("b", data)]))
    code, _, runner = run_plan(select(full, None, ["b"]), snapshot_of=full)
    assert code == 0

    followed, events, follower = follow_to_end(runner.workdir.root)

    assert followed == 0 and list(follower.state.pairs) == [("m", "b")] and follower.pairs == [("m", "b")]
    (finished,) = of(events, ev.RunFinished)
    assert finished.leaderboard.rows() == runner.leaderboard().rows()
    assert finished.leaderboard.average("m") == 100.0


def test_follows_a_run_in_another_process_from_before_it_begins_to_its_end(tmp_path: Path, sim_factory) -> None:
    """The follower waits in the empty work dir, the writer takes its lock all the same, and the
    counts move look by look until the leaderboard."""
    rows = arithmetic(60, prefix="D0-") + arithmetic(60, prefix="D1-")
    sim = _slow_sim(sim_factory, rows)
    plan = watch_plan(tmp_path, sim.url)
    work = tmp_path / "out"
    work.mkdir()
    seen: list[tuple[int, int]] = []
    writer: list[subprocess.Popen[bytes]] = []

    def sample(follower: Follower) -> None:
        if not writer:
            writer.append(start_writer(plan, tmp_path / "writer.log"))  # once the follower is waiting
        c, f, n = follower.state.totals()
        if follower.state.live and n:
            seen.append((c + f, n))

    code, events, follower = follow_to_end(work, during=sample)

    assert writer[0].wait(timeout=60) == 0, (tmp_path / "writer.log").read_text()
    moving = {done for done, total in seen if 0 < done < total}
    assert len(moving) >= 3, seen  # progress seen moving, not only its end
    assert code == 0
    assert [n.message for n in of(events, ev.Notice)][0].startswith("waiting for a run to begin")
    scored = {(e.model, e.dataset): e.score for e in of(events, ev.DatasetScored)}
    assert scored == {("m", "d0"): 100.0, ("m", "d1"): 100.0}
    assert follower.state.totals() == (120, 0, 120)
    assert len(of(events, ev.SampleFinished)) > 60  # most answers arrived one by one, as the run wrote them


def test_a_killed_run_shows_what_finished_and_that_it_stopped(tmp_path: Path, sim_factory) -> None:
    """Joined while it runs, it is said to be followed (not started, nor resumed); once killed,
    what it left and its last heartbeat's age, and no dataset is said to start."""
    rows = arithmetic(40, prefix="D0-") + arithmetic(400, prefix="D1-")
    sim = _slow_sim(sim_factory, rows, latency=0.05)
    plan = watch_plan(tmp_path, sim.url, records=(40, 400), heartbeat_timeout=1.0, heartbeat_interval=0.2)
    work = WorkDir(tmp_path / "out")
    writer = start_writer(plan, tmp_path / "writer.log")
    d1_answered = lambda: sum(1 for line in scan_checkpoint(work.checkpoint_file("m", "d1")) if line.ok)  # noqa: E731 - not the version line
    try:  # killed once d0 is scored and d1 under way (its 400 samples take 10 s at 2 in flight)
        wait_for(lambda: work.result_file("m", "d0").exists() and work.checkpoint_file("m", "d1").exists() and d1_answered() > 5)
        joined = Follower(open_view(work.root))
        joined_events: list[ev.Event] = []
        joined.subscribe(joined_events.append)
        joined.look()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    time.sleep(1.2)  # the heartbeat is stale by now
    before = tree(work.root)

    code, events, follower = follow_to_end(work.root)

    assert code == 1
    (finished,) = of(events, ev.RunFinished)
    assert finished.interrupted
    d0, d1 = follower.state.pairs[("m", "d0")], follower.state.pairs[("m", "d1")]
    assert d0.status == PairStatus.SCORED and d0.score == 100.0
    assert d1.status == PairStatus.STOPPED and 5 < d1.completed < 400  # what it had done, resumable
    (stopped,) = [n for n in of(events, ev.Notice) if n.level == "warning"]
    assert stopped.message.startswith("the run stopped (last heartbeat ") and "with 1 dataset unfinished: m/d1" in stopped.message
    assert stopped.short.startswith("stopped ") and stopped.short.endswith(" ago: 1 dataset unfinished")
    assert not of(events, ev.DatasetStarted)  # a dead run's statuses still say running: nothing started
    (d1_joined,) = [e for e in of(joined_events, ev.DatasetStarted) if e.dataset == "d1"]
    assert d1_joined.joined and event_line(d1_joined) == f"m/d1: following: {d1_joined.total - d1_joined.remaining} of 400 done"
    assert follower.state.heartbeat_age() > 1.0
    assert tree(work.root) == before


def test_a_killed_run_is_said_stopped_once_its_beats_are_missed_with_its_own_time_and_summary(tmp_path: Path, sim_factory) -> None:
    """On a local filesystem a lock nobody holds, beside a heartbeat that missed two beats, is a
    run nobody runs: a kill -9 is said stopped at the first look then (no heartbeat_timeout to
    wait), its time runs to the last file it wrote (its one heartbeat beat at its start), and a
    summary older than it is not its own."""
    rows = arithmetic(40, prefix="D0-") + arithmetic(400, prefix="D1-")
    sim = _slow_sim(sim_factory, rows, latency=0.05)
    plan = watch_plan(tmp_path, sim.url, records=(40, 400), heartbeat_timeout=120.0, heartbeat_interval=60.0)
    work = WorkDir(tmp_path / "out")
    if not local_filesystem(work.root.parent):
        pytest.skip("the work dir is on a filesystem whose locks /proc/locks may not show")
    writer = start_writer(plan, tmp_path / "writer.log")
    try:
        wait_for(lambda: sum(1 for line in scan_checkpoint(work.checkpoint_file("m", "d0")) if line.ok) > 30)  # ~0.75 s of answers
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    began = work.plan_file.stat().st_mtime_ns / 1e9
    older = work.root / "summary" / "summary_20200101_000000.csv"  # a run before it (set aside by --fresh) wrote it
    older.parent.mkdir(exist_ok=True)
    older.write_text("dataset,version,metric,mode,m\n")
    os.utime(older, (began - 60, began - 60))
    missed = time.time() - 2 * 60.0 - 3  # two beats of heartbeat_interval = 60 missed, and the slack
    os.utime(work.heartbeat_file, (missed, missed))
    follower = Follower(open_view(work.root))
    events: list[ev.Event] = []
    follower.subscribe(events.append)

    follower.look()

    assert not follower.state.live and follower.state.finished is not None and follower.state.finished.interrupted
    said = [n.message for n in of(events, ev.Notice)]
    assert said[0] == "watching evaltui work dir: a run that stopped with work left (killed or interrupted): no process holds its lock", said
    last_answer = work.checkpoint_file("m", "d0").stat().st_mtime_ns / 1e9
    assert follower.state.finished.elapsed + 1e-3 >= last_answer - began > 0.5  # (1e-3: floats of mtimes rounded apart)
    assert follower.state.elapsed() + 0.05 >= last_answer - began  # what the strip says: the run's time, not nothing
    assert follower.state.pairs[("m", "d0")].status == PairStatus.STOPPED
    assert follower.retry_advice.startswith("resume: `evaltui PLAN.toml` resumes the run, running what is unfinished")
    assert follower.state.finished.summary_files == {}
    (started,) = of(events, ev.RunStarted)
    assert event_line(started).startswith("run started at ")


def test_a_run_stopped_with_ctrl_c_is_watched_later_as_stopped(tmp_path: Path, sim_factory) -> None:
    """Ctrl-C writes the unfinished shard `pending` (SPEC's statuses); followed afterwards its
    dataset, part done, is `stopped` (r/R say how to resume it), not `pending`."""
    rows = arithmetic(60, prefix="D0-")
    sim = _slow_sim(sim_factory, rows, latency=0.1)
    plan = watch_plan(tmp_path, sim.url, records=(60,))
    work = WorkDir(tmp_path / "out")
    writer = start_writer(plan, tmp_path / "writer.log")
    try:
        wait_for(lambda: sum(1 for line in scan_checkpoint(work.checkpoint_file("m", "d0")) if line.ok) > 5)
    finally:
        writer.send_signal(signal.SIGINT)
        assert writer.wait(timeout=60) == 130
    _, _, follower = follow_to_end(work.root)
    assert follower.state.finished is not None and follower.state.finished.interrupted
    pair = follower.state.pairs[("m", "d0")]
    assert 0 < pair.completed < 60 and pair.status == PairStatus.STOPPED
    assert follower.retry_advice.startswith("resume: `evaltui PLAN.toml` resumes the run")


def test_a_free_lock_does_not_end_a_run_whose_heartbeat_is_fresh(tmp_path: Path, sim_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run on another host writing over NFS holds a lock this host's /proc/locks does not show:
    while its heartbeat is fresh and its log has not said it finished, it is live."""
    rows = arithmetic(6)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    _, _, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data)]))
    work = runner.workdir
    assert lock_holder(work.root / ".evaltui.lock") in (0, None)  # nobody here holds it
    mounts = tmp_path / "mountinfo"  # the work dir on NFS, as /proc/self/mountinfo would say
    mounts.write_text(f"36 1 0:51 / {os.path.realpath(tmp_path)} rw,relatime - nfs4 server:/export rw,vers=4.2\n")
    monkeypatch.setattr(lockstate, "PROC_MOUNTINFO", mounts)
    assert not local_filesystem(work.root)

    def log(event: ev.Event) -> None:
        with open(work.logs_dir / "run.log", "a", encoding="utf-8") as f:
            f.write(f"{datetime.now().isoformat(timespec='seconds')} {event_line(event)}\n")

    log(ev.RetryStarted((("m", "a"),)))  # the other host's session takes it up again
    work.beat()
    follower = Follower(open_view(work.root))
    follower.look()
    assert follower.state.live and follower.state.finished is None
    assert follower.retry_advice == "retry from the session that runs it, or `evaltui PLAN.toml` after it ends"  # it would be refused now
    log(ev.RunFinished(0, False))
    follower.look()
    assert not follower.state.live and follower.state.finished is not None
    assert follower.retry_advice.startswith("retry: `evaltui PLAN.toml` resumes the run")


def test_the_lock_stays_free_for_the_writer_while_watching(tmp_path: Path, sim_factory) -> None:
    rows = arithmetic(10)
    sim = sim_factory(SimConfig(answer_key=key_for(rows)))
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    _, _, runner = run_plan(write_plan(tmp_path, models=[lightllm("m", sim.url)], datasets=[gsm_dataset("a", data)]))
    work = runner.workdir
    follower = Follower(open_view(work.root))
    stop = threading.Event()

    def keep_looking() -> None:
        while not stop.is_set():
            follower.look()

    looker = threading.Thread(target=keep_looking)
    looker.start()
    try:
        for _ in range(50):
            fd = work.lock()  # raises WorkDirBusy if the follower held it
            os.close(fd)
    finally:
        stop.set()
        looker.join(timeout=10)


def test_lock_holder_is_read_from_proc_locks_without_taking_the_lock(tmp_path: Path) -> None:
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks on this system")
    lock = tmp_path / ".evaltui.lock"
    assert lock_holder(lock) == 0  # no lock file: nobody
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX);"
         " os.write(fd, str(os.getpid()).encode()); print('held', flush=True); time.sleep(60)", str(lock)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        assert lock_holder(lock) == holder.pid
        with pytest.raises(WorkDirBusy):
            WorkDir(tmp_path).lock()
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert lock_holder(lock) == 0
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free indeed
    finally:
        os.close(fd)
    assert lock_holder(lock, proc_locks=tmp_path / "no-such-table") is None  # cannot tell: the heartbeat decides


def test_a_run_in_another_pid_namespace_is_not_said_stopped(tmp_path: Path) -> None:
    """/proc/locks shows only the locks of the reader's pid namespace: a watcher in a container
    beside the run (here `unshare --pid`) sees the run's lock free. With the heartbeat fresh it
    cannot tell (None: the heartbeat decides); once two beats are missed, nobody (0)."""
    work = WorkDir(tmp_path / "w")
    work.root.mkdir()
    if not local_filesystem(work.root):
        pytest.skip("the work dir is on a filesystem whose locks /proc/locks may not show")
    script = "import sys; from pathlib import Path; from evaltui.engine.disk.lockstate import local_filesystem, run_holder; r = Path(sys.argv[1]); print(run_holder(r, local_filesystem(r), 5.0))"

    def seen_from_another_namespace() -> str:
        proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", script, str(work.root)],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        if proc.returncode != 0 and "unshare" in proc.stderr:
            pytest.skip(f"no pid namespace can be made here: {proc.stderr.strip()}")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    fd = work.lock()
    try:
        work.beat()
        assert lockstate.run_holder(work.root, True, 5.0) == os.getpid()  # in this namespace the table shows it
        assert seen_from_another_namespace() == "None"
        then = time.time() - 13
        os.utime(work.heartbeat_file, (then, then))
        assert seen_from_another_namespace() == "0"
    finally:
        os.close(fd)


def test_a_free_lock_tells_only_on_a_filesystem_this_kernel_alone_writes(tmp_path: Path) -> None:
    """The deepest mount holding the path decides (the last one mounted on a point); escaped spaces read."""
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "40 22 0:50 / /mnt/shared rw - nfs4 server:/x rw\n"
        "41 40 0:51 / /mnt/shared/scratch\\040space rw shared:3 - tmpfs tmpfs rw\n"
        "42 22 0:52 / /srv rw - tmpfs tmpfs rw\n"
        "43 22 0:53 / /srv rw - cifs //host/s rw\n"
    )
    said = {where: local_filesystem(Path(where), table) for where in ("/home/x", "/mnt/shared/run", "/mnt/shared/scratch space/run", "/mnt/sharedx", "/srv/run")}
    assert said == {"/home/x": True, "/mnt/shared/run": False, "/mnt/shared/scratch space/run": True, "/mnt/sharedx": True, "/srv/run": False}
    assert local_filesystem(tmp_path, tmp_path / "no-such-table") is False  # cannot tell: the heartbeat decides


class _Lines:
    """AppendedLines' pieces joined: the lines one call gives."""

    def __init__(self, path: Path):
        self.tail = AppendedLines(path)

    def read(self) -> list[bytes] | None:
        pieces = self.tail.pieces()
        return None if pieces is None else [line for piece in pieces for line in piece]


def test_appended_lines_hold_back_a_line_being_written_and_see_a_file_replaced(tmp_path: Path) -> None:
    path = tmp_path / "tmp_a.jsonl"
    tail = _Lines(path)
    assert tail.read() == []  # not there yet
    path.write_bytes(b'{"index":0}\n{"ind')
    assert tail.read() == [b'{"index":0}']
    with open(path, "ab") as f:
        f.write(b'ex":1}\n')
    assert tail.read() == [b'{"index":1}']
    assert tail.read() == []
    path.write_bytes(b"")  # cut shorter than what was read (or a new file in its place)
    assert tail.read() is None
    tail = _Lines(path)
    path.write_bytes(b'{"index":5}\n')
    assert tail.read() == [b'{"index":5}']
    other = tmp_path / "other"
    other.write_bytes(b'{"index":5}\n{"index":6}\n')
    os.replace(other, path)  # another file in its place (set aside by --fresh, started over)
    assert tail.read() is None


def test_appended_lines_come_in_pieces_and_a_line_may_span_them(tmp_path: Path, monkeypatch) -> None:
    import evaltui.engine.follow.tail as tail_module

    monkeypatch.setattr(tail_module, "PIECE", 8)
    path = tmp_path / "tmp_a.jsonl"
    path.write_bytes(b"0123456789abcdef\nab\ncd\nef\ngh\nij")
    pieces = AppendedLines(path).pieces()
    assert pieces is not None and list(pieces) == [[b"0123456789abcdef", b"ab", b"cd"], [b"ef", b"gh"]]  # 8 bytes a piece; "ij" held back


def test_a_folder_that_is_no_work_dir_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(NotAWorkDir, match="no such folder"):
        open_view(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotAWorkDir, match="notes.txt: a file, not a work dir's folder"):
        open_view(tmp_path / "notes.txt")
    with pytest.raises(NotAWorkDir, match="not a work dir"):
        open_view(tmp_path)
    outputs = tmp_path / "outputs" / "default"
    (outputs / "20250101_120000" / "predictions").mkdir(parents=True)
    with pytest.raises(NotAWorkDir, match="watch one of them, e.g. .*20250101_120000"):
        open_view(outputs)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert open_view(empty).kind == "evaltui"  # a run about to begin there


_PEAK = """
import sys
from pathlib import Path
from evaltui.engine.follow.evaltui_view import CheckpointTally

def kib(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))

tally = CheckpointTally(Path(sys.argv[1]))
before = kib("VmRSS:")
n = len(tally.read())
print(n, kib("VmHWM:") - before)
"""


def test_a_big_checkpoint_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    """Joining a run whose checkpoint is large reads it a few MB at a time: memory stays bounded
    by the piece, not the file (a 500 MB checkpoint once took a watcher to 1 GB)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc/self/status on this system")
    path = tmp_path / "tmp_a.jsonl"
    answer = "x" * 2000  # a long answer a line: few units, many bytes
    lines = 48_000  # ~96 MB
    with open(path, "wb") as f:
        f.write(b'{"evaltui_checkpoint": 1}\n')
        for start in range(0, lines, 1000):
            f.write(b"".join(b'{"index": %d, "prediction": "%s"}\n' % (i, answer.encode()) for i in range(start, start + 1000)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    counted, grew_kib = map(int, out.split())
    assert counted == lines
    assert grew_kib < 48 * 1024, f"reading a {path.stat().st_size >> 20} MB checkpoint took {grew_kib >> 10} MB more"
