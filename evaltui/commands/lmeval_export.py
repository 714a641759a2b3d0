"""`evaltui show WORK_DIR --export lm-eval -o DIR`: a run in lm-evaluation-harness's output layout.

As `lm_eval --output_path DIR --log_samples` writes it, so notebooks, trackers and lm-eval's own
helpers read an evaltui run as one of its own:

    DIR/<model>/results_<date>.json             every dataset of the model: "results", "configs", "versions", "n-samples", …
    DIR/<model>/samples_<dataset>_<date>.jsonl  a line per sample: doc_id, doc, target, arguments, resps, filtered_resps, the metric

The shapes are lm-eval's own (`lm_eval/result_schema.py`: `EvalResults`, `SampleResult`); metrics
are fractions, as lm-eval's are (71.23 % → 0.7123), under `"<metric>,none"` (evaltui applies no
filter of lm-eval's); a sample's epochs are its `resps` (lm-eval's repeats). No lm-eval is needed
to write them. Streamed: a sample line is written as its records are read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from evaltui import __version__
from evaltui.engine.disk.records import PairView, WorkDirView
from evaltui.fsutil import atomic_write_text, atomic_writer

if TYPE_CHECKING:
    from evaltui.commands.export import Records


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sanitized(name: str) -> str:
    """lm-eval's `sanitize_model_name`: the model's folder name."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def export_lmeval(view: WorkDirView, pairs: list[PairView], records: Records, folder: Path) -> list[Path]:
    """The results and samples files of each model of `pairs` in `folder` (made if missing)."""
    folder.mkdir(exist_ok=True)
    date = datetime.fromtimestamp(view.workdir.plan_file.stat().st_mtime).isoformat().replace(":", "-")
    written: list[Path] = []
    for model in dict.fromkeys(p.model for p in pairs):
        mine = [p for p in pairs if p.model == model]
        where = folder / sanitized(model)
        where.mkdir(exist_ok=True)
        for pair in mine:
            path = where / f"samples_{pair.dataset}_{date}.jsonl"
            with atomic_writer(path) as f:
                _samples(f, view, pair, records(pair))
            written.append(path)
        path = where / f"results_{date}.json"
        atomic_write_text(path, json.dumps(_results(view, model, mine), indent=2, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def _results(view: WorkDirView, model: str, pairs: list[PairView]) -> dict[str, Any]:
    plan = view.plan
    cfg = next(m for m in plan.models if m.abbr == model)
    out: dict[str, Any] = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-shot": {}, "higher_is_better": {}, "n-samples": {}}
    for pair in pairs:
        ds = plan.dataset(pair.dataset)
        samples = pair.total // max(pair.epochs, 1)
        metrics = pair.metrics or {}
        out["results"][pair.dataset] = {"name": pair.dataset, "alias": pair.dataset, "sample_len": samples,
                                        **{f"{k},none": v / 100 for k, v in metrics.items()}}
        out["group_subtasks"][pair.dataset] = []
        out["configs"][pair.dataset] = {
            "task": pair.dataset, "dataset_path": str(plan.dataset_path(ds)), "output_type": "multiple_choice" if ds.mode == "ppl" else "generate_until",
            "doc_to_text": ds.prompt, "doc_to_target": ds.target, "evaluator": ds.evaluator.type,
            "evaltui_status": pair.status, "evaltui_version": pair.version,
        }
        out["versions"][pair.dataset] = pair.dataset_version or None
        out["n-shot"][pair.dataset] = 0
        out["higher_is_better"][pair.dataset] = dict.fromkeys(metrics, True)
        out["n-samples"][pair.dataset] = {"original": samples, "effective": samples}
    out["config"] = {"model": "evaltui", "model_args": f"model={model},type={cfg.type},url={cfg.urls[0]}", "batch_size": str(cfg.max_workers),
                     "gen_kwargs": dict(cfg.generation_kwargs)}
    out.update(model_name=model, model_name_sanitized=sanitized(model), date=view.workdir.plan_file.stat().st_mtime,
               evaltui_version=__version__)
    return out


def _samples(f: IO[bytes], view: WorkDirView, pair: PairView, found: Iterator[dict[str, Any]]) -> None:
    metrics = list(pair.metrics or {})
    metric = metrics[0] if metrics else "accuracy"
    kwargs = dict(next(m for m in view.plan.models if m.abbr == pair.model).generation_kwargs)
    group: list[dict[str, Any]] = []
    for record in found:
        if group and record["index"] != group[0]["index"]:
            f.write(_line(group, metric, kwargs))
            group = []
        group.append(record)
    if group:
        f.write(_line(group, metric, kwargs))


def _line(epochs: list[dict[str, Any]], metric: str, kwargs: dict[str, Any]) -> bytes:
    """One sample (its records, one per epoch) as an lm-eval sample line."""
    first = epochs[0]
    prompt, target = str(first.get("prompt", "")), "" if first.get("gold") is None else str(first["gold"])
    answers = [str(r.get("answer", "")) for r in epochs]
    line: dict[str, Any] = {
        "doc_id": int(first["index"]),
        "doc": {k: first[k] for k in ("prompt", "system", "gold") if first.get(k) is not None},
        "target": target,
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": kwargs}},
        "resps": [answers],
        "filtered_resps": [answers[0] if first.get("extracted") is None else str(first["extracted"])],
        "filter": "none",
        "metrics": [metric],
        "doc_hash": _sha(json.dumps(first.get("index"))),
        "prompt_hash": _sha(prompt),
        "target_hash": _sha(target),
    }
    verdicts = [r["correct"] for r in epochs if isinstance(r.get("correct"), bool)]
    scores = first.get("scores")
    if isinstance(scores, dict) and metric in scores:
        line[metric] = float(scores[metric])
    elif verdicts:
        line[metric] = sum(verdicts) / len(verdicts)
    errors = [r["error"] for r in epochs if r.get("error")]
    if errors:
        line["doc"]["errors"] = errors
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"
