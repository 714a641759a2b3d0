"""The leaderboard's content: datasets x models, an average row, and a ranking.

Kept apart from the renderers so the UI, the headless `--json` output and the summary files
all show the same numbers.  Layout follows OpenCompass's summary: one row per dataset
(`dataset, version, metric, mode, <model scores...>`) and an `Average` row.  A dataset with
more than one metric (pass_at_k of several k: `pass@1`, `pass@10`) has a row per metric, the
main one first; only the main ones make the average.  A model's average
appears in that row only when it has a score for every dataset: a mean over fewer datasets
would not be comparable with the other models'.  The ranking (for the live UI) does use the
partial mean, together with how many datasets it covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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


def format_score(value: float | None) -> str:
    return MISSING if value is None else f"{float(value):.2f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Leaderboard:
    datasets: tuple[DatasetRow, ...]
    models: tuple[str, ...]
    scores: Mapping[tuple[str, str], float | None] = field(default_factory=dict)  # the main metric's, by (model, dataset)
    extra: Mapping[tuple[str, str, str], float | None] = field(default_factory=dict)  # the others', by (model, dataset, metric)

    def score(self, model: str, dataset: str) -> float | None:
        value = self.scores.get((model, dataset))
        return None if value is None else float(value)

    def value(self, model: str, row: DatasetRow) -> float | None:
        """The model's score in this row: the dataset's main metric, or the row's other one."""
        if row.main:
            return self.score(model, row.abbr)
        value = self.extra.get((model, row.abbr, row.metric))
        return None if value is None else float(value)

    @property
    def main_rows(self) -> tuple[DatasetRow, ...]:
        return tuple(row for row in self.datasets if row.main)

    def _present(self, model: str) -> list[float]:
        found = (self.score(model, row.abbr) for row in self.main_rows)
        return [value for value in found if value is not None]

    def average(self, model: str) -> float | None:
        """Mean over all datasets (their main metrics), or None while any of them is unscored."""
        present = self._present(model)
        if not self.main_rows or len(present) < len(self.main_rows):
            return None
        return _mean(present)

    @property
    def header(self) -> list[str]:
        return [*HEADER_FIXED, *self.models]

    def rows(self) -> list[list[str]]:
        """Every cell as display text: the dataset rows, then the Average row."""
        body = [
            [row.abbr, row.version, row.label, row.mode, *(format_score(self.value(model, row)) for model in self.models)]
            for row in self.datasets
        ]
        body.append([*AVERAGE_ROW, *(format_score(self.average(model)) for model in self.models)])
        return body

    def as_json(self) -> dict[str, Any]:
        """One entry per dataset (its main metric's scores); a dataset's other metrics (pass@10 next
        to pass@1) under its `extra`, by metric: what `--json` and `evaltui report` show."""
        datasets: list[dict[str, Any]] = []
        for row in self.datasets:
            scores = {m: self.value(m, row) for m in self.models}
            if row.main:
                datasets.append({"abbr": row.abbr, "version": row.version, "metric": row.metric, "mode": row.mode, "scores": scores})
                if row.note:
                    datasets[-1]["note"] = row.note.strip(" ()")
            else:
                datasets[-1].setdefault("extra", {})[row.metric] = scores
        return {"models": list(self.models), "datasets": datasets, "average": {m: self.average(m) for m in self.models}}

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


def build_leaderboard(
    datasets: Iterable[tuple[str, str, str, str] | DatasetRow],
    models: Iterable[str],
    scores: Mapping[tuple[str, str], float | None],
    extra: Mapping[tuple[str, str, str], float | None] | None = None,
) -> Leaderboard:
    """`datasets` as (abbr, version, metric, mode[, main]) in display order; `scores` by (model,
    abbr); `extra` the other metrics' by (model, abbr, metric)."""
    return Leaderboard(
        datasets=tuple(DatasetRow(*row) for row in datasets),
        models=tuple(models),
        scores=dict(scores),
        extra=dict(extra or {}),
    )


def rank_models(table: Leaderboard) -> list[RankedModel]:
    return table.ranking()
