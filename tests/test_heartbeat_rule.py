"""The one rule of a stale heartbeat (engine/disk/heartbeat.py), as the scorer, `evaltui watch`,
the strip and the lock state apply it."""

from __future__ import annotations

from evaltui.engine.disk.heartbeat import BEAT_SLACK, missed_beats, stale


def test_a_beat_is_stale_only_once_older_than_the_timeout() -> None:
    assert not stale(60.0, 60.0) and stale(60.001, 60.0) and not stale(0.0, 0.5)


def test_two_missed_beats_and_the_slack_of_a_loaded_machine() -> None:
    assert missed_beats(5.0) == 10.0 + BEAT_SLACK
    assert not stale(11.9, missed_beats(5.0)) and stale(12.1, missed_beats(5.0))
