"""Command line: `evaltui PLAN.toml [--no-ui]`, `evaltui watch WORK_DIR`, `evaltui serve-sim`, `--help`, `--version`.

Only the interactive path may import textual; this module and the headless path never do, so a
`--no-ui` run starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evaltui import __version__
from evaltui.cliargs import OneLineParser
from evaltui.exitcode import ExitCode

if TYPE_CHECKING:
    from evaltui.engine.run.runner import Runner
    from evaltui.engine.stream.source import RunSource


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list of abbrs")
    return items


def _samples(value: str) -> list[int]:
    from evaltui.plan import parse_samples

    try:
        return parse_samples(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e} (expected e.g. 3,17,40-60)") from None


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="evaltui",
        description="Evaluate LLMs served over HTTP: concurrent inference, live scoring, a leaderboard.",
        epilog="Also: `evaltui watch --help` (follow a run from its work dir), `evaltui show --help` (each sample of a run; "
        "--export), `evaltui compare --help` (two runs side by side), `evaltui report --help` (a run as one HTML file), "
        "`evaltui benchmarks --help` (the standard benchmarks a plan can name) "
        "and `evaltui serve-sim --help` (the bundled simulated model server).",
    )
    p.add_argument("plan", metavar="PLAN.toml", help="the evaluation plan (see README.md)")
    p.add_argument("--no-ui", action="store_true", help="run headless: plain progress lines and the final table")
    p.add_argument("--work-dir", metavar="DIR", help="where predictions, results and logs go (overrides the plan)")
    p.add_argument("--fresh", action="store_true", help="ignore earlier predictions in the work dir and start over")
    p.add_argument("--models", "--model", dest="models", type=_csv, metavar="A,B", help="run only these models (abbrs; --model too)")
    p.add_argument("--datasets", "--dataset", dest="datasets", type=_csv, metavar="X,Y", help="run only these datasets (abbrs; --dataset too)")
    p.add_argument("--samples", type=_samples, metavar="3,17,40-60", help="run only these samples (indices from 0) of each dataset (scored as a subset)")
    p.add_argument("--theme", metavar="NAME", help="interactive session: the theme to use (see themes/; remembered)")
    p.add_argument("--json", action="store_true", help="headless: print the final summary as JSON on stdout")
    p.add_argument("--executor", choices=("local", "ray"), help="where the requests (and code_exec) run: here, or on a Ray cluster (overrides run.executor)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="executor ray: the cluster's head node, HOST:PORT (default: RAY_ADDRESS, else a Ray instance started on this machine for the run)")
    p.add_argument("--version", action="version", version=f"evaltui {__version__}")
    return p


def entry() -> None:
    """The console script: `main`, then leave without the interpreter's slow teardown.

    Everything a run writes is flushed or closed by then; skipping the module teardown saves
    tens of milliseconds on every invocation, which matters to scripted use and benchmarks.
    """
    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C before the run could catch it (e.g. while a plan is checked)
        code = ExitCode.INTERRUPTED
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # the reader has gone (`| head`)
            stream.flush()
    os._exit(code)


COMMANDS = """\
evaltui: give a plan to run, or a command:
  evaltui PLAN.toml [--no-ui]     run a plan (on a terminal: the interactive session)
  evaltui watch WORK_DIR          follow a run from its work dir (another's, a finished one, OpenCompass's)
  evaltui show WORK_DIR           each sample of a run: verdict, error, attempts (--export json)
  evaltui compare A B             two runs side by side: scores, delta, flipped samples
  evaltui benchmarks              the standard benchmarks a plan can name
  evaltui serve-sim               the bundled simulated model server
  evaltui --help                  every option of a run (and `evaltui COMMAND --help`)
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # a newcomer's first try: what there is to do, not one line about a missing argument
        sys.stderr.write(COMMANDS)
        return ExitCode.USAGE
    if argv and argv[0] == "serve-sim":
        from evaltui.sim.cli import main as sim_main

        return sim_main(argv[1:], prog="evaltui serve-sim")
    if argv and argv[0] == "watch":
        return watch_main(argv[1:])
    if argv and argv[0] in ("show", "compare", "report", "benchmarks"):  # commands over work dirs and the catalog (evaltui/commands/)
        from evaltui.commands import run_command

        return run_command(argv[0], argv[1:])
    args = build_parser().parse_args(argv)

    from evaltui.plan import PlanError, load_plan, select

    try:
        full_plan = load_plan(Path(args.plan))
        if args.executor:
            full_plan = full_plan.model_copy(update={"run": full_plan.run.model_copy(update={"executor": args.executor})})
        plan = select(full_plan, args.models, args.datasets, args.samples)
    except PlanError as e:
        for line in e.problems:
            print(line, file=sys.stderr)
        return ExitCode.USAGE

    if plan.run.executor != "ray" and args.ray_address:
        print(f"{plan.source.name}: --ray-address: the plan runs here (run.executor = \"local\"); add --executor ray to run it on Ray", file=sys.stderr)
        return ExitCode.USAGE

    from evaltui.engine.disk.guard import WorkDirRefused
    from evaltui.engine.disk.workdir import in_use
    from evaltui.engine.run.runner import Runner

    if any(d.evaluator.type == "code_exec" for d in plan.datasets):
        from evaltui.redaction import undumpable

        undumpable()
    try:
        runner = Runner(plan, work_dir=args.work_dir, fresh=args.fresh, snapshot_of=full_plan, ray_address=args.ray_address)
    except WorkDirRefused as e:
        print(f"{plan.source.name}: {_work_dir_field(args)}: {e}", file=sys.stderr)
        return ExitCode.USAGE
    holder = runner.workdir.holder()  # said here, before the run or the TUI starts; Runner.run() says it too
    if holder is not None:
        print(f"{plan.source.name}: {_work_dir_field(args)}: {runner.workdir.root} {in_use(holder)}", file=sys.stderr)
        return ExitCode.USAGE
    return _run(runner, args) if plan.run.executor != "ray" else _run_on_ray(runner, args)


