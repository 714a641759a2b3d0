"""The event loop under the engine and the simulator: uvloop where it is installed.

Every request costs the client and the simulated server a few passes through their event loops;
uvloop's are written in C on libuv and cost about half as much (bench/RESULTS.md, "Event
loop"), which shows most in the simulator, the busiest process of a benchmark. It is a
dependency on Linux and macOS; elsewhere, or with `EVALTUI_EVENT_LOOP=asyncio` (to rule it out
when something behaves oddly), the standard loop runs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def use_uvloop() -> bool:
    if os.environ.get("EVALTUI_EVENT_LOOP", "").strip().lower() == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def anyio_options() -> dict[str, Any]:
    """`backend_options` for anyio.run / start_blocking_portal."""
    return {"use_uvloop": True} if use_uvloop() else {}


def new_event_loop() -> asyncio.AbstractEventLoop:
    if use_uvloop():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the chosen loop."""
    if use_uvloop():
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
