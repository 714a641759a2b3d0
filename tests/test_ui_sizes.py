"""The session at every terminal size from 80×24 to 250×70, with dataset abbrs up to 40
characters and three models, mid-run and at the end (issue 24): a picture of each
(pytest-textual-snapshot; update with --snapshot-update), and what a user checks in words —
every model's score of every dataset in view is on the screen whole, in the leaderboard (with its
95 % interval wherever the pane is wide enough for it) and in the progress pane, and a pane that
scrolls has no blank row under its last row in sight."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from test_ui_80x24 import screen_lines
from ui_demo_script import scripted_app
from ui_script import Clock, feed

from evaltui.engine.stream import events as ev
from evaltui.scoring.leaderboard import build_leaderboard, format_score
from evaltui.scoring.stats.interval import Interval
from evaltui.ui.app import EvalApp

SIZES = [(80, 24), (100, 30), (120, 40), (160, 50), (250, 70)]
MODELS = ("sim-strong", "sim-weak", "llama-3-70b-instruct")
DATASETS = ("mmlu-abstract-algebra-and-more", "gsm8k-word-problems-long-name-for-test", "bbh-logical-deduction-of-five-objects-x1", "code")
SCORES = {
    ("sim-strong", DATASETS[0]): 91.5, ("sim-strong", DATASETS[1]): 100.0, ("sim-strong", DATASETS[2]): 88.25, ("sim-strong", DATASETS[3]): 83.33,
    ("sim-weak", DATASETS[0]): 56.5, ("sim-weak", DATASETS[1]): 9.5, ("sim-weak", DATASETS[2]): 54.0, ("sim-weak", DATASETS[3]): 62.5,
    ("llama-3-70b-instruct", DATASETS[0]): 77.75, ("llama-3-70b-instruct", DATASETS[1]): None, ("llama-3-70b-instruct", DATASETS[2]): 71.0,
    ("llama-3-70b-instruct", DATASETS[3]): 70.83,
}
FAILED = ("llama-3-70b-instruct", DATASETS[1])
WHY = "37 of the dataset's 200 samples failed (fail_on_error = 0.0); fail_on_error = 0.185 would score the others"
TOTAL = 200


def _interval(score: float | None) -> Interval | None:
    """A binomial score's 95 % interval over TOTAL samples, as the scorer gives one."""
    if score is None:
        return None
    stderr = math.sqrt(score * (100 - score) / TOTAL)
    return Interval(stderr, score - 1.96 * stderr, score + 1.96 * stderr, TOTAL)


INTERVALS = {(m, d, "accuracy"): i for (m, d), score in SCORES.items() if (i := _interval(score)) is not None}


def sizes_app(tmp_path: Path, clock: Clock) -> EvalApp:
    assert max(len(d) for d in DATASETS) == 40
    return scripted_app(tmp_path, clock, MODELS, DATASETS)


def _scored(model: str, dataset: str) -> list[ev.Event]:
    return [
        ev.DatasetStarted(model, dataset, TOTAL, TOTAL),
        *(ev.SampleFinished(model, dataset, 0, i) for i in range(TOTAL)),
        ev.DatasetInferred(model, dataset, ev.PairStatus.DONE, TOTAL, 0),
        ev.DatasetScored(model, dataset, "accuracy", SCORES[(model, dataset)], intervals=(("accuracy", INTERVALS[(model, dataset, "accuracy")]),)),
    ]


def mid_run(clock: Clock) -> list[ev.Event]:
    """sim-strong scored everywhere; sim-weak two scored, one running; llama's failed one failing."""
    out: list[ev.Event] = [ev.RunStarted("/home/user/outputs/sizes", MODELS, DATASETS, "three models, long names")]
    out += [ev.DatasetPlanned(m, d, TOTAL, 1) for m in MODELS for d in DATASETS]
    for d in DATASETS:
        out += _scored("sim-strong", d)
    out += _scored("sim-weak", DATASETS[0]) + _scored("sim-weak", DATASETS[1])
    out += [ev.DatasetStarted("sim-weak", DATASETS[2], TOTAL, TOTAL), *(ev.SampleFinished("sim-weak", DATASETS[2], 0, i) for i in range(120))]
    err = ev.SampleError("http", 400, "simulated 400: bad request", 1)
    out += [ev.DatasetStarted(*FAILED, TOTAL, TOTAL), *(ev.SampleFailed(*FAILED, 0, i, err) for i in range(37))]
    out += [ev.Heartbeat(clock.wall() - 1.0)]
    return out


