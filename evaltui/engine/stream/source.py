"""What a front end needs of a run, whether it drives the run or only follows it.

A `Runner` drives a run (it infers, scores, retries and can be cancelled); a `Follower`
(follow/follower.py, `evaltui watch`) follows one that another process drives, from its work dir. The
Textual app and the headless renderer take either: both report through the same typed events
and answer the same few questions. `watching` is what tells them apart where it matters: a
follower cannot retry (the plan and the work dir's lock belong to the process running it), and
leaving it interrupts nothing; `retry_advice` says how the run it follows is retried instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair

if TYPE_CHECKING:
    from evaltui.engine.disk.details import PairDetails
    from evaltui.plan import ModelConfig
    from evaltui.scoring.leaderboard import Leaderboard



class RunSource(Protocol):
    watching: bool  # True: it follows a run another process drives (it cannot retry; quitting interrupts nothing)

    @property
    def retry_advice(self) -> str:
        """What `r`/`R` say when `watching`: how the run followed is retried ("" for a runner)."""
        ...

    @property
    def pairs(self) -> list[Pair]:
        """Every model×dataset of the run, in plan order (as far as it is known yet)."""
        ...

    @property
    def title(self) -> str: ...

    @property
    def heartbeat_timeout(self) -> float:
        """Seconds of silence from infer_heartbeat after which inference counts as gone."""
        ...

    @property
    def models(self) -> dict[str, ModelConfig]:
        """Each model's settings, as far as known (a follower of an OpenCompass run knows none):
        its limits are `.limits` (plan.ModelLimits), for the strip and the fleet screen."""
        ...

    def subscribe(self, sink: ev.Sink, *, replay: bool = True) -> None: ...

    def leaderboard(self) -> Leaderboard:
        """The run's table with the scores known so far (no disk reads: the app calls it on its loop)."""
        ...

    def pair_details(self, model: str, dataset: str) -> PairDetails:
        """A pair's failed samples and a few predictions; reads files, so off the event loop."""
        ...

    async def run(self) -> int: ...

    async def retry(self, pairs: Sequence[Pair]) -> int: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...
