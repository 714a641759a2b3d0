"""The command palette offers the same actions as the keys, only those that apply right now.

They run where the run screen's keys do: its own actions (retry, details) and the app's ("app.")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from evaltui.ui.app import EvalApp

ACTIONS = (
    ("retry", "Retry the highlighted failed dataset", "re-run only its failed samples, then score it"),
    ("retry_all", "Retry every failed dataset", "re-run the failed samples of all failed datasets"),
    ("details", "Details of the highlighted dataset", "failed samples and predictions next to their gold"),
    ("app.next_theme", "Next theme", "cycle the evaltui themes (the choice is remembered)"),
    ("app.help", "Help: keys and panes", ""),
    ("app.quit", "Quit", "finished work is kept; a re-run resumes"),
)


class EvalCommands(Provider):
    def _available(self) -> Iterator[tuple[Callable[[], Awaitable[bool]], str, str]]:
        screen = cast("EvalApp", self.app).run_screen
        for action, title, help_text in ACTIONS:
            if screen.action_applies(action):
                yield partial(self.app.run_action, action, screen), title, help_text

    async def discover(self) -> Hits:
        for run, title, help_text in self._available():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for run, title, help_text in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
