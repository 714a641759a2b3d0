"""The keys in one table (ui/keys.py): the bindings, the command palette, the help screen and
README all say the same keys; and the modules of ui/ import no circle."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

from test_ui_app import footer_keys
from ui_script import Clock, alpha_gsm_failed, feed, finished, planned, running, scripted_app

from evaltui.ui import keys
from evaltui.ui.screens.modals import HELP

ROOT = Path(__file__).resolve().parent.parent


def _readme_keys() -> set[str]:
    """The keys README's table of the session's keys names (its first column, in backticks)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| key | |") :].split("\n\n", 1)[0]
    return {k for line in table.splitlines()[2:] for k in re.findall(r"`([^`]+)`", line.split(" | ")[0])}


def test_readme_and_the_help_list_every_key_of_the_session() -> None:
    in_readme = _readme_keys()
    for key in keys.KEYS:
        if key.where in (keys.APP, keys.RUN, keys.DOC):
            for name in key.display.split():
                assert name in in_readme, f"README's key table does not list {name!r} ({key.help})"
            assert any(line.startswith(f" {key.display} ") and key.help in line for line in HELP.splitlines()), key


def test_each_screen_binds_the_tables_keys() -> None:
    from evaltui.ui.app import EvalApp
    from evaltui.ui.screens.details import DetailsScreen
    from evaltui.ui.screens.fleet import FleetScreen
    from evaltui.ui.screens.modals import ConfirmQuit, HelpScreen
    from evaltui.ui.screens.run import RunScreen
    from evaltui.ui.widgets.board import LeaderboardTable
    from evaltui.ui.widgets.progress import ProgressTable

    for node, where in ((EvalApp, keys.APP), (RunScreen, keys.RUN), (DetailsScreen, keys.DETAILS), (FleetScreen, keys.FLEET),
                        (ConfirmQuit, keys.QUIT), (HelpScreen, keys.HELP)):
        bound = {(b.key, b.action) for b in node.BINDINGS if not isinstance(b, tuple)}  # type: ignore[union-attr]
        assert {(k.keys, k.action) for k in keys.KEYS if k.where == where} <= bound, node
    for table in (ProgressTable, LeaderboardTable):
        assert [(b.key, b.action) for b in table.BINDINGS] == [("enter", "screen.details")]  # type: ignore[union-attr]


def _palette_titles(app, pilot, query: str):  # type: ignore[no-untyped-def]
    async def look() -> list[str]:
        from textual.command import CommandList, CommandPalette

        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*query)
        hits = app.screen.query_one(CommandList)
        for _ in range(20):  # the palette searches in the background: a bounded wait for its hits
            await pilot.pause(0.1)
            if hits.option_count:
                break
        shown = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
        await pilot.press("escape")
        await pilot.pause()
        return shown

    return look()


def test_the_palette_offers_the_tables_actions_and_themes_not_textuals_extras(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned())
            extras = await _palette_titles(app, pilot, "m") + await _palette_titles(app, pilot, "sc")  # Maximize, Screenshot
            keys_panel = await _palette_titles(app, pilot, "keys")
            ours = await _palette_titles(app, pilot, "e")
            return extras, keys_panel, ours

    extras, keys_panel, ours = asyncio.run(scenario())
    said = " ".join(extras + keys_panel)
    assert "Maximize" not in said and "Screenshot" not in said and "Show help for the focused widget" not in said, said
    assert any("Next theme" in t for t in ours) and any("Theme" in t and "Change the current theme" in t for t in ours), ours
    assert not any("Retry" in t for t in ours)  # nothing failed: retry does not apply


def test_r_and_R_where_they_do_not_apply_say_why(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> list[str]:
        from evaltui.ui.widgets.progress import ProgressTable

        app = scripted_app(tmp_path, clock)
        said: list[str] = []
        shown = app.notify
        app.notify = lambda message, **kw: (said.append(message), shown(message, **kw))[1]  # type: ignore[method-assign]
        async with app.run_test(size=(120, 30)) as pilot:
            feed(app, planned() + running(clock) + alpha_gsm_failed() + finished())
            table = app.query_one(ProgressTable)
            table.move_cursor(row=table.get_row_index("beta\tgsm"))
            await pilot.pause()
            assert "r" not in footer_keys(app) and "R" not in footer_keys(app)  # nothing failed: neither offered
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("R")
            await pilot.pause()
        return said

    said = asyncio.run(scenario())
    assert "beta/gsm is scored: nothing to retry" in said and "nothing failed: nothing to retry" in said, said


def _imports(path: Path, package: str) -> set[str]:
    """The evaltui.ui modules a module imports, TYPE_CHECKING's included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {name for name in found if name.startswith(package)}


def test_the_ui_modules_import_no_circle() -> None:
    folder = ROOT / "evaltui" / "ui"
    modules = {
        "evaltui." + ".".join(p.relative_to(ROOT / "evaltui").with_suffix("").parts): p
        for p in folder.rglob("*.py")
    }
    modules = {name.removesuffix(".__init__"): path for name, path in modules.items()}
    graph = {name: {m for m in _imports(path, "evaltui.ui") if m in modules and m != name} for name, path in modules.items()}

    def circle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    return [*trail, start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
        return None

    circles = [c for c in map(circle_from, graph) if c]
    assert not circles, circles
