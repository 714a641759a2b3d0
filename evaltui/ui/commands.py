"""The command palette offers the same actions as the keys, only those that apply right now."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterator, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from evaltui.ui.app import EvalApp

ACTIONS = (
    ("retry", "Retry the highlighted failed dataset", "re-run only its failed samples, then score it"),
    ("retry_all", "Retry every failed dataset", "re-run the failed samples of all failed datasets"),
    ("details", "Details of the highlighted dataset", "failed samples and predictions next to their gold"),
    ("next_theme", "Next theme", "cycle the evaltui themes (the choice is remembered)"),
    ("help", "Help: keys and panes", ""),
    ("quit", "Quit", "finished work is kept; a re-run resumes"),
)


class EvalCommands(Provider):
    def _available(self) -> Iterator[tuple[str, str, str]]:
        app = cast("EvalApp", self.app)
        for action, title, help_text in ACTIONS:
            if app.action_applies(action):
                yield action, title, help_text

    async def discover(self) -> Hits:
        for action, title, help_text in self._available():
            yield DiscoveryHit(title, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action, title, help_text in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self.app.run_action, action), help=help_text)
