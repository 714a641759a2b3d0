"""Two small screens: the quit question asked while work runs, and the key help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from evaltui.ui import keys


class ConfirmQuit(ModalScreen[bool]):
    """Asked only while quitting would interrupt work. Should the run end while it is open, the
    question is moot and answers itself yes: the user pressed `q` to leave, and what kept them
    was only the work, now finished and kept (README: once the run has ended `q` leaves at once).
    Asking on (or a new question, "the run finished: quit?") would make them answer for nothing."""

    CSS_PATH = "modals.tcss"

    _answered = False

    BINDINGS = keys.bindings(keys.QUIT)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text("Work is still running. Quit now?\n\nFinished samples are kept; running the plan again resumes from them."))
            with Horizontal(id="dialog-buttons"):
                yield Button("Quit (y)", id="yes", variant="error")
                yield Button("Keep running (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        if not self._answered:  # once: a second dismiss would pop the screen beneath
            self._answered = True
            self.dismiss(yes)

    def moot(self) -> None:
        """Nothing runs any more: the answer is yes (the app then leaves with the run's exit code)."""
        self.action_answer(True)


PANES = """\
Panes
 strip        heartbeat age (red when stale), samples, requests per
              second (and their last minutes, where there is room),
              retries, requests in flight vs max_workers
 progress     per model × dataset (and shard): bar, done/total, failed,
              status, req/s, ETA, score; "↓ 3 more": rows out of sight
 leaderboard  datasets × models, best first; the Average fills in
 scores       each dataset's scores as bars (where there is room)
 failures     one line per failed sample, newest last (once one fails)"""

HELP = "\n".join(["Keys", *keys.help_lines(), PANES])


class HelpScreen(ModalScreen[None]):
    """The keys and panes, in 20 rows: it fits 80×24 whole, and scrolls (with a scrollbar) in less."""

    CSS_PATH = "modals.tcss"

    BINDINGS = keys.bindings(keys.HELP)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as frame:
            frame.border_title = "help"
            frame.border_subtitle = "esc closes"
            yield Static(Text(HELP))
