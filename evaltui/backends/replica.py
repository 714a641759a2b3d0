"""One server of a model as its router sees it: its state, its counters, and the numbers that
decide when it is out of service (replicas.py routes among them).

An ejected replica is out for FIRST_BACK_OFF s the first time, and each ejection that follows
its comeback within HEALTHY_FOR s waits twice as long as the one before, up to MAX_BACK_OFF (a
replica whose health check passes but whose requests fail would otherwise come back every
second). Then its health check is probed (`/health` for LightLLM, `/v1/models` for OpenAI-style
servers): any HTTP reply but a 5xx means the server is up (a proxy may not route the health
check at all); a failed probe is tried again after 2, 4, then every PROBE_MAX s.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yarl import URL

    from evaltui.backends.adaptive import AdaptiveLimit

UP, EJECTED, PROBING = "up", "ejected", "probing"
EJECT_AFTER = 3
FIRST_BACK_OFF = 1.0
MAX_BACK_OFF = 60.0
HEALTHY_FOR = 60.0  # s up after a comeback before an ejection starts again from FIRST_BACK_OFF
PROBE_MAX = 5.0  # s between failed probes, at most: a replica back is readmitted within this
REFUSING_FOR = 30.0  # s of nothing but refusals (429, 503) after which a replica is ejected
NO_REPLY, TIMED_OUT = 0, -1  # `status` of an attempt that got no HTTP reply
REFUSALS = frozenset({429, 503})  # the server is full: the adaptive limit's business, not ejection's
DROPS = REFUSALS | {TIMED_OUT}  # what tells an adaptive limit the server is full


class ReplicasDown(Exception):
    """Every replica has been out for `down_timeout` s; the message names them and why."""


class Replica:
    """One server of a model, with its counters (read by the engine once a second)."""

    __slots__ = (
        "index", "url", "endpoint", "health", "state", "in_flight", "cap", "limit",
        "attempts", "errors", "failures", "epoch", "back_off", "due", "reason", "failed_probes",
        "ejected_for", "back_at", "refused_since", "held_until",
    )

    def __init__(self, index: int, url: str, endpoint: URL, health: URL, cap: int, limit: AdaptiveLimit | None) -> None:
        self.index, self.url, self.endpoint, self.health = index, url, endpoint, health
        self.state = UP
        self.in_flight = 0
        self.cap = cap  # fixed concurrency: at most this many in flight
        self.limit = limit  # adaptive concurrency: its limit instead
        self.attempts = 0  # attempts answered or failed
        self.errors = 0  # of those, the ones without a 2xx
        self.failures = 0  # in a row: no reply, timeout, 5xx (but 503)
        self.epoch = 0  # times ejected: an attempt sent in an earlier epoch was out when it happened
        self.back_off = FIRST_BACK_OFF  # ejected: s from the last ejection or failed probe to the next probe
        self.due = 0.0  # when an ejected replica is probed
        self.reason = ""  # why it was ejected (its last error, or the health check's)
        self.failed_probes = 0  # in a row, since it was ejected
        self.ejected_for = 0.0  # the back-off of its last ejection (the next one soon after doubles it)
        self.back_at = -math.inf  # when it last came back up
        self.refused_since: float | None = None  # the first refusal since its last answer
        self.held_until = 0.0  # a Retry-After: out of routing until then

    def capacity(self) -> int:
        return self.limit.limit if self.limit is not None else self.cap


def in_doubt(r: Replica) -> bool:
    """Its last attempt failed or was refused, and none was answered since."""
    return r.failures > 0 or r.refused_since is not None
