"""One evaluation run in a process of its own, reporting what the load suite measures.

Run as `python tests/loadkid.py PLAN WORK_DIR`; prints one JSON line: the open file descriptors
before and after the run (counted in /proc/self/fd, in this process that ran it), the resident
memory before it, the peak resident memory (ru_maxrss) and the exit code. A process of its own so
the peak belongs to this run alone, not to whatever the test process did before.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
from pathlib import Path


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def main() -> None:
    import anyio

    from evaltui.engine.runner import Runner
    from evaltui.plan import load_plan

    plan = load_plan(Path(sys.argv[1]))
    runner = Runner(plan, work_dir=sys.argv[2], sink=lambda e: None)
    gc.collect()
    fds_before = len(os.listdir("/proc/self/fd"))
    rss_before = rss_kb()
    code = anyio.run(runner.run)
    del runner
    gc.collect()
    fds_after = len(os.listdir("/proc/self/fd"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"exit": code, "fds_before": fds_before, "fds_after": fds_after, "rss_before_kb": rss_before, "peak_rss_kb": peak, "rss_after_kb": rss_kb()}))


if __name__ == "__main__":
    main()
