"""One model request on its way through the simulator, and what every wire dialect shares.

A dialect (sim/lightllm.py, sim/openai.py) turns a parsed body into a `Call` and a function from
the model's accuracy to its success reply; the server (sim/server.py) decides on faults and
latency in between, the same for every dialect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaltui import fastjson
from evaltui.sim.config import SimConfig
from evaltui.sim.http import Reply

#: A dialect's builder: (call, body) -> (prompt length in characters, accuracy -> success Reply).
#: It validates the body (BadRequest if it is wrong) and fills call.prompt and call.params.
Builder = Callable[["Call", dict[str, Any]], tuple[int, Callable[[float], Reply]]]

_dumps = fastjson.dumps


class BadRequest(Exception):
    pass


class Call:
    """One model request travelling from parsing to its (possibly delayed) reply."""

    __slots__ = ("t0", "endpoint", "model", "prompt", "params", "status", "tokens", "body")

    def __init__(self, t0: float, endpoint: str, model: str) -> None:
        self.t0 = t0
        self.endpoint = endpoint
        self.model = model
        self.prompt = ""
        self.params: dict[str, Any] = {}
        self.status = 200  # of the reply (0: the connection was dropped)
        self.tokens = 0  # prompt + generated tokens, as the reply's usage reports them
        self.body: dict[str, Any] | None = None  # the request's body, when the server records them


def max_tokens(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{name} must be a non-negative integer, got {value!r}")
    return value


def json_reply(config: SimConfig, obj: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    """`obj` as JSON; without a Content-Type when the server is set to omit it, as some do."""
    ctype = None if config.omit_content_type else "application/json"
    return Reply(status, _dumps(obj), ctype, headers)
