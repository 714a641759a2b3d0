"""What evaltui's JSON layer must keep taking and writing now that orjson does the work: every
input the standard library read, every value it could write."""

from __future__ import annotations

import io
import json
import math

import pytest

from evaltui import fastjson


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1, "b": [true, null, "é"]}', {"a": 1, "b": [True, None, "é"]}),
        ('"\\ud83d"', "\ud83d"),  # a lone surrogate, escaped (half an emoji)
        ('{"a": 1, "a": 2}', {"a": 2}),  # the last of a repeated key, as json does
    ],
)
def test_reads_what_the_standard_library_reads(text: str, expected: object) -> None:
    assert fastjson.loads(text) == expected
    assert fastjson.loads(text.encode("utf-8")) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"id": 123456789012345678901234567890, "answer": -18446744073709551617}',
        '{"nested": {"list": [1, {"deep": [98765432109876543210987654321]}]}}',
        '[18446744073709551616]',
    ],
)
def test_a_users_big_integers_stay_exact(text: str) -> None:
    """orjson reads an integer beyond 64 bits as a float: a 20-digit answer would be scored
    against 1.2345678901234568e+29."""
    assert fastjson.loads_exact(text) == json.loads(text)
    assert repr(fastjson.loads_exact(text.encode())) == repr(json.loads(text))


def test_a_big_float_a_user_wrote_as_a_float_stays_a_float() -> None:
    assert fastjson.loads_exact('{"x": 1e30, "y": 2.5}') == {"x": 1e30, "y": 2.5}


def test_reads_nan_and_infinity_as_json_does() -> None:
    data = fastjson.loads(b'{"x": NaN, "y": -Infinity}')
    assert math.isnan(data["x"]) and data["y"] == -math.inf


def test_a_byte_order_mark_is_not_an_error() -> None:
    assert fastjson.loads("\ufeff{}".encode("utf-8")) == {}


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a": }', b"\xff\xfe", b"[1, 2"])
def test_what_is_not_json_is_a_value_error_with_jsons_message(bad: bytes) -> None:
    with pytest.raises(ValueError) as caught:
        fastjson.loads(bad)
    try:
        json.loads(bad)
    except ValueError as e:
        assert str(caught.value) == str(e)  # the position a user is shown stays json's


@pytest.mark.parametrize(
    "value",
    [
        {"index": 3, "prediction": "B", "gold": "", "ppl": [1.5, 0.25]},
        {"text": "naïve 答案 🙂", "nested": {"list": [1, 2.5, None, False]}},
        {"big": 2**70},
        {1: "int keys become strings"},
    ],
)
def test_writes_compact_utf8_that_reads_back_the_same(value: dict) -> None:
    out = fastjson.dumps(value)
    assert isinstance(out, bytes)
    assert json.loads(out) == json.loads(json.dumps(value))
    if "big" not in value:  # an integer orjson cannot write is written by json, spaced
        assert b": " not in out


def test_a_lone_surrogate_is_written_escaped_not_an_error() -> None:
    out = fastjson.dumps({"prediction": "cut \ud83d"})
    assert json.loads(out) == {"prediction": "cut \ud83d"}
    out.decode("utf-8")  # valid UTF-8: any reader can open the file


def test_non_finite_floats_are_written_as_null_so_other_tools_can_read_the_file() -> None:
    out = fastjson.dumps({"ppl": [math.inf, math.nan, 1.0]})
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"wrote {c}")) == {"ppl": [None, None, 1.0]}


def test_object_head_reads_the_members_before_the_stop_line() -> None:
    """One parse of the head's lines joined, or, where that fails, one a line: the same members."""
    def head(text: str) -> dict[str, object] | None:
        return fastjson.object_head(io.BytesIO(text.encode()), b'"details": [', 1 << 20)

    body = '  "details": [\n    {"i": 0}\n  ]\n}\n'
    assert head('{\n  "a": 1.5,\n  "u": {"a": {"n": 3}},\n  "a": 2,\n' + body) == {"a": 2, "u": {"a": {"n": 3}}}
    assert head('{\n  "a": 1,\n\n  "b": [1, 2],\n' + body) == {"a": 1, "b": [1, 2]}  # a blank line: one a line
    assert head('{\n  "a": 1,\n  "b": oops,\n' + body) is None  # no member: the caller reads it whole
    assert head('{\n  "a": 1,\n') is None  # no stop line
    assert head('[\n  "a",\n' + body) is None  # not an object a member a line
    assert head("{\n" + "".join(f'  "k{i}": {i},\n' for i in range(64)) + body) is None  # past `lines`
    nan = head('{\n  "a": NaN,\n' + body)  # what only the standard library reads still reads
    assert nan is not None and math.isnan(nan["a"])  # type: ignore[arg-type]
