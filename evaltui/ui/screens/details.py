"""The details of one model×dataset: its failed samples with their errors, a few predictions
next to their gold, and what the per-sample log says of those: every attempt, the tries, the
time and tokens. Reading them means reading prediction files, so it happens in a thread
worker while the screen shows a loading indicator; the event loop never touches the disk."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, LoadingIndicator, Static

from evaltui.engine.disk.details import PairDetails, PredictionSample
from evaltui.scoring.leaderboard import format_score
from evaltui.text import one_line
from evaltui.ui import keys


class DetailsScreen(Screen[None]):
    CSS_PATH = "details.tcss"
    BINDINGS = keys.bindings(keys.DETAILS)

    def __init__(self, model: str, dataset: str, load: Callable[[], PairDetails], *, reason: str = ""):
        """`reason`: why the pair failed and what would change it (the event stream's, as the run
        said it: the fail_on_error that would score the others)."""
        super().__init__()
        self.model, self.dataset, self._load, self.reason = model, dataset, load, reason
        self._predictions: list[PredictionSample] = []  # the answers shown, by row: whose reasoning to show

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.model} / {self.dataset}", style="bold"), id="details-title")
        yield Static(Text(self.reason), id="details-reason")
        yield LoadingIndicator()
        with VerticalScroll(id="details-body"):
            yield Static("Its parts (the score is the reference's aggregate of them)", classes="details-heading", id="details-parts-heading")
            yield DataTable(id="details-parts", cursor_type="row")
            yield Static("Failed samples", classes="details-heading")
            yield DataTable(id="details-failures", cursor_type="row")
            yield Static("Answers beside their gold (→ scrolls to the whole prediction)", classes="details-heading")
            yield DataTable(id="details-predictions", cursor_type="row")
            yield Static("", classes="details-heading", id="details-reasoning-heading")
            yield Static("", id="details-reasoning")
            yield Static("Their attempts (the per-sample log)", classes="details-heading")
            yield DataTable(id="details-records", cursor_type="row")
            yield Static("Their conversations, message by message", classes="details-heading", id="details-messages-heading")
            yield DataTable(id="details-messages", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#details-body").display = False
        self.query_one("#details-reason").display = bool(self.reason)
        self._fetch()

    @work(thread=True, group="details", exclusive=True, exit_on_error=False, description="read a pair's failures and predictions")
    def _fetch(self) -> None:
        try:
            details = self._load()
        except Exception as e:  # noqa: BLE001 - unreadable files: say so on the screen, keep the app
            self.app.call_from_thread(self._failed, f"cannot read the details: {type(e).__name__}: {e}")
            return
        self.app.call_from_thread(self._show, details)

    def _failed(self, message: str) -> None:
        self.query_one(LoadingIndicator).display = False
        self.query_one("#details-title", Static).update(Text(message, style="bold"))

    def _show(self, d: PairDetails) -> None:
        self.query_one(LoadingIndicator).display = False
        self.query_one("#details-body").display = True
        self.query_one("#details-title", Static).update(
            Text(f"{d.model} / {d.dataset} — {d.status.value if hasattr(d.status, 'value') else d.status}, {len(d.failures)} failed", style="bold")
        )
        failures = self.query_one("#details-failures", DataTable)
        failures.add_columns("sample", "error", "HTTP", "attempts", "message")
        for f in d.failures:
            e = f.error
            status = "-" if e.status is None else str(e.status)
            failures.add_row(Text(_unit(f.sample_index, f.epoch)), Text(e.type), Text(status), Text(str(e.attempts)), Text(one_line(e.message, 200, cut="…")))
        if not d.failures:
            failures.add_row(Text("none"), Text(""), Text(""), Text(""), Text(""))
        preds = self.query_one("#details-predictions", DataTable)
        preds.add_columns("sample", "ok", "answer", "gold", "prediction")
        for p in d.predictions:
            ok = "–" if p.correct is None else ("✔" if p.correct else "✘")
            answer = "–" if p.extracted is None else one_line(p.extracted, 40, cut="…")
            gold = one_line(p.gold if p.gold_answer is None else p.gold_answer, 60, cut="…")
            preds.add_row(Text(_unit(p.sample_index, p.epoch)), Text(ok), Text(answer), Text(gold), Text(one_line(p.prediction, 200, cut="…")))
        if not d.predictions:
            preds.add_row(Text("none yet"), Text(""), Text(""), Text(""), Text(""))
        self._show_reasoning(d)
        self._show_records(d)
        self._show_messages(d)
        self._show_parts(d)
        failures.focus()

    def _show_reasoning(self, d: PairDetails) -> None:
        """Under the answers, why the highlighted one got its grade: a judge's reasoning (its reply
        as kept with the verdict), or another evaluator's explanation; hidden when none has one."""
        self._predictions = list(d.predictions)
        shown = any(p.explanation for p in d.predictions)
        heading = self.query_one("#details-reasoning-heading", Static)
        heading.display = self.query_one("#details-reasoning").display = shown
        if shown:
            whose = f"The judge's reasoning ({d.judge})" if d.judge else "Why (the evaluator's explanation)"
            heading.update(f"{whose}, for the answer highlighted above")
            self._reason_for(0)

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        if message.data_table.id == "details-predictions":
            self._reason_for(message.cursor_row)

    def _reason_for(self, row: int) -> None:
        if not 0 <= row < len(self._predictions):
            return
        p = self._predictions[row]
        text = Text(f"sample {_unit(p.sample_index, p.epoch)} · grade {p.extracted or '–'}\n", style="bold")
        text.append(p.explanation or "(none)")
        self.query_one("#details-reasoning", Static).update(text)

    def _show_parts(self, d: PairDetails) -> None:
        """A grouped benchmark's parts (MMLU's subjects), each with its metrics; hidden for any other dataset."""
        table = self.query_one("#details-parts", DataTable)
        shown = bool(d.parts)
        table.display = self.query_one("#details-parts-heading").display = shown
        if not shown:
            return
        first = next(iter(d.parts.values()))  # its metrics: the numbers beside "samples" (not its "uncertainty")
        metrics = [k for k, v in first.items() if k != "samples" and isinstance(v, (int, float)) and not isinstance(v, bool)]
        table.add_columns("part", *metrics, "samples")
        for name, values in d.parts.items():
            cells = [name, *(format_score(values.get(m)) for m in metrics), str(values.get("samples", ""))]
            table.add_row(*map(Text, cells))

    def _show_records(self, d: PairDetails) -> None:
        table = self.query_one("#details-records", DataTable)
        # a reasoning model's thinking, as its server sent it beside the answer: a column only when there is some
        thinking = any(r.get("reasoning_content") for r in d.records.values())
        table.add_columns("sample", "epoch", "tries", "attempts", "took", "tokens", *(("reasoning",) if thinking else ()))
        for (index, epoch), r in sorted(d.records.items()):
            attempts = " · ".join(f"{a[2] or '-'} {a[3]} {a[1]:.2f}s" for a in r.get("attempts", []) if isinstance(a, list) and len(a) >= 4)
            usage = r.get("usage") or {}
            tokens = str(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)) if usage else "-"
            took = f"{r['took']:.2f}s" if isinstance(r.get("took"), (int, float)) else "-"
            said = attempts or ("none" if "attempts" in r else "(not in the per-sample log)")
            cells = [str(index), str(epoch), str(r.get("tries", 1)), one_line(said, 120, cut="…"), took, tokens]
            if thinking:
                cells.append(one_line(str(r.get("reasoning_content") or ""), 160, cut="…"))
            table.add_row(*map(Text, cells))
        if not d.records:
            table.add_row(Text("none"), Text(""), Text(""), Text("(nothing run yet)"), Text(""), Text(""))


    def _show_messages(self, d: PairDetails) -> None:
        """A conversation dataset's transcripts (the per-sample log's `messages`): each message's
        role, its request's time and tokens, its text; hidden for a dataset of single prompts."""
        table = self.query_one("#details-messages", DataTable)
        talks = [(key, r["messages"]) for key, r in sorted(d.records.items()) if isinstance(r.get("messages"), list)]
        table.display = self.query_one("#details-messages-heading").display = bool(talks)
        if not talks:
            return
        table.add_columns("sample", "role", "took", "tokens", "content")
        for (index, epoch), messages in talks:
            for m in messages:
                if not isinstance(m, dict):
                    continue
                role = f"{m.get('role', '?')} ({m['kind']})" if m.get("kind") else str(m.get("role", "?"))
                took = f"{m['took']:.2f}s" if isinstance(m.get("took"), (int, float)) else ""
                usage = m.get("usage")
                tokens = f"{usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)}" if isinstance(usage, dict) else ""
                table.add_row(*map(Text, (_unit(index, epoch), role, took, tokens, one_line(str(m.get("content", "")), 160, cut="…"))))


def _unit(index: int, epoch: int) -> str:
    """A sample's index, and its epoch after the first (`3 e1`)."""
    return f"{index} e{epoch}" if epoch else str(index)
