"""One evaluation run in a process of its own, reporting what the load suite measures.

Run as `python tests/loadkid.py PLAN WORK_DIR`; prints one JSON line: the open file descriptors
before and after the run (counted in /proc/self/fd, in this process that ran it), the resident
memory just before it, the peak resident memory during it and the exit code. A process of its
own so the peak belongs to this run alone, not to whatever the test process did before.

The peak is the kernel's high-water mark (VmHWM), reset just before the run (clear_refs 5).
Not ru_maxrss: that one survives exec, so it would report the forking test process's size.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def main() -> None:
    import anyio

    from evaltui.engine.run.runner import Runner
    from evaltui.plan import load_plan

    plan = load_plan(Path(sys.argv[1]))
    runner = Runner(plan, work_dir=sys.argv[2], sink=lambda e: None)
    gc.collect()
    fds_before = len(os.listdir("/proc/self/fd"))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the high-water mark starts again from the current resident set
    rss_before = status_kb("VmRSS")
    code = anyio.run(runner.run)
    peak = status_kb("VmHWM")
    del runner
    gc.collect()
    fds_after = len(os.listdir("/proc/self/fd"))
    print(json.dumps({"exit": code, "fds_before": fds_before, "fds_after": fds_after, "rss_before_kb": rss_before, "peak_rss_kb": peak}))


if __name__ == "__main__":
    main()
