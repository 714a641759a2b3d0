"""A model's load as the engine strip shows it: in flight against its limit, and for a model with
several replicas how many are up — or, when none is, how long its requests have been waiting."""

from __future__ import annotations

from rich.text import Text

from evaltui.engine.stream.events import PairStatus
from evaltui.engine.stream.state import RunState
from evaltui.text import duration
from evaltui.ui import fmt, look

_INFERRING = (PairStatus.PENDING, PairStatus.RUNNING)


def strip_models(state: RunState, max_workers: dict[str, int]) -> dict[str, int]:
    """The models whose load the strip shows: those with inference still to do and the judges
    grading answers now, while any is busy (a finished one would keep its place at the front
    and push the others past 80 columns); every model once none is."""
    busy = {p.model for p in state.pairs.values() if p.status in _INFERRING} | {p.judge for p in state.pairs.values() if p.judging}
    if not busy or busy >= max_workers.keys():
        return max_workers
    return {m: w for m, w in max_workers.items() if m in busy}


def model_load(state: RunState, model: str, max_workers: int, *, live: bool, styles: fmt.Styles) -> Text:
    """`m 12/64`; adaptive or several urls: `m 12/16≤64 2/3 up`; all down: `m ALL DOWN 12s`."""
    load = state.load.get(model)
    if load is None or not load.replicas:
        in_flight = load.in_flight if load and live else 0
        return Text(f"{model} {in_flight}/{load.max_workers if load else max_workers}")
    text = Text(f"{model} {load.in_flight if live else 0}/{load.limit}")
    if load.limit != load.max_workers:
        text.append(f"≤{load.max_workers}", style=styles(look.MUTED))
    views = state.replicas.get(model, {})
    if len(load.replicas) > 1:
        up = sum(1 for v in views.values() if v.state == "up")
        style = "" if up == len(load.replicas) else styles(look.WARN)
        text.append(f" {up}/{len(load.replicas)} up", style=style)
    down = state.down_for(model)
    if down is not None and live:
        text.append(f" ALL DOWN {duration(down)}", style=styles(look.ALARM))
    return text
