"""Run the interactive session for a run's source (a runner, or a follower) and return the exit code of SPEC §2."""

from __future__ import annotations

from evaltui.engine.stream.source import RunSource
from evaltui.ui.app import EvalApp
from evaltui.ui.themes import ThemeSet


def run_app(runner: RunSource, *, theme: str | None, themes: ThemeSet) -> int:
    app = EvalApp(runner, theme=theme, themes=themes)
    try:
        app.run()
    finally:
        app.engine.close()  # whatever ended the app, the engine stops and keeps its work
    return app.exit_code
