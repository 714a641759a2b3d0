"""The simulated model server: real LightLLM/OpenAI wire formats, known skill, injected faults.

Used by the demo (so the real HTTP client path runs without a GPU), by the
test-suite (to assert exact scores and retry behaviour) and by benchmarks
(fast enough never to be the bottleneck).

The names below are imported when first asked for: the plan imports `evaltui.sim.url` to check
a `sim://` URL, and that must not bring up the server's modules (aiohttp's) in every run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltui.sim.answers import AnswerKey, answers_correctly, token_id, tokenize, wrong_answer
    from evaltui.sim.cli import add_arguments, run_from_args
    from evaltui.sim.config import Faults, ModelProfile, SimConfig
    from evaltui.sim.server import SimServer
    from evaltui.sim.stats import LogRecord, SimStats
    from evaltui.sim.thread import SimThread

_HOME = {
    "AnswerKey": "answers",
    "answers_correctly": "answers",
    "token_id": "answers",
    "tokenize": "answers",
    "wrong_answer": "answers",
    "add_arguments": "cli",
    "run_from_args": "cli",
    "Faults": "config",
    "ModelProfile": "config",
    "SimConfig": "config",
    "SimServer": "server",
    "LogRecord": "stats",
    "SimStats": "stats",
    "SimThread": "thread",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AnswerKey",
    "Faults",
    "LogRecord",
    "ModelProfile",
    "SimConfig",
    "SimServer",
    "SimStats",
    "SimThread",
    "add_arguments",
    "answers_correctly",
    "run_from_args",
    "token_id",
    "tokenize",
    "wrong_answer",
]
