"""Theme files: the bundled three, the user's own, broken ones, and the remembered choice."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from pathlib import Path

import pytest
from ui_script import Clock, feed, planned, scripted_app

from evaltui import cli
from evaltui.ui.themes import config_dir, load_themes, remembered_theme

BUNDLED = {"evaltui-dark", "evaltui-light", "evaltui-high-contrast"}


def test_bundled_themes_load_and_differ() -> None:
    found = load_themes()
    assert BUNDLED <= set(found.themes) and not found.problems
    assert found.cycle()[:3] == ["evaltui-dark", "evaltui-light", "evaltui-high-contrast"]
    assert found.themes["evaltui-light"].dark is False and found.themes["evaltui-dark"].dark is True
    assert found.themes["evaltui-high-contrast"].background == "#000000"


def test_t_cycles_and_the_choice_is_remembered(tmp_path: Path) -> None:
    async def press_t() -> str:
        app = scripted_app(tmp_path, Clock())
        async with app.run_test() as pilot:
            assert app.theme == "evaltui-dark"
            await pilot.press("t")
            await pilot.pause()
            return app.theme

    assert asyncio.run(press_t()) == "evaltui-light"
    assert (config_dir() / "settings.toml").is_file() and remembered_theme() == "evaltui-light"
    assert str(config_dir()).startswith(os.environ["EVALTUI_CONFIG_DIR"])

    async def reopen() -> str:
        app = scripted_app(tmp_path, Clock(), theme=None)
        async with app.run_test():
            return app.theme

    assert asyncio.run(reopen()) == "evaltui-light"


def test_a_broken_theme_file_is_reported_and_falls_back(tmp_path: Path) -> None:
    user = config_dir() / "themes"
    user.mkdir(parents=True)
    (user / "mine.toml").write_text('name = "mine"\nprimary = "not-a-colour"\n', encoding="utf-8")
    (user / "typo.toml").write_text('name = "typo"\nprimary = "#ff0000"\nbackgrund = "#000000"\n', encoding="utf-8")
    (user / "ok.toml").write_text('name = "ok"\nprimary = "#ff8800"\n', encoding="utf-8")
    found = load_themes()
    assert "ok" in found.themes and "mine" not in found.themes and "typo" not in found.themes
    assert any("mine.toml" in p and "not-a-colour" in p for p in found.problems)
    assert any("typo.toml" in p and "backgrund" in p for p in found.problems)

    async def scenario() -> tuple[str, list[str]]:
        app = scripted_app(tmp_path, Clock(), theme="mine")
        async with app.run_test(notifications=True) as pilot:
            feed(app, planned())
            await pilot.pause()
            return app.theme, [n.message for n in app._notifications]

    theme, notes = asyncio.run(scenario())
    assert theme == "evaltui-dark"
    assert any("mine.toml" in n for n in notes) and any("no usable theme 'mine'" in n for n in notes)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_unknown_theme_is_a_usage_error_listing_every_theme_that_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2, one line naming the flag and the value. `--theme nosuch` named evaltui's three though `--theme dracula` works: Textual's are listed too."""
    from planmaker import arithmetic, gsm_dataset, lightllm, write_jsonl, write_plan
    from textual.theme import BUILTIN_THEMES

    plan = write_plan(tmp_path, models=[lightllm("m", "http://127.0.0.1:9")], datasets=[gsm_dataset("d", write_jsonl(tmp_path / "d.jsonl", arithmetic(2)))])
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", _Tty())
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main([str(plan), "--theme", "nosuch"]) == 2
    said = err.getvalue()
    assert said.count("\n") == 1 and "--theme" in said and "nosuch" in said and "dracula" in said and "evaltui-dark" in said
    assert all(name in said for name in [*BUNDLED, *BUILTIN_THEMES])


def test_the_theme_files_say_the_folder_readme_says() -> None:
    """dark.toml said `<your config dir>/evaltui/themes/`; README and the code say `<config dir>/themes/`."""
    from evaltui.ui.themes import theme_dirs

    root = Path(__file__).resolve().parent.parent
    comment = (root / "themes" / "dark.toml").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "<config dir>/themes/" in comment and "~/.config/evaltui/themes/" in comment
    assert "`<config dir>/themes/`" in readme and "`~/.config/evaltui/themes/`" in readme
    assert theme_dirs()[-1] == config_dir() / "themes"


def test_a_paint_after_the_widget_lost_its_styles_is_plain_not_a_crash() -> None:
    """A tick that comes as the app closes paints widgets already unmounted, whose component
    styles Textual has cleared (`look--muted` was a KeyError that ended the app under load):
    plain, and not kept for when the styles are back."""
    from rich.style import Style

    from evaltui.ui import look
    from evaltui.ui.widgets.progress import ProgressTable

    table = ProgressTable()  # never mounted: no component styles, as after an unmount
    assert table.look(look.MUTED) == Style()
    assert table.look(look.BAR_DONE) == Style()
    assert look.MUTED not in table.look._styles
