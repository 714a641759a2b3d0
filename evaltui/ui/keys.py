"""Every key of the session in one table: the screens' bindings, the command palette's entries
and the help screen are all built from it, so the three cannot disagree (as harlequin's
actions.py feeds its keymap, and posting builds its help from the live bindings).

A key belongs to a place: the app (every screen), the run screen, a pane of it, one of the
smaller screens — or nowhere (`DOC`): a key Textual itself handles (moving in a table, Tab),
listed so the help and README say it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

APP, RUN, DETAILS, FLEET, QUIT, HELP, DOC = "app", "run", "details", "fleet", "quit", "help", "doc"


@dataclass(frozen=True)
class Key:
    keys: str  # Textual's key names, comma-separated ("y,q")
    action: str  # in the namespace of the place's node; "" for a DOC key
    where: str  # APP, RUN, TABLE, ... (above)
    label: str = ""  # the footer's word; "" keeps it out of the footer
    help: str = ""  # the help screen's line (and the palette's help text)
    shown: str = ""  # the keys as the help and README write them (default: `keys`)
    palette: str = ""  # the command palette's title; "" keeps it out of the palette
    refusal: str = ""  # an action run in place of `action` when that does not apply (it says why)
    tables: bool = False  # bound on the run screen's tables too: a focused DataTable's own key would hide the screen's

    @property
    def display(self) -> str:
        return self.shown or self.keys

    @property
    def binding_id(self) -> str:
        return f"{self.where}.{self.action}"


KEYS: tuple[Key, ...] = (
    Key("", "", DOC, help="move in the focused pane", shown="↑ ↓ PgUp PgDn"),
    Key("", "", DOC, help="scroll sideways (details: the gold column)", shown="← →"),
    Key("", "", DOC, help="next pane (it grows where the screen is short)", shown="Tab"),
    Key("enter", "details", RUN, "Details", "details: failed samples, answers beside their gold",
        palette="Details of the highlighted dataset", tables=True),
    Key("r", "retry", RUN, "Retry", "retry the highlighted failed (or skipped) dataset",
        palette="Retry the highlighted failed dataset", refusal="why_not('retry')"),
    Key("R", "retry_all", RUN, "Retry all", "retry every failed or skipped dataset",
        palette="Retry every failed dataset", refusal="why_not('retry_all')"),
    Key("t", "next_theme", APP, "Theme", "next theme (remembered)", palette="Next theme"),
    Key("ctrl+p", "command_palette", DOC, help="command palette: these actions and every theme"),
    Key("q", "quit", APP, "Quit", "quit; asks while work runs (finished work is kept)",
        palette="Quit"),
    Key("question_mark", "help", APP, "Help", "this help", shown="?", palette="Help: keys and panes"),
    Key("escape", "app.pop_screen", DETAILS, "Back", "close a screen (details, help)"),
    Key("escape", "app.pop_screen", FLEET, "Back"),
    Key("y,q", "answer(True)", QUIT, "Quit"),  # q again: the user meant it
    Key("n,escape", "answer(False)", QUIT, "Keep running"),
    Key("escape,question_mark,q", "app.pop_screen", HELP, "Close"),
)

# what the palette says under each title, where the help line is not enough
_PALETTE_HELP = {
    "retry": "re-run only its failed samples, then score it",
    "retry_all": "re-run the failed samples of all failed datasets",
    "details": "failed samples and predictions next to their gold",
    "next_theme": "cycle the evaltui themes (the choice is remembered)",
    "quit": "finished work is kept; a re-run resumes",
}


def bindings(where: str) -> list[BindingType]:
    """The bindings of one place, in the table's order; a key with a refusal gets a second,
    hidden binding that runs when the first does not apply (Textual tries a key's bindings in
    turn), so `r` on a scored dataset says why nothing happens instead of nothing."""
    out: list[BindingType] = []
    for key in KEYS:
        if key.where != where:
            continue
        out.append(Binding(key.keys, key.action, key.label, show=bool(key.label), key_display=key.shown or None, id=key.binding_id))
        if key.refusal:
            out.append(Binding(key.keys, key.refusal, key.label, show=False, id=f"{key.binding_id}.refused"))
    return out


def table_bindings() -> list[BindingType]:
    """The run screen's keys its tables must bind themselves (`enter`: DataTable's own, hidden
    from the footer, would win over the screen's), acting on the screen."""
    return [
        Binding(k.keys, f"screen.{k.action}", k.label, key_display=k.shown or None, id=f"table.{k.action}")
        for k in KEYS if k.tables
    ]


def palette_entries() -> list[tuple[Key, str]]:
    """(key, help text) of the keys the command palette offers."""
    return [(k, _PALETTE_HELP.get(k.action, k.help)) for k in KEYS if k.palette]


def help_lines(width: int = 72) -> list[str]:
    """The help screen's key lines: one a key of the session (the run screen's and the app's,
    and the ones Textual handles), `width` columns at most."""
    shown = [k for k in KEYS if k.help and k.where in (APP, RUN, DOC, DETAILS)]
    column = max(len(k.display) for k in shown) + 2
    lines = []
    for k in shown:
        line = f" {k.display:<{column}}{k.help}"
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return lines
