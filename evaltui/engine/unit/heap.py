"""The garbage collector kept out of the request loop: once per process, by the driver and by each Ray actor."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

#: Container allocations between two young-generation collections once the run starts (Python's
#: default is 700). Each young collection walks what is alive in the young generation, mostly the
#: requests in flight, whatever the threshold: at 10,000, 10,000 datasets of 3 samples spent
#: 0.22 s in 385 of them (580 µs each); at 50,000, 0.09 s.
GC_YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Keep the cyclic garbage collector out of the request loop, once per process.

    Everything imported and planned by now lives as long as the run, so it is frozen: no
    collection walks it again. And a young collection every 700 allocations (aiohttp allocates
    dozens of objects per request, 256 requests' worth alive at once) became one every 10,000 (now 50,000).
    Measured at N=20,000, C=256 (gc.callbacks): 0.16–0.25 s of collections per run (64–71 young,
    5–6 middle, one full) before, 0.004–0.006 s (3 young) after. Cycles are still collected,
    only in bigger batches (at most GC_YOUNG_THRESHOLD objects' worth held in between).
    """
    global _heap_settled
    if _heap_settled:
        return
    _heap_settled = True
    gc.collect(1)  # the young garbage of start-up, not frozen with the rest (~1 ms; a full collection: ~25)
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def made_for_the_run(load: Callable[[], Any], *, lasting: Callable[[Any], bool]) -> Any:
    """`load()` with no collection while it runs; what it made frozen with the rest when
    `lasting(made)` (a chunk of planned datasets: thousands of objects, each alive until the run
    ends). A chunk of 1,024 unpickled on the loop set off collections that walked it and the
    young heap again and again: ~37 ms each, a third of a second in a run of 10,000 datasets.
    Whatever else is alive then is frozen too, as settle_heap freezes it: the session planning the
    chunk (in reference cycles) stays until the process ends — once, as only a run's first session
    plans in the worker process."""
    if not _heap_settled or not gc.isenabled():
        return load()
    gc.disable()
    try:
        made = load()
        if lasting(made):
            gc.freeze()
        return made
    finally:
        gc.enable()


_heap_settled = False
