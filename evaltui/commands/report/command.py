"""`evaltui report WORK_DIR [-o report.html]`: a run as one HTML file to look at and send on."""

from __future__ import annotations

import sys
from pathlib import Path

from evaltui.cliargs import OneLineParser
from evaltui.commands.export import output_problem
from evaltui.exitcode import ExitCode
from evaltui.fsutil import atomic_writer

DEFAULT_OUTPUT = "report.html"


def build_parser() -> OneLineParser:
    p = OneLineParser(
        prog="evaltui report",
        description="Write a run as one self-contained HTML file: its leaderboard, a chart of models × datasets, each dataset's samples "
        "(filter, search), failures by class, latency and throughput over the run.",
        epilog="Reads the work dir only (a run in progress gives a snapshot of it; an OpenCompass work dir works too). "
        "The file needs nothing else: open it from disk, attach it, keep it as a CI artifact. See README.md, 'A report to share'.",
    )
    p.add_argument("work_dir", metavar="WORK_DIR", help="the run's work dir (evaltui's, or an OpenCompass outputs/<name>/<timestamp>)")
    p.add_argument("-o", "--output", metavar="FILE", default=DEFAULT_OUTPUT, help=f"the file to write (default: {DEFAULT_OUTPUT} in the current folder)")
    return p


def main(argv: list[str]) -> int:
    from evaltui.commands.report.page import write_report
    from evaltui.commands.report.source import NotAWorkDir, ReportSource

    args = build_parser().parse_args(argv)
    root = Path(args.work_dir)
    try:
        source = ReportSource(root)
    except NotAWorkDir as e:
        print(f"evaltui report: {e}", file=sys.stderr)
        return ExitCode.USAGE
    problem = output_problem(args.output, root)
    if problem:
        print(f"evaltui report: -o {args.output}: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        with atomic_writer(args.output) as f:
            summary = write_report(source, f)
    except OSError as e:
        print(f"evaltui report: -o {args.output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return ExitCode.USAGE
    done = summary["totals"]
    state = "a snapshot of a run in progress" if summary["live"] else "the run"
    print(f"{args.output}: {state}: {len(summary['pairs'])} model×datasets, {done['completed']:,} samples done, {done['failed']:,} failed")
    return ExitCode.OK
