"""Two small screens: the quit question asked while work runs, and the key help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmQuit(ModalScreen[bool]):
    BINDINGS = [
        Binding("y,q", "answer(True)", "Quit", id="quit.yes"),  # q again: the user meant it
        Binding("n,escape", "answer(False)", "Keep running", id="quit.no"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text("Work is still running. Quit now?\n\nFinished samples are kept; running the plan again resumes from them."))
            with Horizontal(id="dialog-buttons"):
                yield Button("Quit (y)", id="yes", variant="error")
                yield Button("Keep running (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


HELP = """\
Keys
  ↑ ↓ PgUp PgDn  move in the focused pane       Tab     next pane
  enter          details of the highlighted dataset: failed samples,
                 predictions next to their gold
  r              retry the highlighted dataset's failed samples
                 (only on a failed or skipped dataset)
  R              retry every failed or skipped dataset
  t              next theme (remembered)        ctrl+p  command palette
  q              quit (asks while work runs; finished work is kept, a
                 re-run resumes); q again while stopping: leave at once
  ?              this help                      escape  close a screen

Panes
  progress     one row per model × dataset (and shard): bar, done/total,
               failed, status, requests per second, ETA, score
  strip        heartbeat age (red when stale), requests in flight vs
               max_workers, retries
  failures     one line per failed sample, newest last
  leaderboard  datasets × models, best model first; the Average row
               fills in as pairs score"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(Text(HELP))
