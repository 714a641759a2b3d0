"""Fingerprints that decide whether work from an earlier run still holds for this plan.

What each takes of a dataset's epochs (`Plan.epochs`: count, reducer, k), and why they differ —
their values are on disk in every work dir, so none may change:
- `pair_version` (predictions): none of them. An epoch's answer is the same request whatever the
  count or the reducer; the status files carry the count, so a pair run for other epochs is
  resumed from its checkpoints, not kept whole.
- `evaluator_version` (a result): the reducer and k, through the evaluator's own settings: a
  result reduced another way is scored again (the count is the status files' to check).
- `dataset_fingerprint` (`evaltui compare`): the count, and the evaluator's version: two runs
  compare only when each sample was sent as often and reduced alike.
- the leaderboard's version column (scoring/summary.py): the count when it is not 1, the reducer
  and k through the dataset's settings.
"""

from __future__ import annotations

import hashlib
import json
import operator
from typing import Any

from evaltui.datasets import file_fingerprint
from evaltui.plan import DatasetConfig, ModelConfig, Plan
from evaltui.plan.strict import settings_key, values_key
from evaltui.scoring.score import JUDGE_REVISIONS
from evaltui.sim.url import sim_options


def pair_version(model: ModelConfig, ds: DatasetConfig, data: str) -> str:
    """Fingerprint of everything that shapes a prediction; a change means earlier ones are stale.

    `data` is the data file's own fingerprint (of its bytes): an edited file (a changed answer,
    a record inserted) invalidates what was predicted from the old one, while the same file named
    another way (`./data/x.jsonl`, an absolute path, a copy) does not. Not `limit` (more or fewer
    samples of the same kind) nor `shards` (the same samples in other files: checkpoints of any
    layout are read back), nor the evaluator (see evaluator_version). Not a real server's url
    (the same model moved to another host: the run says so, and results record the urls), but a
    `sim://` url's accuracy, which is the simulated model itself."""
    known = _PAIRS.get((id(model), id(ds), data))
    if known is not None and known[0][0] is model and known[0][1] is ds:
        return known[1]
    # json.dumps({"dataset": …, "data": …, "model": …[, "sim": …]}, sort_keys=True) — "data" <
    # "dataset" < "model" < "sim" — of parts made once: the model's for each of its datasets, the
    # settings' for each dataset that has them (10,000 datasets of one prompt: one dump and encoding).
    text = f'{{"data": {json.dumps(data)}, "dataset": {_settings_json(ds)}, {_model_json(model)}}}'
    value = hashlib.sha256(text.encode()).hexdigest()[:12]
    _remember(_PAIRS, (id(model), id(ds), data), ((model, ds), value))
    return value


_PAIR_SETTINGS = ("columns", "prompt", "system", "target", "mode", "choices")  # a dataset's, in its pair_version (strings, lists of them)


def _settings_json(ds: DatasetConfig) -> str:
    """The JSON of the dataset's settings a pair_version hashes, made once for each set of them."""
    key = tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(ds, name) for name in _PAIR_SETTINGS))
    text = _SETTINGS.get(key)
    if text is None:
        text = json.dumps(ds.model_dump(include=set(_PAIR_SETTINGS)), sort_keys=True)
        _remember(_SETTINGS, key, text)
    return text


def _model_json(model: ModelConfig) -> str:
    """What of the model a pair_version hashes, as the entries of a JSON object (sorted keys): the
    same for each of its datasets."""
    known = _MODELS.get(id(model))
    if known is not None and known[0] is model:
        return known[1]
    keys: dict[str, Any] = {"model": model.model_dump(include={"type", "model", "generation_kwargs"})}
    if model.is_sim:  # its accuracy is the model itself (0.9 and 0.8 answer differently); latency is not
        keys["sim"] = sim_options(model.urls[0]).get("accuracy")
    text = json.dumps(keys, sort_keys=True)[1:-1]
    _MODELS[id(model)] = (model, text)
    if len(_MODELS) > _REMEMBERED:
        _MODELS.clear()
    return text


