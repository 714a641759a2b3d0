"""Why a sample failed: the kinds of error a user reads (`type` in the failures pane,
logs/failures.jsonl, checkpoints and `evaltui show`), and the one record they are written as.

A failure is recorded as `{"type", "status", "message", "attempts"}` wherever it is made — by a
backend (`BackendError`), by the engine (a record that cannot be read, a time or token limit,
a bug, a Ray actor that died) — and read back leniently (`SampleError.from_dict`): a work dir
may hold kinds an older or newer evaltui wrote.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class ErrorKind(str, Enum):
    """A `str`, so a record's `"type"` and comparisons with the strings read back keep working."""

    # the server, as a request sees it (backends)
    HTTP = "http"  # it answered with an error status (its words in the message)
    TIMEOUT = "timeout"  # no complete reply within the model's timeout
    CONNECT = "connect"  # no connection: refused, unknown host, a proxy's refusal, an untrusted certificate
    CONNECTION = "connection"  # the connection broke, or what came back was not HTTP
    TLS = "tls"  # an untrusted certificate, as an attempt's outcome (its request fails as `connect`)
    BAD_REPLY = "bad-reply"  # a 2xx reply that is not what the protocol promises
    REPLY_TOO_LARGE = "reply-too-large"  # a reply longer than max_reply_bytes, left unread
    DOWN = "down"  # every replica of the model was out for down_timeout
    CONFIG = "config"  # the server cannot do what the plan asks (ppl without prompt log-probabilities)
    # the sample's own limits
    TOKEN_LIMIT = "token-limit"  # the sample used its token_limit
    TIME_LIMIT = "time-limit"  # no answer within time_limit
    # the engine
    TEMPLATE = "template"  # the record does not fill the dataset's templates
    DATASET = "dataset"  # the record could not be read (the data file changed since the plan was checked)
    WORKER = "worker"  # the Ray actor answering it died, or could not make the model's client
    INTERNAL = "internal"  # a bug: it cost this sample, not the run
    MISSING = "missing"  # an epoch with no line when the predictions were merged (a hand-edited checkpoint)
    # scoring
    JUDGE = "judge"  # the judge model gave no grade for the answer (down, timed out, or no grade in its reply)
    EVALUATOR = "evaluator"  # a python evaluator raised, or returned what it may not

    def __str__(self) -> str:  # f-strings print the value, as for a plain str (3.11 changed this)
        return self.value


#: The keys of a failure record, in the order it is written.
RECORD_KEYS = ("type", "status", "message", "attempts")


def error_record(kind: ErrorKind, message: str, *, status: int | None = None, attempts: int = 0) -> dict[str, Any]:
    """A failure as it is written (`status`: the HTTP status, when there was a reply; `attempts`:
    the requests it took)."""
    return {"type": kind.value, "status": status, "message": message, "attempts": attempts}
