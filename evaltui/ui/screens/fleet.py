"""One model's breakdown (`enter` on its heading row): each replica's state, in flight, limit,
requests per second and errors, why one is out, the model's limits and pacing, and its latency
profile (p50/p90/p99; streamed: time to first token and between tokens) and throughput.

It reads the run screen's RunState, which the app keeps folding while this screen is on top,
and repaints once a second; it never asks the engine anything. Watching a run from its work dir,
the load is not known (no file records it): the states and counters are "–", the limits the plan's.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from evaltui.engine.stream.state import RunState
from evaltui.latency import ProfileSnapshot
from evaltui.plan import ModelConfig
from evaltui.text import duration, one_line
from evaltui.ui import fmt, keys, look
from evaltui.ui.look import Look

COLUMNS = ("replica", "state", "in flight", "limit", "req/s", "errors", "why")
_STATE_LOOK = {"up": look.GOOD, "ejected": look.BAD, "probing": look.WARN}


class FleetScreen(Screen[None]):
    CSS_PATH = "fleet.tcss"
    BINDINGS = keys.bindings(keys.FLEET)
    COMPONENT_CLASSES: ClassVar[set[str]] = set(look.LOADS)

    def __init__(self, model: ModelConfig, state: RunState, *, load_known: bool = True) -> None:
        super().__init__()
        self.model, self.state, self.load_known = model, state, load_known
        self.look = Look(self)
        self._tokens_at: tuple[float, int] | None = None  # (when, tokens) of the last repaint
        self._token_rate: float | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title")
        yield Static(id="fleet-limits")
        yield Static(id="fleet-latency")
        yield DataTable(id="fleet-replicas", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#fleet-replicas", DataTable).add_columns(*COLUMNS)
        self.repaint()
        self.set_interval(1.0, self.repaint)
        self.app.theme_changed_signal.subscribe(self, self._restyle)

    def _restyle(self, theme: object) -> None:
        self.look.forget()
        self.repaint()

    def repaint(self) -> None:
        m, state = self.model, self.state
        load = state.load.get(m.abbr)
        title = Text(f"{m.abbr} — {len(m.urls)} replica{'s' if len(m.urls) > 1 else ''}, {m.concurrency} concurrency", style="bold")
        down = state.down_for(m.abbr)
        if not state.live:  # the counters are the run's last: nothing is in flight, nothing has a rate now
            title.append("  (the run has ended: counters as it left them)", style=self.look(look.MUTED))
        elif down is not None:
            waiting = f"  ALL DOWN for {duration(down)}, waiting up to {duration(m.down_timeout)}"
            title.append(waiting, style=self.look(look.ALARM))
        self.query_one("#fleet-title", Static).update(title)
        limits = self._limits(load.limit if load and load.limit else m.limits.max_workers, load.tokens if load else 0)
        if not self.load_known:
            limits += " · its load is not recorded in the work dir: replica states and counters unknown"
        self.query_one("#fleet-limits", Static).update(Text(limits))
        self.query_one("#fleet-latency", Static).update(Text(latency_line(load.profile.snapshot() if load and load.profile else None)))
        table = self.query_one("#fleet-replicas", DataTable)
        row, x = table.cursor_row, table.scroll_x  # where the user moved to stays, across the repaint
        table.clear()
        views = state.replicas.get(m.abbr, {})
        live = state.live
        if not self.load_known:
            for url in m.urls:
                limit = m.limits.per_url
                table.add_row(Text(url), Text("–"), Text("–"), Text(str(limit)), Text("–"), Text("–"), Text(""))
        elif not views:  # one url, fixed: the model's own load is its replica's
            in_flight = str(load.in_flight) if load and live else "0"
            table.add_row(Text(m.urls[0]), self._state("up"), Text(in_flight), Text(str(m.limits.max_workers)), Text("–"), Text("–"), Text(""))
        for v in views.values():
            table.add_row(
                Text(v.url), self._state(v.state), Text(str(v.in_flight if live else 0)), Text(str(v.limit)),
                Text(fmt.rate(v.rate if live else None)), Text(str(v.errors)), Text(one_line(v.reason, 120, cut="…")),
            )
        table.move_cursor(row=row)
        table.scroll_to(x=x, animate=False, immediate=True)  # clear() scrolled back to the first column

    def _state(self, state: str) -> Text:
        name = _STATE_LOOK.get(state)
        return Text(state, style=self.look(name) if name else "")

    def _limits(self, limit: int, tokens: int) -> str:
        m, limits = self.model, self.model.limits
        if limits.adaptive:
            when = "now" if self.state.live else "when the run ended"
            parts = [f"in flight at most {limit} {when} (adaptive, between {limits.floor} and {limits.max_workers})"]
        else:
            parts = [f"in flight at most {limits.max_workers}"]
        if limits.capped_per_url:
            parts.append(f"{limits.per_url} per replica")
        if m.request_rate:
            parts.append(f"{m.request_rate * 60:g} requests/min")
        if m.tokens_per_minute:
            rate = self._tokens_per_minute(tokens) if self.state.live else "–"
            parts.append(f"tokens {rate}/min of {m.tokens_per_minute:g}")
        return " · ".join(parts)

    def _tokens_per_minute(self, tokens: int) -> str:
        now = self.state.clock()
        if self._tokens_at is not None and now - self._tokens_at[0] >= 1.0:
            self._token_rate = 60.0 * max(0, tokens - self._tokens_at[1]) / (now - self._tokens_at[0])
        if self._tokens_at is None or now - self._tokens_at[0] >= 1.0:
            self._tokens_at = (now, tokens)
        return "–" if self._token_rate is None else f"{self._token_rate:.0f}"


def latency_line(p: ProfileSnapshot | None) -> str:
    """`latency p50 120 ms · p90 310 ms · p99 1.20 s · first token p50 40 ms … · 52.1 req/s, 4,210 tokens/s (1,234 answered)`"""
    if p is None or not p.requests:
        return "latency: nothing answered yet in this run" if p is not None else "latency: not recorded in the work dir"
    ms = _ms
    parts = [f"latency p50 {ms(p.latency.p50)} · p90 {ms(p.latency.p90)} · p99 {ms(p.latency.p99)}"]
    if p.streamed:
        parts.append(f"first token p50 {ms(p.ttft.p50)} · p90 {ms(p.ttft.p90)} · p99 {ms(p.ttft.p99)} · between tokens p50 {ms(p.itl.p50)}")
    rates = [f"{p.requests_per_s:.1f} req/s" if p.requests_per_s is not None else "", f"{p.tokens_per_s:,.0f} tokens/s" if p.tokens_per_s else ""]
    parts.append(", ".join(r for r in rates if r) + f" ({p.requests:,} answered)")
    return " · ".join(parts)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
