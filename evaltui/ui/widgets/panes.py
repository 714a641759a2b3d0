"""The engine strip, the failures pane and the leaderboard pane.

Each takes the folded RunState (or the Leaderboard) and repaints itself; none holds a reference
to the engine. Text is rich Text or Log lines, never markup: error messages contain brackets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Log

from evaltui.engine.disk.heartbeat import stale
from evaltui.engine.stream.pair import Failure
from evaltui.engine.stream.state import RunState
from evaltui.plan.price import said_cost
from evaltui.text import duration, one_line
from evaltui.ui import fmt, look
from evaltui.ui.look import Look
from evaltui.ui.widgets.fleet import model_load, strip_models


class EngineStrip(Widget):
    """Heartbeat, in-flight vs max_workers per model, throughput, retries, elapsed. (The plan's
    title is the progress pane's border title: here it was cut at 80 columns.)

    A plain Widget that renders its Text, repainted only when the text changed: a Static's
    update() would ask the whole screen for a new layout, several times a second. It is shown
    every tick, from the fold the rows are (its counts are theirs in the same frame); its
    req/s, like the rows', moves once a second (`rates`).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.LOADS)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.look = Look(self)
        self._text = Text()
        self.needed = 0  # the columns its text takes, rounded up to ten (the sparkline has the rest)
        self._rate = fmt.rate(None)

    def render(self) -> Text:
        return self._text

    def show(
        self,
        state: RunState,
        *,
        heartbeat_timeout: float,
        max_workers: dict[str, int],
        live: bool,
        load_known: bool = True,
        rates: bool = True,
        room: int = 0,
    ) -> None:
        """`load_known`: False when the source cannot know the requests in flight and retries (a
        follower: the work dir holds none of it), which are then "–", never a made-up 0.
        `rates=False` keeps the req/s shown last. `room`: the columns its words will have (the
        screen's layout knows before the widget's size does); 0: its width now."""
        if rates:
            self._rate = fmt.rate(state.throughput())
        text = Text(no_wrap=True, overflow="ellipsis")  # one line each, cut at the edge, never wrapped
        beat = self._heartbeat(state, heartbeat_timeout, live)
        c, f, n = state.totals()
        elapsed, samples, failed = f"  elapsed {duration(state.elapsed())}", f"  samples {c + f}/{n}", f"  failed {f}" if f else ""
        room = room or self.content_size.width
        first = beat.cell_len + len(elapsed) + len(samples) + len(failed)
        if room and first > room:
            elapsed = ""  # what failed counts for more than the time it took
        text.append_text(beat)
        text.append(elapsed + samples)
        if failed:
            text.append(failed, style=self.look(look.BAD))
        text.append("\n")
        cost = state.cost()
        spent = f"  cost {said_cost(cost)}" if cost is not None else ""  # a priced model's tokens, so far in this run
        text.append(f"{self._rate} req/s  retries {state.retries() if load_known else '–'}{spent}  in flight ")
        for i, (model, limit) in enumerate(strip_models(state, max_workers).items()):
            text.append("  " if i else "")
            text.append_text(model_load(state, model, limit, live=live, styles=self.look) if load_known else Text(f"{model} –/{limit}"))
        if not max_workers:
            text.append("–")
        if text != self._text:
            self._text = text
            # what its whole text takes, in tens (no jitter), whatever was left out to fit
            self.needed = -(-max(first, text.split("\n")[-1].cell_len) // 10) * 10 + 2
            self.refresh()

    def _heartbeat(self, state: RunState, timeout: float, live: bool) -> Text:
        age = state.heartbeat_age()
        if state.finished is not None and not live:
            if state.finished.interrupted and age is not None:  # stopped with work left (a killed run, when watched)
                return Text(f"■ stopped: heartbeat {duration(age)} ago", style=self.look(look.WARN) + Style(bold=True))
            return Text("● run finished", style=self.look(look.GOOD))
        if age is None:
            return Text("○ heartbeat: waiting", style=self.look(look.MUTED))
        if stale(age, timeout):
            return Text(f"✖ heartbeat STALE {duration(age)} ago", style=self.look(look.ALARM))
        return Text(f"♥ alive {duration(age)} ago", style=self.look(look.GOOD))


def failure_line(f: Failure) -> str:
    status = f.error.status if f.error.status is not None else "-"
    epoch = f" epoch {f.epoch}" if f.epoch else ""
    return f"{f.model}/{f.dataset} #{f.sample_index}{epoch} {f.error.type} {status}: {one_line(f.error.message, 300, cut='…')}"


class FailuresLog(Log):
    """One line per failed sample, newest last; Log keeps at most `max_lines` and parses no markup.

    It follows the newest line until the user scrolls up. Log alone takes "at the end" from the
    scroll offset, which a resize leaves behind (a smaller pane: no longer at the end), so the
    pane remembers whether it was following and goes on doing so after a resize.
    """

    _following = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._following = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        if self._following and self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def show_all(self, failures: list[Failure]) -> None:
        # clear() empties the lines but keeps the scroll offset, so Log would no longer see itself
        # at the end and would stop following the newest line: take that from before the clear
        following = self.is_vertical_scroll_end
        self.clear()
        self.add(failures)
        if following and self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def add(self, failures: list[Failure]) -> None:
        if failures:
            self.write_lines([failure_line(f) for f in failures])
