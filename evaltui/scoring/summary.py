"""The leaderboard as files: plain text, CSV and markdown, written under `summary/`.

Three formats because they have three readers: people at a terminal (`.txt`, aligned like
tabulate's default), spreadsheets and scripts (`.csv`), and reports or pull requests (`.md`).
None of them carries colour codes.  The files are written atomically, so a reader never sees
half a table.
"""

from __future__ import annotations

import csv
import io
import os
from datetime import datetime
from pathlib import Path

from evaltui.fsutil import atomic_write_text

from .leaderboard import HEADER_FIXED, Leaderboard

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
