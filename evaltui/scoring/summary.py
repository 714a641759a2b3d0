"""A plan's leaderboard, and the leaderboard as files: plain text, CSV and markdown, under `summary/`.

Three formats because they have three readers: people at a terminal (`.txt`, aligned like
tabulate's default), spreadsheets and scripts (`.csv`), and reports or pull requests (`.md`).
None of them carries colour codes.  The files are written atomically, so a reader never sees
half a table.  `RunSummary` is the runner's: the rows of its plan and, once a run ends, the
scores its result files hold.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evaltui.fsutil import atomic_write_text, real_path_text
from evaltui.latency import ProfileSnapshot
from evaltui.plan.strict import settings_key

from .leaderboard import HEADER_FIXED, DatasetRow, Leaderboard, build_leaderboard
from .reducers import Reduction
from .stats import Interval

if TYPE_CHECKING:
    from evaltui.plan import DatasetConfig, Plan

_GAP = "  "


def _cells(table: Leaderboard) -> tuple[list[str], list[list[str]]]:
    return table.header, table.rows()


def _right_aligned(column: int) -> bool:
    """Score columns are numbers and read best right-aligned; the leading four are text."""
    return column >= len(HEADER_FIXED)


def _widths(header: list[str], rows: list[list[str]]) -> list[int]:
    return [max(map(len, column)) for column in zip(header, *rows, strict=True)]


def render_txt(table: Leaderboard) -> str:
    header, rows = _cells(table)
    widths = _widths(header, rows)

    columns = _columns(widths)

    def line(cells: list[str]) -> str:
        return _GAP.join([pad(cell, width) for cell, (pad, width) in zip(cells, columns, strict=True)]).rstrip()

    rule = _GAP.join("-" * width for width in widths)
    return "\n".join([line(header), rule, *map(line, rows)]) + "\n"


def _columns(widths: list[int]) -> list[tuple[Callable[[str, int], str], int]]:
    """Each column's padding (numbers right-aligned) and width, made once for every line."""
    return [(str.rjust if _right_aligned(c) else str.ljust, width) for c, width in enumerate(widths)]


def render_csv(table: Leaderboard) -> str:
    """The scores as numbers (`71.23`); with intervals, a `<model> ±95%` column per model after
    them holds each score's half-width, so a spreadsheet reads both as numbers."""
    header, rows = table.header, table.rows(intervals=False)
    if table.has_intervals:
        header = [*header, *(f"{m} ±95%" for m in table.models)]
        rows = [[*row, *halves] for row, halves in zip(rows, table.halves(), strict=True)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")


def render_md(table: Leaderboard) -> str:
    header, rows = _cells(table)
    header = [_md_escape(cell) for cell in header]
    rows = [[_md_escape(cell) if "|" in cell or "\\" in cell else cell for cell in row] for row in rows]
    widths = [max(3, w) for w in _widths(header, rows)]
    columns = _columns(widths)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join([pad(cell, width) for cell, (pad, width) in zip(cells, columns, strict=True)]) + " |"

    rule = "|" + "|".join(
        ("-" * (width + 1) + ":") if _right_aligned(c) else ("-" * (width + 2)) for c, width in enumerate(widths)
    ) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)]) + "\n"


RENDERERS = {"txt": render_txt, "csv": render_csv, "md": render_md}


def write_summary(
    work_dir: str | os.PathLike[str], table: Leaderboard, now: datetime | None = None, models: Sequence[ModelRow] = ()
) -> dict[str, Path]:
    """`<work_dir>/summary/summary_<YYYYmmdd_HHMMSS>.{txt,csv,md}`, paths keyed by extension;
    with `models` (each one's latency profile and, priced, cost) their tables below the leaderboard
    in the txt and md, and `models_<stamp>.csv` (and `cost_<stamp>.csv`) beside them."""
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    folder = Path(work_dir) / "summary"
    extra = {"txt": render_models_txt, "md": render_models_md} if models else {}
    paths = {}
    for ext, render in RENDERERS.items():
        path = folder / f"summary_{stamp}.{ext}"
        text = render(table)
        if ext in extra:
            text += "\n" + extra[ext](models)
        atomic_write_text(path, text)
        paths[ext] = path
    if models:  # (beside the leaderboard's files, not among them: OpenCompass's readers take summary_*)
        atomic_write_text(folder / f"models_{stamp}.csv", render_models_csv(models))
    if any(m.cost is not None for m in models):
        atomic_write_text(folder / f"cost_{stamp}.csv", render_cost_csv(models))
    return paths


def dataset_version(config_dict: dict[str, Any]) -> str:
    """The leaderboard's `version` column: which dataset configuration produced a score.

    Two runs whose prompts, evaluator or data differ must not be compared as if equal, so the
    column is a short hash of the whole dataset configuration; the same configuration always
    gives the same hash, whatever order its keys were written in."""
    canonical = _CANONICAL.encode(config_dict)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:6]


