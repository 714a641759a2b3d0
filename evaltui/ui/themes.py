"""Theme files and the remembered choice.

Themes are TOML files a user can copy and edit, so a bad one is expected, not exceptional: every
file is checked (known keys, colours that parse) and a broken one becomes a readable problem for a
notification while the others still load. Three places are searched, later ones winning on a
name clash: the themes packaged in the wheel (`evaltui/_themes`), the repo's `themes/` (a source
checkout), and `<config dir>/themes/` (the user's own). The chosen theme's name is remembered in
`<config dir>/settings.toml`; EVALTUI_CONFIG_DIR moves the config dir (tests point it elsewhere).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from platformdirs import user_config_dir
from textual.color import Color
from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the backport on 3.10
    import tomli as tomllib

DEFAULT_THEME = "evaltui-dark"
BUNDLED_ORDER = ("evaltui-dark", "evaltui-light", "evaltui-high-contrast")
# A variable the app's CSS and bars use; a theme file may set it, else it derives from the panel.
BAR_EMPTY = "evaltui-bar-empty"
_THEME_KEYS = {f.name for f in dataclasses.fields(Theme)}


def config_dir() -> Path:
    override = os.environ.get("EVALTUI_CONFIG_DIR")
    return Path(override) if override else Path(user_config_dir("evaltui", appauthor=False))


def theme_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent.parent  # the evaltui package
    return [here / "_themes", here.parent / "themes", config_dir() / "themes"]


@dataclass
class ThemeSet:
    themes: dict[str, Theme] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one line per broken file, naming it

    def cycle(self) -> list[str]:
        """The names `t` steps through: the bundled three first, then the user's, by name."""
        first = [n for n in BUNDLED_ORDER if n in self.themes]
        return first + sorted(n for n in self.themes if n not in BUNDLED_ORDER)


def load_theme_file(path: Path) -> Theme:
    """One theme file as a Theme; ValueError with a message naming the file and the field."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - _THEME_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_THEME_KEYS))})")
    data.setdefault("name", path.stem)
    for key in ("name", "primary"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"{path}: {key}: expected a non-empty string")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError(f"{path}: variables: expected a table of strings")
    for key, value in variables.items():
        _check_variable(path, key, value)
    try:
        theme = Theme(**data)
        theme.to_color_system().generate()  # parses every colour: fail here, not mid-repaint
    except Exception as e:  # Textual raises ColorParseError, TypeError, ValueError... all mean "bad file"
        raise ValueError(f"{path}: {e}") from None
    return theme


def _check_variable(path: Path, key: str, value: str) -> None:
    """Theme.generate() copies variables unparsed, so a bad one would only fail mid-repaint once
    chosen. Textual's own non-colour variables are text styles ("block-cursor-text-style"), and a
    value may refer to another variable ("$panel-lighten-2"); everything else must be a colour."""
    if key.endswith("-style") or value.startswith("$"):
        return
    try:
        Color.parse(value)
    except Exception:  # noqa: BLE001 - ColorParseError and friends: all mean "not a colour"
        raise ValueError(f"{path}: variables.{key}: {value!r} is not a colour") from None


def load_themes(dirs: list[Path] | None = None) -> ThemeSet:
    found = ThemeSet()
    for folder in theme_dirs() if dirs is None else dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ValueError as e:
                found.problems.append(str(e))
                continue
            found.themes[theme.name] = theme
    return found


def remembered_theme() -> str | None:
    path = config_dir() / "settings.toml"
    try:
        with path.open("rb") as f:
            value = tomllib.load(f).get("theme")
    except (OSError, tomllib.TOMLDecodeError):
        return None  # no choice yet, or a file we cannot use: the default is a fine answer
    return value if isinstance(value, str) else None


def remember_theme(name: str) -> str | None:
    """Save the choice; the error text if the config dir cannot be written (the app says it)."""
    folder = config_dir()
    path = folder / "settings.toml"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(tomli_w.dumps({"theme": name}), encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        return f"could not remember the theme in {path}: {e.strerror or e}"
    return None
