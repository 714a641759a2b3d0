"""A few pictures of the app (pytest-textual-snapshot; update with --snapshot-update): the running
state, a failure, the final leaderboard — one theme each. A scripted stream and a clock that only
moves when told keep every frame the same from run to run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ui_script import Clock, alpha_gsm_failed, feed, finished, planned, running, scripted_app

from evaltui.ui.app import EvalApp


def _scene(tmp_path: Path, theme: str, *parts: str) -> tuple[EvalApp, Any]:
    clock = Clock()
    app = scripted_app(tmp_path, clock, theme=theme)

    async def play(pilot: Any) -> None:
        feed(app, planned() + running(clock))
        clock.now += 10.0
        if "failed" in parts:
            feed(app, alpha_gsm_failed())
        if "finished" in parts:
            feed(app, alpha_gsm_failed() + finished())
        app.fold_pending()
        await pilot.pause()

    return app, play


def test_running_dark(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path, "evaltui-dark")
    assert snap_compare(app, run_before=play, terminal_size=(160, 30))


def test_failure_light_narrow(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path, "evaltui-light", "failed")
    assert snap_compare(app, run_before=play, terminal_size=(80, 24))


def test_final_leaderboard_high_contrast(tmp_path: Path, snap_compare: Any) -> None:
    app, play = _scene(tmp_path, "evaltui-high-contrast", "finished")
    assert snap_compare(app, run_before=play, terminal_size=(200, 50))
