"""The command palette offers the keys table's actions (ui/keys.py), those that apply right now,
run where the key would run them: the app's on the app, the run screen's on that screen.

It knows the screen it was opened over only as something that can say whether an action applies
(`Acts`), so it imports neither the app nor the run screen (no import circle)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Protocol, runtime_checkable

from textual.command import DiscoveryHit, Hit, Hits, Provider

from evaltui.ui import keys


@runtime_checkable
class Acts(Protocol):
    def action_applies(self, action: str) -> bool: ...


class KeyCommands(Provider):
    def _available(self) -> Iterator[tuple[Callable[[], Awaitable[bool]], str, str]]:
        screen = self.screen
        for key, help_text in keys.palette_entries():
            if key.where == keys.APP:
                yield partial(self.app.run_action, key.action), key.palette, help_text
            elif isinstance(screen, Acts) and screen.action_applies(key.action):
                yield partial(self.app.run_action, key.action, screen), key.palette, help_text

    async def discover(self) -> Hits:
        for run, title, help_text in self._available():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for run, title, help_text in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
