"""Run the interactive session for a run's source (a runner, or a follower), and when it ends,
say where the user stands: the leaderboard, why each failed dataset failed and what would change
it, the work dir and the summary files — on the terminal, as `--no-ui` ends, so that nothing of
it is lost with the screen. Returns the exit code of SPEC §2."""

from __future__ import annotations

import sys
from typing import TextIO

from evaltui.engine.stream.events import PairStatus
from evaltui.engine.stream.source import RunSource
from evaltui.scoring import render_txt
from evaltui.ui.app import EvalApp
from evaltui.ui.screens.run import RunScreen
from evaltui.ui.themes import ThemeSet


def run_app(runner: RunSource, *, theme: str | None, themes: ThemeSet, out: TextIO | None = None, headless: bool = False) -> int:
    """`headless`: without a terminal (tests), leaving once the run has ended."""
    app = EvalApp(runner, theme=theme, themes=themes, exit_when_done=headless)
    try:
        app.run(headless=headless)
    finally:
        app.engine.close()  # whatever ended the app, the engine stops and keeps its work
    said = closing(app.run_screen)
    if said:
        try:
            (out or sys.stdout).write(said)
            (out or sys.stdout).flush()
        except (OSError, ValueError):
            pass  # the terminal went away: the work dir's files say the same
    return app.exit_code


def closing(screen: RunScreen) -> str:
    """What the session says on the terminal as it ends (`--no-ui`'s last lines, and more)."""
    state = screen.state
    if not state.pairs and not state.work_dir:
        return ""  # it never began (a plan refused, a watched folder still empty)
    lines = []
    board = screen.leaderboard()
    if board is not None and board.datasets:
        lines += ["", render_txt(board).rstrip("\n")]
    failed = [p for p in state.pairs.values() if p.status in (PairStatus.FAIL, PairStatus.ERROR) and p.error]
    if failed:
        lines.append("")
        lines += [f"{p.model}/{p.dataset} {p.status.value}: {p.error}" for p in failed]
    unfinished = [p for p in state.pairs.values() if p.status in (PairStatus.PENDING, PairStatus.RUNNING, PairStatus.STOPPED)]
    lines.append("")
    if unfinished and not screen.runner.watching:
        lines.append(f"{len(unfinished)} datasets unfinished: finished samples are kept, running the plan again resumes them")
    if state.work_dir:
        lines.append(f"work dir: {state.work_dir}")
    finished = state.finished
    if finished is not None and finished.summary_files:
        lines.append("summary: " + "  ".join(finished.summary_files[k] for k in sorted(finished.summary_files)))
    return "\n".join(lines) + "\n"
