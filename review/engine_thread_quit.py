"""UI mode: the engine on its own thread (ui/engine_thread.py). Rescore a plan (results deleted),
quit (EngineThread.close) while the scoring process has a backlog. Prints: run finished ok?,
.tmp left in results/, the scoring child alive afterwards.  Usage: engine_thread_quit.py PLANDIR"""
import os, re, shutil, sys, time
from pathlib import Path

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.ui.engine_thread import EngineThread

plan_dir = Path(sys.argv[1])
out = plan_dir / "out"
shutil.rmtree(out / "results", ignore_errors=True)
pids: list[int] = []
def sink(e: ev.Event) -> None:
    if isinstance(e, ev.Notice) and (m := re.search(r"process of its own \(pid (\d+)\)", e.message)):
        pids.append(int(m.group(1)))
runner = Runner(load_plan(plan_dir / "plan.toml"), sink=sink)
engine = EngineThread(runner)
job = engine.run()
end = time.monotonic() + 30
while not pids and time.monotonic() < end:
    time.sleep(0.01)
time.sleep(0.3)
t0 = time.monotonic()
engine.close()
print(f"pid seen={bool(pids)} close took {time.monotonic() - t0:.2f}s rc={job.result() if job.done() else 'not done'}")
time.sleep(0.2)
alive = bool(pids) and os.path.exists(f"/proc/{pids[0]}") and "State:\tZ" not in Path(f"/proc/{pids[0]}/status").read_text()
print(f"tmp_left={len(list((out / 'results').rglob('.*.tmp')))} results={len(list((out / 'results').rglob('*.json')))} child_alive={alive}")
