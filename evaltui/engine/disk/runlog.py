"""The run's own record in `<work_dir>/logs/`: state changes as plain lines, failures as JSONL.

`EventLines` is also what the headless renderer prints, so the log file and the terminal of a
`--no-ui` run say the same thing in the same words.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair, PairStatus
from evaltui.fsutil import json_bytes


def _score(metric: str, score: float | None) -> str:
    return f"{metric} = {score:.2f}" if score is not None else f"{metric} = -"


def event_line(e: ev.Event) -> str | None:
    """One human line for an event that changes what a user would want to know; None otherwise
    (one formatter per kind of event, `_LINES`; a kind without one never says anything)."""
    line = _LINES.get(type(e))
    return None if line is None else line(e)


def _started(e: ev.DatasetStarted, epochs: int = 1) -> str:
    """`started, 1000 requests to run (200 samples × 5 epochs)` (with epochs, the units)."""
    kept = e.total - e.remaining
    if e.joined:
        return f"{e.model}/{e.dataset}: following: {kept} of {e.total} done"
    resumed = f"resuming: {kept} kept" if kept else ""
    if epochs == 1:
        return f"{e.model}/{e.dataset}: started, {e.remaining} samples to run" + (f" ({resumed})" if resumed else "")
    shape = f"{e.total // epochs} samples × {epochs} epochs"
    return f"{e.model}/{e.dataset}: started, {e.remaining} requests to run ({shape}{'; ' + resumed if resumed else ''})"


def _inferred(e: ev.DatasetInferred) -> str:
    if e.status == PairStatus.DONE:
        extra = f", {e.failed} failed (within fail_on_error)" if e.failed else ""
        return f"{e.model}/{e.dataset}: inference done, {e.completed} predictions{extra}"
    why = f" ({e.error})" if e.error else ""
    counts = f"{e.completed} ok, {e.failed} failed"
    missing = e.total - e.completed - e.failed
    if missing > 0:  # a followed run's files hold fewer answers than it has samples (OpenCompass keeps no errors)
        counts = f"{e.completed} of {e.total} done{f', {e.failed} failed' if e.failed else ''}, {missing} missing"
    return f"{e.model}/{e.dataset}: inference FAILED{why}: {counts} — run again to retry the failed ones"


def _scored(e: ev.DatasetScored) -> str:
    if e.error:
        return f"{e.model}/{e.dataset}: scoring FAILED: {e.error}"
    return f"{e.model}/{e.dataset}: scored, {_score(e.metric, e.score)}"


def _skipped(e: ev.ScoringSkipped) -> str:
    names = ", ".join(f"{m}/{d}" for m, d in e.pairs)
    return f"watcher: not scored ({e.reason}): {names} — run the plan again to finish and score them"


def _retrying(e: ev.RetryStarted) -> str:
    return "retrying the failed samples of " + ", ".join(f"{m}/{d}" for m, d in e.pairs)


def _planned(e: ev.DatasetPlanned) -> str | None:
    """Only a pair kept from an earlier run says so; one still to run says it when it starts."""
    if e.status == PairStatus.SCORED:
        score = f": {_score(e.metric, e.score)}" if e.metric else ""
        return f"{e.model}/{e.dataset}: already scored in an earlier run (kept){score}"
    if e.status == PairStatus.DONE:
        return f"{e.model}/{e.dataset}: already inferred in an earlier run (kept); scoring"
    return None


def _shard_failed(e: ev.ShardStatusChanged) -> str | None:
    """A failed shard of a split pair (an unsplit one says it with the pair's DatasetInferred)."""
    if e.status == PairStatus.FAIL and e.shards > 1:
        return f"{e.model}/{e.dataset} shard {e.shard}: fail: {e.error}"
    return None


def _replica(e: ev.ReplicaStateChanged) -> str | None:
    """A replica ejected or back; its probes, and each failed one, are not worth a line."""
    if e.state == "ejected" and not e.failed_probes:
        return f"{e.model}: replica {e.url} ejected ({e.reason or 'failures in a row'}); probing it in {e.back_off:g} s"
    if e.state == "up":
        return f"{e.model}: replica {e.url} is back (its health check answers)"
    return None


def _replicas_down(e: ev.ReplicasDown) -> str:
    return f"{e.model}: every replica is down, its requests wait up to {e.wait:g} s for one to come back ({e.reason})"


def _simulator(e: ev.SimulatorStarted) -> str:
    return f"simulator: listening on {e.url}"


def _notice(e: ev.Notice) -> str:
    return f"{e.level}: {e.message}" if e.level != "info" else e.message


def _run_started(e: ev.RunStarted) -> str:
    """A followed run (`began_at`, from its files) says when it started: it did not start now."""
    when = ""
    if e.began_at is not None:
        at = datetime.fromtimestamp(e.began_at)
        when = " at " + at.strftime("%H:%M:%S" if at.date() == datetime.now().date() else "%Y-%m-%d %H:%M:%S")
    return f"run started{when}: {', '.join(e.models)} × {', '.join(e.datasets)} → {e.work_dir}"


_FINISHED = "run finished"


def _run_finished(e: ev.RunFinished) -> str:
    """`run finished in 3.2 s: …`; a followed run whose files do not tell how long it took
    (elapsed 0) claims no time."""
    state = "interrupted (finished work is kept; run again to resume)" if e.interrupted else f"exit code {e.exit_code}"
    return f"{_FINISHED}{f' in {e.elapsed:.1f} s' if e.elapsed else ''}: {state}"


def ends_a_run(line: str) -> bool:
    """Whether a line of logs/run.log is the last a run (or a retry's session) writes: RunFinished's."""
    return line.partition(" ")[2].startswith((_FINISHED + " in ", _FINISHED + ": "))


def _judged(e: ev.PairJudged) -> str | None:
    """A pair's judging, said once when it ends (the progress lines say it while it goes on)."""
    if not e.ended:
        return None
    failed = f", no grade for {e.failed}" if e.failed else ""
    return f"{e.model}/{e.dataset}: judged {e.judged}/{e.answered} by {e.judge}{failed}"


_LINES: dict[type, Callable[[Any], str | None]] = {
    ev.PairJudged: _judged,
    ev.DatasetStarted: _started,
    ev.DatasetInferred: _inferred,
    ev.DatasetScored: _scored,
    ev.ScoringSkipped: _skipped,
    ev.RetryStarted: _retrying,
    ev.DatasetPlanned: _planned,
    ev.ShardStatusChanged: _shard_failed,
    ev.SimulatorStarted: _simulator,
    ev.ReplicaStateChanged: _replica,
    ev.ReplicasDown: _replicas_down,
    ev.Notice: _notice,
    ev.RunStarted: _run_started,
    ev.RunFinished: _run_finished,
}


class Stamp:
    """The local time now as `form` writes it, made again once a second: every line of the log
    and of a `--no-ui` terminal starts with one, and a clock read costs less than a strftime."""

    def __init__(self, form: Callable[[datetime], str]) -> None:
        self._form = form
        self._last = (-1, "")  # (the second, its text): one tuple, swapped whole, for any thread

    def __call__(self) -> str:
        second = int(time.time())  # datetime.now() truncated to its second is fromtimestamp(this)
        last = self._last
        if last[0] != second:
            last = self._last = (second, self._form(datetime.fromtimestamp(second)))
        return last[1]


def iso_seconds(at: datetime) -> str:
    return at.isoformat(timespec="seconds")


class EventLines:
    """The line a user reads for each event, the same in logs/run.log and on a `--no-ui` terminal
    (None for an event that says nothing), made printable: a server's words may hold terminal
    escapes (set the title, colour, erase the line) and line breaks, and neither reaches a
    terminal or the log raw. Failed samples are said once per model×dataset, the first of them,
    so a run whose samples fail says why as it happens (logs/failures.jsonl has all of them)."""

    def __init__(self, epochs: Mapping[str, int] | None = None) -> None:
        self._said: set[Pair] = set()
        self._epochs = epochs or {}  # each dataset's epochs, when known: its failures say which epoch
        # each kind of event's formatter, those that need this one's state included: one lookup an event
        self._formats: dict[type, Callable[[Any], str | None]] = {**_LINES, ev.SampleFailed: self._first_failure, ev.DatasetStarted: self._started}

    def with_epoch(self, e: ev.SampleFailed) -> bool:
        """Whether a failure says its epoch: after the first, or when its dataset has several."""
        return e.epoch > 0 or self._epochs.get(e.dataset, 1) > 1

    def __call__(self, e: ev.Event) -> str | None:
        form = self._formats.get(type(e))
        line = None if form is None else form(e)
        return None if line is None else printable(line)

    def _started(self, e: ev.DatasetStarted) -> str:
        return _started(e, self._epochs.get(e.dataset, 1))

    def _first_failure(self, e: ev.SampleFailed) -> str | None:
        if (e.model, e.dataset) in self._said:
            return None
        self._said.add((e.model, e.dataset))
        err = e.error
        code = f" {err.status}" if err.status is not None else ""
        message = err.message if len(err.message) <= 300 else err.message[:300] + "…"
        unit = f"sample {e.sample_index} epoch {e.epoch}" if self.with_epoch(e) else f"sample {e.sample_index}"
        return f"{e.model}/{e.dataset}: {unit} failed: {err.type}{code}: {message} (every failure: logs/failures.jsonl)"


#: C0 and C1 control characters and DEL, but the tab.
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with each control character but the tab written as its escape (`\\x1b`)."""
    if text.isprintable():  # most lines: no control character (isprintable is False for each)
        return text
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class RunLog:
    """A sink writing logs/run.log and logs/failures.jsonl; appends, so resumed runs add to them."""

    def __init__(self, workdir: WorkDir, epochs: Mapping[str, int] | None = None):
        workdir.logs_dir.mkdir(parents=True, exist_ok=True)
        # backslashreplace: a server's error text may hold characters UTF-8 cannot (lone surrogates)
        self._log = open(workdir.logs_dir / "run.log", "a", encoding="utf-8", errors="backslashreplace", buffering=1)
        self._failures_path = workdir.logs_dir / "failures.jsonl"
        self._lines = EventLines(epochs)
        self._failures = os.open(self._failures_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._stamp = Stamp(iso_seconds)

    def __call__(self, e: ev.Event) -> None:
        if type(e) is ev.SampleFinished:  # the hot path: one per answer, never a line
            return
        if type(e) is ev.SampleFailed:  # one per failed request
            line: dict[str, Any] = {"time": self._stamp(), "model": e.model, "dataset": e.dataset, "index": e.sample_index}
            if self._lines.with_epoch(e):
                line["epoch"] = e.epoch
            line.update(e.error._asdict())
            os.write(self._failures, json_bytes(line) + b"\n")
        text = self._lines(e)
        if text is not None:
            self._write(text)

    def _write(self, text: str) -> None:
        self._log.write(f"{self._stamp()} {text}\n")

    def close(self) -> None:
        """Never raises: a full disk that kept the last lines from the log already said so on screen."""
        with contextlib.suppress(OSError):  # the file is closed all the same; what it held is dropped
            self._log.close()
        os.close(self._failures)