def the_end() -> list[ev.Event]:
    """Everything scored but llama's failed dataset, which ended `fail` saying why; the run over."""
    out: list[ev.Event] = _scored("sim-weak", DATASETS[2])
    out += _scored("sim-weak", DATASETS[3])
    out += [*(ev.SampleFinished(*FAILED, 0, i) for i in range(37, TOTAL)), ev.DatasetInferred(*FAILED, ev.PairStatus.FAIL, TOTAL - 37, 37, "", WHY)]
    for d in (DATASETS[0], DATASETS[2], DATASETS[3]):
        out += _scored("llama-3-70b-instruct", d)
    rows = [(d, "abc123", "accuracy", "gen") for d in DATASETS]
    out.append(ev.RunFinished(1, False, {"txt": "/home/user/outputs/sizes/summary/summary.txt"}, build_leaderboard(rows, list(MODELS), SCORES, intervals=INTERVALS), 60.0))
    return out


def scores_in_view(app: EvalApp, *, finished: bool) -> list[str]:
    """Each leaderboard and progress row in sight, checked against the scores it must show whole;
    what is wrong, one line each (empty: nothing)."""
    screen = app.run_screen
    lines = screen_lines(app)
    wrong = []
    board = screen.board
    top = board.region.y + 2  # its border and header
    for y in range(top, board.region.bottom - 1):
        index = board.scroll_offset.y + y - top
        if index >= board.row_count:
            break
        key = board.ordered_rows[index].key.value
        if key == "Average":
            continue
        shown = lines[y][board.region.x : board.region.right].split()
        for m in MODELS:
            score = SCORES[(m, key)] if finished or screen.state.pairs[(m, key)].score is not None else None
            said = format_score(score, _interval(score) if board.shows_intervals else None).split()
            if not any(shown[i : i + len(said)] == said for i in range(len(shown))):
                wrong.append(f"leaderboard {key} {m}: {' '.join(said)} not in {shown}")
    progress = screen.progress
    for (m, d), p in screen.state.pairs.items():
        if p.score is None:
            continue
        index = progress.get_row_index(f"{m}\t{d}")
        y = progress.region.y + 2 + index - progress.scroll_offset.y
        if progress.region.y + 2 <= y < progress.region.bottom - 1:
            if f"{p.score:.2f}" not in lines[y][progress.region.x : progress.region.right].split():
                wrong.append(f"progress {m}/{d}: {p.score:.2f} not in {lines[y]!r}")
    return wrong


def blank_rows_under_a_scrolled_pane(app: EvalApp) -> list[str]:
    progress = app.run_screen.progress
    if progress.row_count <= progress.scrollable_content_region.height - 1:
        return []  # all in sight: nothing to check
    lines = screen_lines(app)
    last = lines[progress.region.bottom - 2][progress.region.x + 1 : progress.region.right - 1]
    return [] if last.strip() else [f"a blank row under the progress pane's rows: {lines[progress.region.y : progress.region.bottom]}"]


def _scene(tmp_path: Path, phase: str) -> tuple[EvalApp, Any]:
    clock = Clock()
    app = sizes_app(tmp_path, clock)

    async def play(pilot: Any) -> None:
        feed(app, mid_run(clock))
        clock.now += 30.0
        if phase == "end":
            feed(app, the_end())
        app.run_screen.fold_pending(all_rows=True)
        await pilot.pause()
        await pilot.pause()
        problems = scores_in_view(app, finished=phase == "end") + blank_rows_under_a_scrolled_pane(app)
        assert not problems, "\n".join(problems + screen_lines(app))

    return app, play


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("phase", ["mid-run", "end"])
def test_every_score_in_view_is_whole_at_every_size(tmp_path: Path, snap_compare: Any, size: tuple[int, int], phase: str) -> None:
    app, play = _scene(tmp_path, phase)
    assert snap_compare(app, run_before=play, terminal_size=size)


def test_the_check_fails_on_a_cut_score(tmp_path: Path) -> None:
    """The check itself: a leaderboard too narrow for its last model's column is caught."""

    async def scenario() -> list[str]:
        clock = Clock()
        app = sizes_app(tmp_path, clock)
        async with app.run_test(size=(120, 40)) as pilot:
            feed(app, mid_run(clock) + the_end())
            await pilot.pause()
            board = app.run_screen.board
            board.styles.width = board.outer_size.width - 20  # as the old layout did: the side column too narrow
            await pilot.pause()
            return scores_in_view(app, finished=True)

    wrong = asyncio.run(scenario())
    assert wrong and all(w.startswith("leaderboard ") for w in wrong), wrong