# json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str), made once:
# dumps makes a new encoder for every call that passes `default`, and a plan hashes 10,000 datasets
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
_OWN = ("abbr", "path")  # what two datasets of the same settings do not share


def _around(data: dict[str, Any]) -> tuple[str, str, str]:
    """dataset_version's canonical JSON of `data` (a dataset's, without its abbr and path) in the
    three pieces around where its "abbr" and "path" go, by their sorted places: `head` ends at
    `"abbr":`, `middle` lies between the abbr's value and `"path":`, `tail` follows the path's.
    Made once for each set of settings: the datasets of a plan of 10,000 have a few."""
    items = [(k, f"{_CANONICAL.encode(k)}:{_CANONICAL.encode(v)}") for k, v in sorted(data.items())]
    before = [item for k, item in items if k < "abbr"]
    between = [item for k, item in items if "abbr" < k < "path"]
    after = [item for k, item in items if k > "path"]
    head = "{" + "".join(item + "," for item in before) + '"abbr":'
    middle = "," + "".join(item + "," for item in between) + '"path":'
    tail = "".join("," + item for item in after) + "}"
    return head, middle, tail


class RunSummary:
    """The leaderboard of one plan: its rows, computed once (the plan is fixed), with any scores."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.models = [m.abbr for m in plan.tested]
        self._rows: tuple[DatasetRow, ...] | None = None
        self._names: dict[str, tuple[str, ...]] = {}  # each dataset's metrics, by abbr (_metrics)
        self._parts: dict[tuple[bytes, int], tuple[str, str, str]] = {}  # _around's, by the settings and epochs (_version)

    def rows(self) -> tuple[DatasetRow, ...]:
        """The leaderboard's rows (abbr, version, metric, mode): one per dataset, and one more
        for each of its other metrics (pass_at_k of several k).

        The version hashes each dataset as the resolved plan records it (`<work_dir>/plan.toml`),
        so `./data/x.jsonl` and `data/x.jsonl` are the same dataset in every summary."""
        if self._rows is None:
            rows = []
            folders: dict[str, str] = {}  # the data files' folders, each resolved once (real_path_text)
            for d in self.plan.datasets:
                version = self._version(d, folders)
                # a selection's score is not the dataset's: it says so (and its version differs)
                subset = "" if d.sample_ids is None else f" (subset of {len(d.sample_ids)})"
                main, *others = self._metrics(d)
                rows.append(DatasetRow(d.abbr, version, main, d.mode, note=subset))
                rows.extend(DatasetRow(d.abbr, version, metric, d.mode, main=False, note=subset) for metric in others)
            self._rows = tuple(rows)
        return self._rows

    def _metrics(self, d: DatasetConfig) -> tuple[str, ...]:
        names = self._names.get(d.abbr)
        if names is None:
            names = self._names[d.abbr] = Reduction.of(d.evaluator, self.plan.epochs(d)).metrics
        return names

    def _version(self, d: DatasetConfig, folders: dict[str, str]) -> str:
        if d.benchmark:  # the reference's task and version, and a hash of what the plan changed
            from evaltui.plan.benchmark import version_label

            return version_label(d)
        path = real_path_text(self.plan.dataset_path(d), folders)
        count = self.plan.epochs(d).count
        key = settings_key(d, _OWN)
        parts = None if key is None else self._parts.get((key, count))
        if parts is None:
            data = d.versioned_dump()
            for name in (*_OWN, "epochs"):
                data.pop(name, None)
            if count != 1:  # as resolved: the run's epochs and the dataset's own are the same thing
                data["epochs"] = count
            parts = _around(data)
            if key is not None:
                self._parts[(key, count)] = parts
        head, middle, tail = parts
        canonical = head + _CANONICAL.encode(d.abbr) + middle + _CANONICAL.encode(path) + tail
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:6]

    def leaderboard(
        self,
        scores: Mapping[tuple[str, str], float | None],
        extra: Mapping[tuple[str, str, str], float | None] | None = None,
        intervals: Mapping[tuple[str, str, str], Interval] | None = None,
    ) -> Leaderboard:
        return build_leaderboard(self.rows(), self.models, scores, extra, intervals)

    def result_metrics(self, read_result: Callable[[str, str], Mapping[str, Any] | None]) -> ResultMetrics:
        """The main metric of every pair, by (model, dataset), its other metrics, by (model,
        dataset, metric), and every metric's uncertainty, as the result files hold them."""
        scores: dict[tuple[str, str], float | None] = {}
        extra: dict[tuple[str, str, str], float | None] = {}
        intervals: dict[tuple[str, str, str], Interval] = {}
        for m in self.plan.tested:
            for d in self.plan.datasets:
                try:
                    result = read_result(m.abbr, d.abbr)
                except OSError:
                    result = None
                usable = result if result and "error" not in result else {}
                main, *others = self._metrics(d)
                scores[(m.abbr, d.abbr)] = _number(usable.get(main))
                for metric in others:
                    extra[(m.abbr, d.abbr, metric)] = _number(usable.get(metric))
                for metric, interval in result_intervals(usable):
                    intervals[(m.abbr, d.abbr, metric)] = interval
        return ResultMetrics(scores, extra, intervals)


