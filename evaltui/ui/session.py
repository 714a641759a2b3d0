"""Run the interactive session for a runner and return the exit code of SPEC §2."""

from __future__ import annotations

from evaltui.engine.runner import Runner
from evaltui.ui.app import EvalApp
from evaltui.ui.themes import ThemeSet


def run_app(runner: Runner, *, theme: str | None, themes: ThemeSet) -> int:
    app = EvalApp(runner, theme=theme, themes=themes)
    try:
        app.run()
    finally:
        app.engine.close()  # whatever ended the app, the engine stops and keeps its work
    return app.exit_code
