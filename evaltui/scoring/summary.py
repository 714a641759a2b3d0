"""A plan's leaderboard, and the leaderboard as files: plain text, CSV and markdown, under `summary/`.

Three formats because they have three readers: people at a terminal (`.txt`, aligned like
tabulate's default), spreadsheets and scripts (`.csv`), and reports or pull requests (`.md`).
None of them carries colour codes.  The files are written atomically, so a reader never sees
half a table.  `RunSummary` is the runner's: the rows of its plan and, once a run ends, the
scores its result files hold.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.fsutil import atomic_write_text

from .leaderboard import HEADER_FIXED, DatasetRow, Leaderboard, build_leaderboard
from .score import main_metric
from .version import dataset_version

if TYPE_CHECKING:
    from evaltui.plan import DatasetConfig, Plan

_GAP = "  "


def _cells(table: Leaderboard) -> tuple[list[str], list[list[str]]]:
    return table.header, table.rows()


def _right_aligned(column: int) -> bool:
    """Score columns are numbers and read best right-aligned; the leading four are text."""
    return column >= len(HEADER_FIXED)


def _widths(header: list[str], rows: list[list[str]]) -> list[int]:
    return [max(len(line[c]) for line in [header, *rows]) for c in range(len(header))]


def _pad(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def render_txt(table: Leaderboard) -> str:
    header, rows = _cells(table)
    widths = _widths(header, rows)

    def line(cells: list[str]) -> str:
        return _GAP.join(_pad(cell, widths[c], _right_aligned(c)) for c, cell in enumerate(cells)).rstrip()

    rule = _GAP.join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)]) + "\n"


def render_csv(table: Leaderboard) -> str:
    header, rows = _cells(table)
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
    rows = [[_md_escape(cell) for cell in row] for row in rows]
    widths = [max(3, w) for w in _widths(header, rows)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(_pad(cell, widths[c], _right_aligned(c)) for c, cell in enumerate(cells)) + " |"

    rule = "|" + "|".join(
        ("-" * (width + 1) + ":") if _right_aligned(c) else ("-" * (width + 2)) for c, width in enumerate(widths)
    ) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)]) + "\n"


RENDERERS = {"txt": render_txt, "csv": render_csv, "md": render_md}


def write_summary(work_dir: str | os.PathLike[str], table: Leaderboard, now: datetime | None = None) -> dict[str, Path]:
    """`<work_dir>/summary/summary_<YYYYmmdd_HHMMSS>.{txt,csv,md}`, paths keyed by extension."""
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    folder = Path(work_dir) / "summary"
    paths = {}
    for ext, render in RENDERERS.items():
        path = folder / f"summary_{stamp}.{ext}"
        atomic_write_text(path, render(table))
        paths[ext] = path
    return paths


class RunSummary:
    """The leaderboard of one plan: its rows, computed once (the plan is fixed), with any scores."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.models = [m.abbr for m in plan.models]
        self._rows: tuple[DatasetRow, ...] | None = None

    def rows(self) -> tuple[DatasetRow, ...]:
        """The leaderboard's rows (abbr, version, metric, mode).

        The version hashes each dataset as the resolved plan records it (`<work_dir>/plan.toml`),
        so `./data/x.jsonl` and `data/x.jsonl` are the same dataset in every summary."""
        if self._rows is None:
            self._rows = tuple(DatasetRow(d.abbr, self._version(d), main_metric(d.evaluator.type), d.mode) for d in self.plan.datasets)
        return self._rows

    def _version(self, d: DatasetConfig) -> str:
        return dataset_version({**d.model_dump(mode="json"), "path": str(self.plan.dataset_path(d).resolve())})

    def leaderboard(self, scores: Mapping[tuple[str, str], float | None]) -> Leaderboard:
        return build_leaderboard(self.rows(), self.models, scores)

    def result_scores(self, read_result: Callable[[str, str], Mapping[str, Any] | None]) -> dict[tuple[str, str], float | None]:
        """Every pair's main metric as its result file holds it (`read_result(model, dataset)`);
        None for a pair not scored, failed, or whose file cannot be read."""
        scores: dict[tuple[str, str], float | None] = {}
        for m in self.plan.models:
            for d in self.plan.datasets:
                try:
                    result = read_result(m.abbr, d.abbr)
                except OSError:
                    result = None
                metric = main_metric(d.evaluator.type)
                value = result.get(metric) if result and "error" not in result else None
                scores[(m.abbr, d.abbr)] = value if isinstance(value, (int, float)) else None
        return scores
