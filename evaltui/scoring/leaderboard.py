"""The leaderboard's content: datasets x models, an average row, and a ranking.

Kept apart from the renderers so the UI, the headless `--json` output and the summary files
all show the same numbers.  Layout follows OpenCompass's summary: one row per dataset
(`dataset, version, metric, mode, <model scores...>`) and an `Average` row.  A dataset with
more than one metric (pass_at_k of several k: `pass@1`, `pass@10`) has a row per metric, the
main one first; only the main ones make the average.  A model's average
appears in that row only when it has a score for every dataset: a mean over fewer datasets
would not be comparable with the other models'.  The ranking (for the live UI) does use the
partial mean, together with how many datasets it covers.

A score with an uncertainty (stats/interval.py) is shown `71.23 ±2.03`: the half-width of its
95 % interval. The Average's is that of a mean of independent estimates, √(Σ hᵢ²) / k, once
every dataset has one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from .stats import Interval

MISSING = "-"
AVERAGE_ROW = ("Average", MISSING, "naive_average", MISSING)
HEADER_FIXED = ("dataset", "version", "metric", "mode")


class DatasetRow(NamedTuple):
    abbr: str
    version: str
    metric: str
    mode: str
    main: bool = True  # False: another metric of the dataset named above it (pass@10 under pass@1)
    note: str = ""  # shown after the metric: " (subset of 61)" when only some samples were run

    @property
    def label(self) -> str:
        """The metric as the table shows it."""
        return self.metric + self.note


class RankedModel(NamedTuple):
    model: str
    average: float | None  # mean of the scores that exist; None when there are none
    scored: int
    total: int


def format_score(value: float | None, interval: Interval | None = None) -> str:
    """`71.23`, or with an interval `71.23 ±2.03` (its half-width)."""
    if value is None:
        return MISSING
    return f"{float(value):.2f}" if interval is None else f"{float(value):.2f} ±{interval.half:.2f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Leaderboard:
    datasets: tuple[DatasetRow, ...]
    models: tuple[str, ...]
    scores: Mapping[tuple[str, str], float | None] = field(default_factory=dict)  # the main metric's, by (model, dataset)
    extra: Mapping[tuple[str, str, str], float | None] = field(default_factory=dict)  # the others', by (model, dataset, metric)
    intervals: Mapping[tuple[str, str, str], Interval] = field(default_factory=dict)  # every metric's, by (model, dataset, metric)

    def score(self, model: str, dataset: str) -> float | None:
        value = self.scores.get((model, dataset))
        return None if value is None else float(value)

    def value(self, model: str, row: DatasetRow) -> float | None:
        """The model's score in this row: the dataset's main metric, or the row's other one."""
        if row.main:
            return self.score(model, row.abbr)
        value = self.extra.get((model, row.abbr, row.metric))
        return None if value is None else float(value)

    def interval(self, model: str, row: DatasetRow) -> Interval | None:
        """The uncertainty of the model's score in this row, when it has one (and a score)."""
        if self.value(model, row) is None:
            return None
        return self.intervals.get((model, row.abbr, row.metric))

    def average_half(self, model: str) -> float | None:
        """The half-width of the Average's 95 % interval: √(Σ hᵢ²) / k over the k datasets, each
        an independent estimate; None unless every dataset has a score and an interval."""
        if self.average(model) is None:
            return None
        found = self.intervals  # every row has a score (there is an average): interval() is the lookup
        halves = [found.get((model, row.abbr, row.metric)) for row in self.main_rows]
        if any(h is None for h in halves):
            return None
        return math.sqrt(math.fsum(h.half**2 for h in halves if h is not None)) / len(halves)

    @cached_property  # (a Leaderboard does not change: its rows, once found, stay its rows)
    def main_rows(self) -> tuple[DatasetRow, ...]:
        return tuple(row for row in self.datasets if row.main)

    def _present(self, model: str) -> list[float]:
        scores = self.scores  # score(), looked up directly
        found = [scores.get((model, row.abbr)) for row in self.main_rows]
        return [float(value) for value in found if value is not None]

    def average(self, model: str) -> float | None:
        """Mean over all datasets (their main metrics), or None while any of them is unscored."""
        present = self._present(model)
        if not self.main_rows or len(present) < len(self.main_rows):
            return None
        return _mean(present)

    @property
    def header(self) -> list[str]:
        return [*HEADER_FIXED, *self.models]

    def rows(self, intervals: bool = True) -> list[list[str]]:
        """Every cell as display text: the dataset rows, then the Average row; a score with an
        uncertainty as `71.23 ±2.03` (`intervals`: False for the scores alone).

        Made once for each `intervals` (a copy each call): a run's end shows the same table in
        three summary files and on the terminal, 10,000 rows of it with as many datasets."""
        made = self._made_rows.get(intervals)
        if made is None:
            made = self._made_rows[intervals] = self._make_rows(intervals)
        return [list(cells) for cells in made]

    @cached_property
    def _made_rows(self) -> dict[bool, list[list[str]]]:
        return {}

    def _make_rows(self, intervals: bool) -> list[list[str]]:
        """The cells value(), interval() and format_score() make, looked up directly."""
        scores, extra, found = self.scores, self.extra, self.intervals if intervals else {}
        body = []
        for row in self.datasets:
            abbr, metric = row.abbr, row.metric
            cells = [abbr, row.version, row.label, row.mode]
            for m in self.models:
                value = scores.get((m, abbr)) if row.main else extra.get((m, abbr, metric))
                if value is None:
                    cells.append(MISSING)
                    continue
                interval = found.get((m, abbr, metric)) if found else None
                cells.append(f"{float(value):.2f}" if interval is None else f"{float(value):.2f} ±{interval.half:.2f}")
            body.append(cells)
        body.append([*AVERAGE_ROW, *(self._average_cell(m, intervals) for m in self.models)])
        return body

    def as_json(self) -> dict[str, Any]:
        """One entry per dataset (its main metric's scores, and their `uncertainty` by model:
        standard error, 95 % interval, samples); a dataset's other metrics (pass@10 next to pass@1)
        under its `extra`, by metric, theirs under `extra_uncertainty`; the Average's half-width:
        what `--json` and `evaltui report` show."""
        datasets: list[dict[str, Any]] = []
        for row in self.datasets:
            scores = {m: self.value(m, row) for m in self.models}
            found = {m: interval.as_json() for m in self.models if (interval := self.interval(m, row)) is not None}
            if row.main:
                datasets.append({"abbr": row.abbr, "version": row.version, "metric": row.metric, "mode": row.mode, "scores": scores})
                if found:
                    datasets[-1]["uncertainty"] = found
                if row.note:
                    datasets[-1]["note"] = row.note.strip(" ()")
            else:
                datasets[-1].setdefault("extra", {})[row.metric] = scores
                if found:
                    datasets[-1].setdefault("extra_uncertainty", {})[row.metric] = found
        average = {m: self.average(m) for m in self.models}
        return {"models": list(self.models), "datasets": datasets, "average": average, "average_half95": {m: self.average_half(m) for m in self.models}}

    def _average_cell(self, model: str, intervals: bool) -> str:
        text = format_score(self.average(model))
        half = self.average_half(model) if intervals else None
        return text if half is None else f"{text} ±{half:.2f}"

    def halves(self) -> list[list[str]]:
        """Each row's interval half-widths by model, as text ("" where there is none): the CSV
        summary's columns beside the scores, which stay numbers."""
        body = [[_half(self.interval(m, row)) for m in self.models] for row in self.datasets]
        body.append([("" if (h := self.average_half(m)) is None else f"{h:.2f}") for m in self.models])
        return body

    @property
    def has_intervals(self) -> bool:
        return any(self.interval(m, row) is not None for m in self.models for row in self.datasets)

    def ranking(self) -> list[RankedModel]:
        """Best partial mean first; more datasets scored breaks ties; unscored models last."""
        ranked = []
        for model in self.models:
            present = self._present(model)
            ranked.append(RankedModel(model, _mean(present), len(present), len(self.main_rows)))
        order = {model: i for i, model in enumerate(self.models)}
        return sorted(
            ranked,
            key=lambda r: (r.average is None, -(r.average or 0.0), -r.scored, order[r.model]),
        )


def _half(interval: Interval | None) -> str:
    return "" if interval is None else f"{interval.half:.2f}"


def build_leaderboard(
    datasets: Iterable[tuple[str, str, str, str] | DatasetRow],
    models: Iterable[str],
    scores: Mapping[tuple[str, str], float | None],
    extra: Mapping[tuple[str, str, str], float | None] | None = None,
    intervals: Mapping[tuple[str, str, str], Interval] | None = None,
) -> Leaderboard:
    """`datasets` as (abbr, version, metric, mode[, main]) in display order; `scores` by (model,
    abbr); `extra` the other metrics' by (model, abbr, metric); `intervals` every metric's
    uncertainty, by (model, abbr, metric)."""
    return Leaderboard(
        datasets=tuple(row if type(row) is DatasetRow else DatasetRow(*row) for row in datasets),
        models=tuple(models),
        scores=dict(scores),
        extra=dict(extra or {}),
        intervals=dict(intervals or {}),
    )


def rank_models(table: Leaderboard) -> list[RankedModel]:
    return table.ranking()
