"""What every table of the plan shares: strict, frozen pydantic models, and the bounds of times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

HOUR, DAY = 3600.0, 86400.0  # upper bounds: a typo like 1e300 is an error, not an overflow hours later


class Strict(BaseModel):
    """Unknown keys are errors, values are not coerced, a plan once read does not change."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def private(model: BaseModel) -> dict[str, Any]:
    """A model's private attributes, read as the slot they live in: `model._x` goes through
    pydantic's __getattr__ (an AttributeError raised and caught, ~2.5 µs a read), and a run asks
    the plan's indexes a dozen times for each of 10,000 datasets."""
    found = model.__pydantic_private__
    assert found is not None  # a model that declares private attributes
    return found


def without_later(data: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """`data` without the keys added later that are still at their defaults (so old fingerprints hold)."""
    out = dict(data)
    for k, default in later.items():  # (the few later keys looked up, not every key compared: 10,000 datasets' worth at a run's end)
        if k in out and out[k] == default:
            del out[k]
    return out


def settings_key(model: BaseModel, skip: tuple[str, ...] = ()) -> bytes | None:
    """A key equal for two models exactly when their fields (but those in `skip`) hold the same
    values: a memo of what is made of a plan's settings, for 10,000 datasets that are so many
    objects of a few settings (their ids differ, their values do not). None when a value is beyond
    what it can write (an integer past 64 bits): then nothing is kept.

    The fields as orjson writes them, nested models as their fields (a few µs, where a model_dump
    is ~10): a number keeps its type (`1`, `1.0`, `true`), a string is written exactly. What it
    writes alike (a list and a tuple, a Path and its text) model_dump(mode="json") makes alike."""
    fields = model.__dict__
    if skip:
        fields = dict(fields)
        for name in skip:
            fields[name] = None
    return values_key(fields)


def values_key(values: Any) -> bytes | None:
    """settings_key of some values (a tuple of fields, a dict of them)."""
    try:
        return orjson.dumps(values, default=_fields)
    except TypeError:  # (orjson.JSONEncodeError is one)
        return None


def _fields(value: Any) -> Any:
    if isinstance(value, BaseModel):  # (named: two kinds of table with the same fields are two values)
        return [type(value).__qualname__, value.__dict__]
    if isinstance(value, Path):
        return str(value)
    raise TypeError(type(value).__name__)
