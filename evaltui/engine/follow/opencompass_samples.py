"""An OpenCompass pair's samples, one by one: prompt, prediction and gold from its predictions
files, and the verdict its result's `details` gives when it gives one.

What the details screen shows a few of and `evaltui report` shows all of. OpenCompass writes a
part's predictions as one JSON object keyed by the sample's index within the part
(`predictions/<model>/<dataset>[_<i>].json`, or `tmp_…` while it runs), so a part is read
whole (it is rewritten whole: there is no appending to follow). Parts are numbered on from the
last: sample k of part 1 is `len(part 0) + k`. It keeps no per-sample errors, attempts or
times: a failed request is an empty prediction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from evaltui.engine.disk.predictions import WHOLE_BYTES
from evaltui.engine.disk.workdir import RESULT_BYTES
from evaltui.fsutil import read_json


class OpenCompassSample(NamedTuple):
    sample: int  # its index: within the dataset, parts numbered on
    prompt: Any  # a string, or OpenCompass's list of chat turns ({"role", "prompt"})
    prediction: str
    gold: str
    extracted: str | None  # the evaluator's reading of the prediction, when its details say
    correct: bool | None  # None when the result's details do not say


def part_files(folder: Path, dataset: str) -> list[Path]:
    """The files holding a dataset's predictions, in part order: the final one of each part, or
    its `tmp_` one while it runs."""
    whole = [folder / f"{dataset}.json", folder / f"tmp_{dataset}.json"]
    found = next((p for p in whole if p.exists()), None)
    if found is not None:
        return [found]
    parts = []
    for k in range(100_000):
        path = next((p for p in (folder / f"{dataset}_{k}.json", folder / f"tmp_{dataset}_{k}.json") if p.exists()), None)
        if path is None:
            break
        parts.append(path)
    return parts


def read_entries(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """A predictions file's samples, by index; none when it is missing or torn (being rewritten)."""
    data = read_json(path, WHOLE_BYTES)
    if not isinstance(data, dict):
        return []
    return sorted(((int(k), v) for k, v in data.items() if str(k).isdigit() and isinstance(v, dict)), key=lambda kv: kv[0])


def result_verdicts(path: Path) -> dict[int, tuple[str | None, bool | None]]:
    """(extracted, correct) per sample from a result's `details` (a list, or an object keyed by
    index, as OpenCompass's evaluators write them), where it has them."""
    data = read_json(path, RESULT_BYTES)
    details = data.get("details") if isinstance(data, dict) else None
    items = enumerate(details) if isinstance(details, list) else details.items() if isinstance(details, dict) else ()
    out: dict[int, tuple[str | None, bool | None]] = {}
    for key, detail in items:
        if not isinstance(detail, dict) or not str(key).isdigit():
            continue
        correct = detail.get("correct")
        if isinstance(correct, list):
            correct = correct[0] if correct else None
        pred = detail.get("pred")
        if isinstance(pred, list):
            pred = pred[0] if pred else None
        out[int(key)] = (None if pred is None else _text(pred), correct if isinstance(correct, bool) else None)
    return out


def iter_samples(root: Path, model: str, dataset: str) -> Iterator[OpenCompassSample]:
    """Every sample of the pair, in order, with its verdict where the result gives one."""
    verdicts = result_verdicts(root / "results" / model / f"{dataset}.json")
    offset = 0
    for path in part_files(root / "predictions" / model, dataset):
        entries = read_entries(path)
        for k, e in entries:
            extracted, correct = verdicts.get(offset + k, (None, None))
            yield OpenCompassSample(offset + k, e.get("origin_prompt"), _text(e.get("prediction")), _text(e.get("gold")), extracted, correct)
        offset += 1 + max((k for k, _ in entries), default=-1)


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)
