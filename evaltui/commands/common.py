"""What the work-dir commands share: naming a work dir and its pairs on the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

from evaltui.engine.disk.records import WorkDirView
from evaltui.engine.disk.workdir import NotAWorkDir


def _abbrs(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list of abbrs")
    return items


def count(value: str) -> int:
    """A command-line count: an integer ≥ 0, in ASCII digits."""
    if not (value.isascii() and value.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a count (an integer ≥ 0), got {value!r}")
    return int(value)


def add_selection(p: argparse.ArgumentParser) -> None:
    """`--models`/`--datasets`, as a run takes them; `--model`/`--dataset` the same (either spelling, every command)."""
    p.add_argument("--models", "--model", dest="models", type=_abbrs, metavar="A,B", help="only these models (abbrs; --model too)")
    p.add_argument("--datasets", "--dataset", dest="datasets", type=_abbrs, metavar="X,Y", help="only these datasets (abbrs; --dataset too)")


class WorkDirArgs(NamedTuple):
    work_dir: str
    models: list[str] | None
    datasets: list[str] | None


def read_work_dir(args: WorkDirArgs) -> WorkDirView | None:
    """The work dir read back; None after one line on stderr saying why it cannot be (exit 2)."""
    try:
        view = WorkDirView(Path(args.work_dir))
    except NotAWorkDir as e:
        print(f"evaltui: {e}", file=sys.stderr)
        return None
    problem = unknown_abbrs([view], [args.work_dir], args.models, args.datasets)
    if problem:
        print(f"evaltui: {problem}", file=sys.stderr)
        return None
    return view


def unknown_abbrs(views: list[WorkDirView], names: list[str], models: list[str] | None, datasets: list[str] | None) -> str | None:
    """The selection's first abbr that none of the work dirs has, as one line naming it and what
    they have (`compare` said "no model×dataset is scored in both" for a typo); None when all are known."""
    for flag, wanted, kind in (("--model", models, "tested"), ("--dataset", datasets, "datasets")):
        known = [[c.abbr for c in getattr(v.plan, kind)] for v in views]
        unknown = [w for w in wanted or [] if not any(w in k for k in known)]
        if unknown:
            where = names[0] if len(names) == 1 else f"{names[0]} or {names[1]}"
            has = list(dict.fromkeys(a for k in known for a in k))
            return f"{flag}: {', '.join(map(repr, unknown))} not in {where} ({'it has' if len(names) == 1 else 'they have'}: {', '.join(has)})"
    return None
