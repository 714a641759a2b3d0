"""The simulated model server: real LightLLM/OpenAI wire formats, known skill, injected faults.

Used by the demo (so the real HTTP client path runs without a GPU), by the
test-suite (to assert exact scores and retry behaviour) and by benchmarks
(fast enough never to be the bottleneck).
"""

from evaltui.sim.answers import AnswerKey, answers_correctly, tokenize, token_id, wrong_answer
from evaltui.sim.cli import add_arguments, run_from_args
from evaltui.sim.config import Faults, ModelProfile, SimConfig
from evaltui.sim.server import SimServer
from evaltui.sim.stats import LogRecord, SimStats
from evaltui.sim.thread import SimThread

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
