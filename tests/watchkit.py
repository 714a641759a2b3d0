"""What the `evaltui watch` tests share: a writer in another process, a follower run to its end
(bounded), and a picture of a work dir's files to prove that watching changed none of them."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan

from evaltui.engine.follow.follower import Follower, open_view
from evaltui.engine.stream import events as ev

FIXTURES = Path(__file__).parent / "fixtures" / "opencompass"
REPO = Path(__file__).resolve().parents[1]
WAIT = 60.0  # no wait in these tests lasts longer


def tree(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and folder below `root`: size, mtime (ns) and a hash of its bytes."""
    out: dict[str, tuple[int, int, str]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            out[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns, digest)
    return out


def watch_plan(folder: Path, sim_url: str, *, records: tuple[int, ...] = (60, 60), max_workers: int = 2, **run: Any) -> Path:
    """One model over arithmetic datasets `d0`, `d1`, … of these sizes, slow enough to be watched going."""
    sets = []
    for k, n in enumerate(records):
        data = write_jsonl(folder / f"d{k}.jsonl", arithmetic(n, prefix=f"D{k}-"))
        sets.append(gsm_dataset(f"d{k}", data, fail_on_error=0.5))
    return write_plan(folder, models=[lightllm("m", sim_url, max_workers=max_workers)], datasets=sets, run=run or None)


def start_writer(plan: Path, log: Path) -> subprocess.Popen[bytes]:
    """`evaltui PLAN --no-ui` in a process of its own, as cron or another shell would start it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "evaltui", str(plan), "--no-ui"], stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)


def wait_for(what: Callable[[], bool], timeout: float = WAIT, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout} s")
        time.sleep(step)


def follow_to_end(root: Path, *, interval: float = 0.1, during: Callable[[Follower], Any] | None = None) -> tuple[int, list[ev.Event], Follower]:
    """Follow `root` until its run is over (at most WAIT seconds); `during(follower)` runs
    beside it, every interval, until then."""
    follower = Follower(open_view(root), until_over=True, interval=interval, idle_interval=interval)
    events: list[ev.Event] = []
    follower.subscribe(events.append)

    async def main() -> int:
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                if during is not None:
                    tg.start_soon(_beside, follower, during, interval)
                code = await follower.run()
                tg.cancel_scope.cancel()
            return code

    return anyio.run(main), events, follower


async def _beside(follower: Follower, during: Callable[[Follower], Any], interval: float) -> None:
    while True:
        during(follower)
        await anyio.sleep(interval)


def fixture_copy(name: str, tmp_path: Path, *, fresh: bool = False) -> Path:
    """A copy of an OpenCompass fixture run; `fresh`: its heartbeat beats now (a run in progress),
    else every file is dated when the run was (long ended)."""
    (source,) = (FIXTURES / name).iterdir()
    root = tmp_path / name / source.name
    shutil.copytree(source, root)
    if fresh:
        (root / "infer_heartbeat").write_text(datetime.now().isoformat())  # naive local time, as OpenCompass writes it
    else:
        then = datetime.strptime(source.name, "%Y%m%d_%H%M%S").timestamp() + 300
        for folder, _, files in os.walk(root):
            for name in files:
                os.utime(Path(folder) / name, (then, then))
    return root


def of(events: list[ev.Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
