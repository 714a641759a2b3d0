"""What one per-sample event costs the engine: building it, and the runner folding and sending it.

Run by hand: `python bench/events.py [--n 200000]`.

Every answered request becomes a SampleFinished (or SampleFailed) that the runner folds into its
own RunState and hands to each sink. The floor is building a plain tuple of the same four values;
the ratios say how far above that the typed event, the fold, and the whole emit path are. Each row
but "apply alone" builds its event inside the timed call, as the engine does: "apply alone" folds
one event built beforehand, so the fold's own cost is that row, and "built + apply" is about the
SampleFinished row plus it (bench/RESULTS.md, issue 22: which of these 0.3 µs and 0.5 µs were).
The goal is a few microseconds per sample at most, far below the ~0.4 ms of CPU a request's HTTP
exchange costs.
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from collections.abc import Callable

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import SampleError
from evaltui.engine.stream.state import RunState
from evaltui.plan import Plan


def per_call(fn: Callable[[int], object], n: int) -> float:
    """Seconds per call: the best of 100 rounds of n/20 calls. On a shared machine the best of
    many short rounds is what the code costs; a long one takes the neighbours' bursts with it
    (the best of three rounds of n read 0.5–1.0 µs for what is 0.3 µs; bench/RESULTS.md, issue 22)."""
    rounds, size = 100, max(1, n // 20)
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for i in range(size):
            fn(i)
        best = min(best, time.perf_counter() - t)
    return best / size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    n = ap.parse_args().n

    state = RunState()
    state.apply(ev.DatasetPlanned("m", "d", n, 1))
    state.apply(ev.DatasetStarted("m", "d", n, n))
    plan = Plan.model_validate({
        "models": [{"abbr": "m", "type": "lightllm", "url": "http://127.0.0.1:1/generate"}],
        "datasets": [{"abbr": "d", "path": __file__, "prompt": "{q}", "target": "{a}"}],
    })
    runner = Runner(plan, work_dir="/tmp/evaltui-bench-events")
    app_queue: deque[ev.Event] = deque(maxlen=1024)
    runner.subscribe(app_queue.append)  # what the Textual app's sink does
    err = SampleError("http", 500, "boom", 3)

    built = ev.SampleFinished("m", "d", 0, 1)
    rows = [
        ("plain tuple (floor)", per_call(lambda i: ("m", "d", 0, i), n)),
        ("SampleFinished", per_call(lambda i: ev.SampleFinished("m", "d", 0, i), n)),
        ("SampleFailed", per_call(lambda i: ev.SampleFailed("m", "d", 0, i, err), n)),
        ("RunState.apply alone (event built before)", per_call(lambda i: state.apply(built), n)),
        ("SampleFinished built + RunState.apply", per_call(lambda i: state.apply(ev.SampleFinished("m", "d", 0, i)), n)),
        ("Runner.emit(SampleFinished), one sink", per_call(lambda i: runner.emit(ev.SampleFinished("m", "d", 0, i)), n)),
    ]
    floor = rows[0][1]
    for name, secs in rows:
        print(f"{name:42s} {secs * 1e6:7.3f} µs   {secs / floor:5.1f}× floor")


if __name__ == "__main__":
    main()