def evaluator_version(ds: DatasetConfig) -> str:
    """Fingerprint of how a dataset is scored (its settings and the judge's revision); a result
    made another way is scored again."""
    known = _EVALUATORS.get(id(ds.evaluator))
    if known is not None and known[0] is ds.evaluator:
        return known[1]
    # by the settings' values: 10,000 datasets of one evaluator are 10,000 objects of one version
    settings = settings_key(ds.evaluator)
    key = None if settings is None else (settings, JUDGE_REVISIONS.get(ds.evaluator.type))
    value = None if key is None else _EVALUATOR_VALUES.get(key)
    if value is None:
        keys = ds.evaluator.versioned_dump()
        revision = JUDGE_REVISIONS.get(keys["type"])
        if revision is not None:
            keys["revision"] = revision
        value = hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]
        if key is not None:
            _remember(_EVALUATOR_VALUES, key, value)
    _remember(_EVALUATORS, id(ds.evaluator), (ds.evaluator, value))
    return value


def dataset_fingerprint(plan: Plan, ds: DatasetConfig) -> str:
    """Fingerprint of the questions a dataset asks and how their answers are judged — its data
    file's contents, templates, limit, epochs, selection and evaluator — but not where the file
    lies, its abbr or how a run is split and tolerates failures: two work dirs whose datasets
    have the same one scored the same samples the same way (what `evaltui compare` requires).
    "" when the data file cannot be read."""
    data = file_fingerprint(plan, ds)
    if data is None:
        return ""
    count = plan.epochs(ds).count
    known = _DATASETS.get((id(ds), count, data))
    if known is not None and known[0] is ds:
        return known[1]
    # json.dumps({"data": …, "dataset": …, "epochs": …, "evaluator": …}, sort_keys=True) (the keys
    # in that order), its "dataset" part made once for each set of settings: the data differ
    # (a string's JSON as json.dumps makes it, without the encoder it makes for each call)
    text = f'{{"data": {_json_string(data)}, "dataset": {_fingerprinted_json(ds)}, "epochs": {int(count)}, "evaluator": {_json_string(evaluator_version(ds))}}}'
    value = hashlib.sha256(text.encode()).hexdigest()[:12]
    _remember(_DATASETS, (id(ds), count, data), (ds, value))
    return value


_FINGERPRINTED = ("columns", "prompt", "system", "target", "mode", "choices", "limit", "sample_ids")  # a dataset's, in its dataset_fingerprint
_fingerprinted = operator.attrgetter(*_FINGERPRINTED)
_json_string = json.encoder.encode_basestring_ascii


def _fingerprinted_json(ds: DatasetConfig) -> str:
    """The JSON (sorted keys) of the settings a dataset_fingerprint hashes, made once for each set of them."""
    key = values_key(_fingerprinted(ds))
    text = None if key is None else _FINGERPRINTED_JSON.get(key)
    if text is None:
        text = json.dumps(ds.model_dump(mode="json", include=set(_FINGERPRINTED)), sort_keys=True)
        if key is not None:
            _remember(_FINGERPRINTED_JSON, key, text)
    return text


# Versions made, by the settings object they were made of (a plan's models are frozen), which is
# kept with each so its id names it while the entry lasts: a run asks a dataset's a few times,
# and dumping its settings to hash them again each time was most of its cost. The data file's
# fingerprint and the epochs are part of the key: they are not the dataset's settings.
_EVALUATORS: dict[int, tuple[Any, str]] = {}
_DATASETS: dict[tuple[int, int, str], tuple[Any, str]] = {}
_PAIRS: dict[tuple[int, int, str], tuple[Any, str]] = {}
_MODELS: dict[int, tuple[ModelConfig, str]] = {}
_SETTINGS: dict[tuple[Any, ...], str] = {}
# ... and by the settings' values (settings_key), which objects of the same settings share
_EVALUATOR_VALUES: dict[tuple[bytes, int | None], str] = {}
_FINGERPRINTED_JSON: dict[bytes, str] = {}
_REMEMBERED = 100_000  # entries each keeps before it starts over (a long session loading plan after plan)


def _remember(memo: dict[Any, Any], key: Any, entry: Any) -> None:
    if len(memo) >= _REMEMBERED:
        memo.clear()
    memo[key] = entry