def _work_dir_field(args: argparse.Namespace) -> str:
    return "--work-dir" if args.work_dir is not None else "run.work_dir"


def _run_on_ray(runner: Runner, args: argparse.Namespace) -> int:
    """Join the cluster (after the plan and the work dir: the quick refusals first), then run."""
    from evaltui.engine.ray.connect import RayUnavailable, address_from, connect, disconnect

    address = address_from(args.ray_address)
    if address is not None:
        field = "--ray-address" if args.ray_address else "RAY_ADDRESS"
    else:
        field = "--executor ray" if args.executor == "ray" else "run.executor"
    if sys.stderr.isatty():  # the seconds before the first line or the screen
        print(f"evaltui: joining the Ray cluster at {address} …" if address else "evaltui: starting a Ray instance on this machine …", file=sys.stderr)
    try:
        connect(address, hide=runner.plan.key_variables())
    except RayUnavailable as e:
        print(f"{runner.plan.source.name}: {field}: {e}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        return _run(runner, args)
    finally:
        disconnect()  # os._exit follows: a Ray instance started here must not outlive the run


def _run(runner: Runner, args: argparse.Namespace) -> int:
    from evaltui.headless import run_headless

    headless = args.no_ui or args.json or not sys.stdout.isatty()
    if not headless:
        return _run_interactive(runner, args.theme)
    return run_headless(runner, as_json=args.json)


def build_watch_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="evaltui watch",
        description=(
            "Follow a run from its work dir, read-only: one another evaltui is writing (from cron, CI, another shell), "
            "one that has ended or was killed, or an OpenCompass run (outputs/<name>/<timestamp>). "
            "It never writes to the work dir and never takes its lock."
        ),
        epilog="It cannot retry: r and R say how. An evaltui run is retried from the session that runs it, or by "
        "`evaltui PLAN.toml` once it has ended (resuming it, rerunning only what failed); an OpenCompass run by running OpenCompass again.",
    )
    p.add_argument("work_dir", metavar="WORK_DIR", help="the run's work dir (evaltui's, or an OpenCompass outputs/<name>/<timestamp>)")
    p.add_argument(
        "--no-ui", action="store_true",
        help="print the progress lines of a headless run until the run ends, then the leaderboard (exit 2 at once for a folder "
        "with nothing to follow that nothing has written for heartbeat_timeout; an empty one is waited for)",
    )
    p.add_argument("--theme", metavar="NAME", help="the interactive view's theme (see themes/; remembered)")
    return p


def watch_main(argv: list[str]) -> int:
    """`evaltui watch`: exit 0 when every pair the run took up was scored, 1 otherwise (also
    when left before the run ended), 2 when the folder is no work dir (or, headless, holds
    nothing to follow and nothing writes it: it would wait for ever), 130 on Ctrl-C."""
    args = build_watch_parser().parse_args(argv)
    from evaltui.engine.disk.workdir import NotAWorkDir
    from evaltui.engine.follow.follower import Follower, open_view
    from evaltui.headless import follow_headless

    try:
        view = open_view(Path(args.work_dir).resolve())
    except NotAWorkDir as e:
        print(f"evaltui watch: {e}", file=sys.stderr)
        return ExitCode.USAGE
    headless = args.no_ui or not sys.stdout.isatty()
    follower = Follower(view, until_over=headless)
    why = follower.unusable() if headless else None
    if why is not None:
        print(f"evaltui watch: {why}", file=sys.stderr)
        return ExitCode.USAGE
    if not headless:
        return _run_interactive(follower, args.theme)
    try:
        return follow_headless(follower, follower.log_interval, epochs=follower.epochs)
    except BaseException as e:
        from evaltui.fsutil import unreadable_in

        bad = unreadable_in(e)  # a file of the work dir that is no file of its kind: one line, as a bad work dir
        if bad is None:
            raise
        print(f"evaltui watch: {bad}", file=sys.stderr)
        return ExitCode.USAGE


def _run_interactive(runner: RunSource, theme: str | None) -> int:
    """The Textual session; textual is imported here and only here."""
    from evaltui.ui.launch import run_app
    from evaltui.ui.themes import load_themes

    themes = load_themes()
    # A typo is a usage error; a theme whose file is broken is not: the app says so and falls back.
    if theme is not None and theme not in themes.themes and theme not in _builtin_themes() and not themes.problems:
        builtin = sorted(_builtin_themes() - set(themes.themes))
        print(f"evaltui: --theme: no theme named {theme!r} (evaltui's: {', '.join(themes.cycle())}; Textual's: {', '.join(builtin)})", file=sys.stderr)
        return ExitCode.USAGE
    return run_app(runner, theme=theme, themes=themes)


def _builtin_themes() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return set(BUILTIN_THEMES)