class ResultMetrics(NamedTuple):
    scores: dict[tuple[str, str], float | None]
    extra: dict[tuple[str, str, str], float | None]
    intervals: dict[tuple[str, str, str], Interval]


def result_intervals(result: Mapping[str, Any] | None) -> tuple[tuple[str, Interval], ...]:
    """A result file's `uncertainty`, each metric's Interval (none in an older result, or an error)."""
    found = (result or {}).get("uncertainty")
    if not isinstance(found, dict):
        return ()
    pairs = ((str(metric), Interval.from_json(data)) for metric, data in found.items())
    return tuple((metric, interval) for metric, interval in pairs if interval is not None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# -- the models' tables: each one's latency profile and throughput; priced, its tokens and cost

MODELS_HEADER = ("model", "answered", "latency p50", "p90", "p99", "ttft p50", "ttft p90", "ttft p99", "itl p50", "req/s", "tokens/s")
CSV_HEADER = ("model", "answered", "latency_p50_s", "latency_p90_s", "latency_p99_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "itl_p50_s",
              "requests_per_s", "tokens_per_s")


class ModelRow(NamedTuple):
    model: str
    profile: ProfileSnapshot
    usage: tuple[tuple[str, int, int, float], ...] = ()  # priced: (dataset, prompt tokens, completion tokens, cost), this run
    cost: float | None = None  # priced: the model's, this run


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _digits(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _model_cells(r: ModelRow) -> list[str]:
    p = r.profile
    return [r.model, str(p.requests), *map(_seconds, p.latency), *map(_seconds, p.ttft), _seconds(p.itl.p50),
            _digits(p.requests_per_s, 1), _digits(p.tokens_per_s, 0)]


def _cost_rows(rows: Sequence[ModelRow]) -> list[list[str]]:
    out = []
    for r in rows:
        if r.cost is None:
            continue
        out += [[r.model, d, f"{p:,}", f"{c:,}", f"{cost:.4f}"] for d, p, c, cost in r.usage]
        out.append([r.model, "(all)", f"{sum(x[1] for x in r.usage):,}", f"{sum(x[2] for x in r.usage):,}", f"{r.cost:.4f}"])
    return out


COST_HEADER = ("model", "dataset", "prompt tokens", "completion tokens", "cost")


def _txt_table(header: Sequence[str], rows: list[list[str]], left: int) -> list[str]:
    table = [list(header), *rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) if c < left else cell.rjust(w) for c, (cell, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(table[0]), "  ".join("-" * w for w in widths), *(line(r) for r in table[1:])]


def render_models_txt(rows: Sequence[ModelRow]) -> str:
    title = "Latency and throughput of this run's requests (ttft: time to first token, itl: between tokens; streamed requests only)"
    out = [title, "", *_txt_table(MODELS_HEADER, [_model_cells(r) for r in rows], 1)]
    costs = _cost_rows(rows)
    if costs:
        out += ["", "Cost of this run's tokens (as the servers counted them; the models' prices per million)", ""]
        out += _txt_table(COST_HEADER, costs, 2)
    return "\n".join(out) + "\n"


def render_models_md(rows: Sequence[ModelRow]) -> str:
    rule = "|" + "|".join("---" if c == 0 else "---:" for c in range(len(MODELS_HEADER))) + "|"
    lines = ["### Latency and throughput", "", "| " + " | ".join(MODELS_HEADER) + " |", rule]
    lines += ["| " + " | ".join(_model_cells(r)) + " |" for r in rows]
    costs = _cost_rows(rows)
    if costs:
        lines += ["", "### Cost", "", "| " + " | ".join(COST_HEADER) + " |", "|---|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(c) + " |" for c in costs]
    return "\n".join(lines) + "\n"


def render_cost_csv(rows: Sequence[ModelRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("model", "dataset", "prompt_tokens", "completion_tokens", "cost"))
    for r in rows:
        for d, p, c, cost in r.usage if r.cost is not None else ():
            writer.writerow((r.model, d, p, c, f"{cost:.6g}"))
    return out.getvalue()


def render_models_csv(rows: Sequence[ModelRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for r in rows:
        p = r.profile
        numbers = [*p.latency, *p.ttft, p.itl.p50, p.requests_per_s, p.tokens_per_s]
        writer.writerow([r.model, p.requests, *("" if v is None else f"{v:.6g}" for v in numbers)])
    return out.getvalue()
