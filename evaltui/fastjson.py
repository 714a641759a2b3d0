"""JSON through orjson, with the standard library where orjson says no.

Every sample is JSON four or five times over its life — the request body, the reply, its
checkpoint line, the merged predictions file, its scored detail — and a resume or a scoring of a
large dataset parses and writes it all again. orjson does each of those 4–20× faster than the
`json` module (bench/RESULTS.md, "What changed today"). What it refuses the standard library
still takes, so no input that worked before fails now: NaN and Infinity, a byte-order mark,
lone surrogates (half an emoji a model cut off), integers orjson cannot write; a user's integers
beyond 64 bits stay exact through `loads_exact`.

Written JSON is compact (`{"a":1}`). Readers of our own files (`checkpoint.scan_checkpoint`,
`iter_predictions`) accept both this and the spaced layout older evaltui versions wrote.
Non-finite floats are written as `null` (as JSON has no NaN), where `json` wrote `NaN`, which
other tools cannot read.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, BinaryIO

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON document; ValueError (json's own, with its position) when it is not one.

    An integer beyond 64 bits comes back as a float (orjson's rule): harmless in evaltui's own
    files and in servers' replies, whose numbers are counts, token ids and logprobs. A user's
    data goes through `loads_exact`.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(bytes(data) if isinstance(data, memoryview) else data, parse_int=_int_or_float)
        except RecursionError:  # arrays nested a million deep (orjson stops at 1,024): not a document we read
            raise ValueError("JSON nested too deeply") from None


def _int_or_float(digits: str) -> int | float:
    """An integer of the document, as orjson gives it: beyond 64 bits as a float (a 5,000-digit
    one, which int() refuses past 4,300 digits, as infinity) rather than a ValueError."""
    return int(digits) if len(digits) < 20 or int(digits[:20]) < 2**64 and len(digits) == 20 else float(digits)


def loads_exact(data: bytes | str) -> Any:
    """`loads` for a user's records: a number orjson could only give as a float beyond 2**63
    (an integer id or answer of 20 digits, say) is read again by json, which keeps it exact."""
    obj = loads(data)
    return json.loads(data) if _beyond_int64(obj) else obj


_INT64 = 2.0**63


def _beyond_int64(obj: Any) -> bool:
    kind = type(obj)
    if kind is dict:
        obj = obj.values()
    elif kind is not list:
        return kind is float and not -_INT64 < obj < _INT64
    for v in obj:
        kind = type(v)
        if kind is str or kind is int or kind is bool or v is None:
            continue
        if kind is float:
            if not -_INT64 < v < _INT64:
                return True
        elif (kind is dict or kind is list) and _beyond_int64(v):
            return True
    return False


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON; readable non-ASCII text, yet never an error for what json could write.

    A model can reply with a lone surrogate; UTF-8 cannot carry one, so such a value is written
    with \\u escapes instead — one odd sample must not stop a run.
    """
    try:
        return orjson.dumps(obj, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: a surrogate, a huge int, an unknown type
        text = json.dumps(obj, ensure_ascii=False)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(obj).encode("utf-8")


def object_head(f: BinaryIO, stop: bytes, limit: int, lines: int = 64) -> dict[str, Any] | None:
    """The members of a JSON object written a member a line (`{`, then `"key": value,` each on a
    line of at most `limit` bytes) that come before the line starting with `stop`, read from `f`'s
    start; None when the object is not laid out so within `lines` lines."""
    if f.readline(limit).rstrip() != b"{":
        return None
    members = []
    for _ in range(lines):
        line = f.readline(limit).strip().rstrip(b",")
        if line.startswith(stop):
            break
        members.append(line)
    else:
        return None
    with contextlib.suppress(ValueError):  # parsed as one object, as the lines say: one parse, not one a line
        found = loads(b"{" + b",".join(members) + b"}")
        if isinstance(found, dict):
            return found
    head: dict[str, Any] = {}
    for line in members:  # a line of them is no member (a blank one, say): as the lines parse one by one
        try:
            head.update(loads(b"{" + line + b"}"))
        except ValueError:
            return None
    return head
