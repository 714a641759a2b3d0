"""A failure record is written as it always was, whichever kind of error made it."""

from __future__ import annotations

import json

from evaltui import fastjson
from evaltui.backends import BackendError
from evaltui.engine.stream.events import SampleError
from evaltui.failure import ErrorKind, error_record


def test_a_failure_record_has_the_four_keys_in_order_and_its_kind_as_plain_text() -> None:
    record = error_record(ErrorKind.TIME_LIMIT, "no answer within time_limit = 2 s", attempts=3)
    assert json.dumps(record) == '{"type": "time-limit", "status": null, "message": "no answer within time_limit = 2 s", "attempts": 3}'
    assert type(record["type"]) is str and fastjson.dumps(record) == json.dumps(record, separators=(",", ":")).encode()


def test_a_backends_failure_is_the_same_record_and_reads_back_as_its_sample_error() -> None:
    error = BackendError(ErrorKind.HTTP, "Bad Request", status=400, attempts=1)
    assert error.as_dict() == {"type": "http", "status": 400, "message": "Bad Request", "attempts": 1}
    assert str(error) == "http 400: Bad Request"
    assert SampleError.from_dict(error.as_dict()) == SampleError("http", 400, "Bad Request", 1)


def test_each_kind_is_named_once() -> None:
    values = [k.value for k in ErrorKind]
    assert len(values) == len(set(values)) and all(v == v.lower() and " " not in v for v in values)
