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
    named = (("--model", args.models, [m.abbr for m in view.plan.tested]), ("--dataset", args.datasets, [d.abbr for d in view.plan.datasets]))
    for flag, wanted, known in named:
        unknown = [w for w in wanted or [] if w not in known]
        if unknown:
            print(f"evaltui: {flag}: {', '.join(map(repr, unknown))} not in {args.work_dir} (it has: {', '.join(known)})", file=sys.stderr)
            return None
    return view
