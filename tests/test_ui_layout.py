"""ui/layout.py's arithmetic, without a screen: which pane gets the rows, when panes stand side by
side, how the leaderboard's columns give way. (test_ui_sizes checks the screens it makes.)"""

from __future__ import annotations

from evaltui.ui import layout
from evaltui.ui.layout import BOARD, FAILURES, BoardColumns, Needs, ProgressColumns


def test_everything_fits_each_pane_as_tall_as_it_holds_and_failures_take_the_rest() -> None:
    h = layout.stacked(Needs(progress=13, board=8, failures=12), room=30)
    assert (h.progress, h.board, h.failures) == (13, 8, 9) and h.top == 21
    h = layout.stacked(Needs(progress=13, board=8, failures=4), room=30)
    assert (h.progress, h.board, h.failures) == (13, 8, 4)  # no taller than its lines: the rest is below


def test_short_of_room_the_focused_pane_grows_and_the_leaderboard_once_the_run_ended() -> None:
    needs = dict(progress=29, board=16, failures=32)
    assert layout.stacked(Needs(**needs), 21) == layout.Heights(11, 6, 0, 4, 17)  # running: progress
    assert layout.stacked(Needs(**needs, focus=BOARD), 21).board == 11
    assert layout.stacked(Needs(**needs, focus=FAILURES), 21).failures == 9
    assert layout.stacked(Needs(**needs, finished=True), 21).board == 11  # ended: the leaderboard first
    assert layout.stacked(Needs(**needs, finished=True, focus=FAILURES), 21).failures == 9
    tiny = layout.stacked(Needs(**needs), 10)
    assert tiny.progress + tiny.board + tiny.failures <= 10 and min(tiny.progress, tiny.board, tiny.failures) >= 3


def test_the_chart_only_gets_rows_nobody_else_needs_and_before_failures_once_ended() -> None:
    assert layout.stacked(Needs(progress=13, board=8, chart=14), 30).chart == 9
    assert layout.stacked(Needs(progress=13, board=8, chart=14), 25).chart == 0  # 4 left: not worth it
    running = layout.stacked(Needs(progress=13, board=8, failures=40, chart=14), 40)
    ended = layout.stacked(Needs(progress=13, board=8, failures=40, chart=14, finished=True), 40)
    assert running.chart == 0 and running.failures == 19
    assert ended.chart == 14 and ended.failures == 5


def test_side_by_side_the_failures_pane_runs_across_the_bottom() -> None:
    h = layout.side_by_side(Needs(progress=18, board=8, failures=39, chart=18), room=67)
    assert (h.top, h.progress, h.board, h.chart, h.failures) == (28, 18, 8, 18, 39)
    h = layout.side_by_side(Needs(progress=18, board=8, failures=60, chart=18), room=67)
    assert h.top == 18 and h.chart == 10 and h.failures == 49  # running: the failures take what progress leaves
    h = layout.side_by_side(Needs(progress=18, board=8, failures=60, chart=18, finished=True), room=67)
    assert h.board + h.chart == h.top == 26 and h.failures == 41  # ended: the chart whole first


def test_panes_stand_side_by_side_only_where_both_fit_whole() -> None:
    progress = ProgressColumns(names=40, fixed=48)
    assert layout.side_widths(progress, board=96, width=160) is None
    assert layout.side_widths(progress, board=96, width=250) == (progress.natural, 250 - progress.natural)
    assert layout.side_widths(ProgressColumns(names=17, fixed=48), board=66, width=160) == (94, 66)


def test_the_progress_names_and_bar_share_what_the_other_columns_leave() -> None:
    columns = ProgressColumns(names=40, fixed=48)
    assert columns.split(80) == (19, 6)  # the names first (shortened), the bar at its least
    assert columns.split(100) == (25, 20)
    assert columns.split(120) == (40, 25)
    assert columns.split(250) == (40, 40)
    for width in (80, 100, 120):
        assert columns.width(*columns.split(width)) == width


def test_the_leaderboard_gives_way_in_turn_and_never_cuts_a_score() -> None:
    # names of 40, "naive_average", three models: headers with their ranks, scores of 6 (11 with the count)
    columns = BoardColumns(names=40, metric=13, models=((13, 3, 6, 11), (11, 3, 6, 11), (23, 3, 6, 11)))
    wide = columns.fit(200)
    assert wide.names == 40 and wide.metric and wide.detail and wide.ranks
    at_80 = columns.fit(80)
    assert not at_80.metric and columns.width(at_80) <= 80 and at_80.names > 12  # the names take what is left
    tight = columns.fit(40)
    assert tight == layout.FITS[-1] and all(tight.model_width(*m) >= 6 for m in columns.models)  # a score of 100.00 whole
