"""A work dir as the report reads it, through the readers `evaltui watch` and `evaltui show` use.

The run as a whole — its pairs, their statuses and counts, scores, the leaderboard, whether a
run is at it now — is one look of the follower (engine/follow: the same view `watch` shows, of
an evaltui work dir or an OpenCompass one, a run in progress or ended). Each pair's samples come
from `WorkDirView.records` (an evaltui work dir: the per-sample log joined with the verdicts,
as `show --export` writes them) or from the OpenCompass predictions reader; either way as
records of the export's shape (docs/export.md), so the page reads one kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evaltui.engine.disk.records import WorkDirView
from evaltui.engine.disk.workdir import NotAWorkDir
from evaltui.engine.follow.follower import Follower, open_view
from evaltui.engine.follow.opencompass_samples import iter_samples
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.pair import PairState
from evaltui.plan import Price
from evaltui.scoring.leaderboard import Leaderboard

__all__ = ["NotAWorkDir", "ReportSource"]


class ReportSource:
    def __init__(self, root: Path) -> None:
        """NotAWorkDir when `root` is none, or holds nothing a run wrote yet."""
        self.root = root.resolve()
        self.follower = Follower(open_view(self.root))
        self.follower.look()
        view = self.follower.view
        self.kind = view.kind
        if not view.pairs():
            raise NotAWorkDir(f"{self.root}: nothing to report yet: {view.problem or view.expects}")
        self._records = WorkDirView(self.root) if view.kind == "evaltui" else None

    @property
    def title(self) -> str:
        return self.follower.title

    @property
    def pairs(self) -> list[PairState]:
        state = self.follower.state
        return [state.pairs[key] for key in self.follower.pairs if key in state.pairs]

    def leaderboard(self) -> Leaderboard:
        return self.follower.leaderboard()

    @property
    def live(self) -> bool:
        """A run is at it now (the report is a snapshot of it)."""
        return self.follower.state.finished is None

    def said(self) -> list[str]:
        """What the follower found, in its words (`a run in progress (pid 4242)`, the run stopped …)."""
        return [n.message for n in self.follower.state.notices if isinstance(n, ev.Notice)]

    def records(self, model: str, dataset: str) -> Iterator[dict[str, Any]]:
        """Each (sample, epoch)'s record, in order, in the export's shape."""
        if self._records is not None:
            yield from self._records.records(model, dataset)
            return
        for s in iter_samples(self.root, model, dataset):
            record: dict[str, Any] = {"index": s.sample, "epoch": 0, "answer": s.prediction, "gold": s.gold}
            if isinstance(s.prompt, list):  # OpenCompass's chat turns
                record["messages"] = [_turn(t) for t in s.prompt if isinstance(t, dict)]
            else:
                record["prompt"] = "" if s.prompt is None else str(s.prompt)
            if s.extracted is not None:
                record["extracted"] = s.extracted
            if s.correct is not None:
                record["correct"] = s.correct
            yield record

    def price(self, model: str) -> Price | None:
        """The model's price (an evaltui plan's), for the cost of its tokens."""
        cfg = self.follower.models.get(model)
        return None if cfg is None else cfg.price


def _turn(turn: dict[str, Any]) -> dict[str, str]:
    role = str(turn.get("role", "")).lower()
    content = turn.get("prompt", turn.get("content", ""))
    return {"role": {"human": "user", "bot": "assistant"}.get(role, role), "content": "" if content is None else str(content)}
