"""The checkers' random draws. An instruction whose argument is missing draws one (Google's code, as
lm-eval runs it, calls the global `random`), so lm-eval's verdict on such a reply depends on
whatever used `random` before it. Here each thread has its own generator, seeded from the record
before its checkers are built: a reply is judged the same in every run and every order, and no
other code's use of `random` changes it."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class _Generator(threading.local):
    def __init__(self) -> None:
        self.rng = random.Random(0)


_LOCAL = _Generator()


def seed(value: str) -> None:
    """Start this thread's draws afresh from `value` (a record's prompt)."""
    _LOCAL.rng.seed(value)


def choice(seq: Sequence[T]) -> T:
    return _LOCAL.rng.choice(seq)


def randint(a: int, b: int) -> int:
    return _LOCAL.rng.randint(a, b)


def sample(population: Sequence[T], k: int) -> list[T]:
    return _LOCAL.rng.sample(population, k)
