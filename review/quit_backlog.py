"""Ctrl-C / SIGTERM while the scoring process has a backlog (every pair inferred, none scored:
a rescore). Prints: exit code, seconds from the signal to exit, a traceback?, .tmp files left in
results/, whether the scoring child outlived the run.  Usage: quit_backlog.py PLANDIR always|never INT|TERM"""
import os, re, signal, subprocess, sys, time, shutil
from pathlib import Path

plan_dir, choice = Path(sys.argv[1]), sys.argv[2]
group = sys.argv[3].endswith("PG")  # to the whole process group, as a terminal or `kill -- -PGID` does
sig = getattr(signal, "SIG" + sys.argv[3].removesuffix("PG"))
wt = Path(__file__).resolve().parents[1]
py = "/work/main/.venv/bin/python"
env = {**os.environ, "PYTHONPATH": str(wt)}
plan = plan_dir / "plan.toml"
text = plan.read_text()
text = re.sub(r'scorer_process = "\w+"\n', "", text).replace("[run]\n", f'[run]\nscorer_process = "{choice}"\n', 1)
plan.write_text(text)
out = plan_dir / "out"
if not (out / "predictions").is_dir():
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([py, "-m", "evaltui", str(plan), "--no-ui"], env=env, cwd=wt, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
shutil.rmtree(out / "results", ignore_errors=True)  # every pair inferred, none scored: all ready at once
proc = subprocess.Popen([py, "-m", "evaltui", str(plan), "--no-ui"], env=env, cwd=wt, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
child = None
lines = []
for line in proc.stdout:
    lines.append(line)
    if m := re.search(r"process of its own \(pid (\d+)\)", line):
        child = int(m.group(1)); break
    if choice == "never" and "scor" in line.lower():
        break
time.sleep(0.3)
t0 = time.monotonic()
os.killpg(proc.pid, sig) if group or sig == signal.SIGINT else proc.send_signal(sig)  # Ctrl-C hits the process group
rest, err = proc.communicate(timeout=60)
dt = time.monotonic() - t0
tmps = list((out / "results").rglob(".*.tmp"))
alive = child is not None and os.path.exists(f"/proc/{child}") and "State:\tZ" not in Path(f"/proc/{child}/status").read_text()
print(f"choice={choice} signal={sys.argv[3]} rc={proc.returncode} exit_after={dt:.2f}s traceback={'Traceback' in err} tmp_left={len(tmps)} "
      f"results={len(list((out / 'results').rglob('*.json')))} child_alive={alive}")
if err.strip():
    print("stderr tail:", err.strip().splitlines()[-3:])
print("warnings:", [l.strip()[:150] for l in rest.splitlines() if "warning" in l.lower() or "stopped" in l])
