"""A model's load as the engine strip shows it: in flight against its limit, and for a model with
several replicas how many are up — or, when none is, how long its requests have been waiting."""

from __future__ import annotations

from rich.text import Text

from evaltui.engine.state import RunState
from evaltui.ui import fmt


def model_load(state: RunState, model: str, max_workers: int, *, live: bool, palette: fmt.Palette) -> Text:
    """`m 12/64`; adaptive or several urls: `m 12/16≤64 2/3 up`; all down: `m ALL DOWN 12s`."""
    load = state.load.get(model)
    if load is None or not load.replicas:
        in_flight = load.in_flight if load and live else 0
        return Text(f"{model} {in_flight}/{load.max_workers if load else max_workers}")
    text = Text(f"{model} {load.in_flight if live else 0}/{load.limit}")
    if load.limit != load.max_workers:
        text.append(f"≤{load.max_workers}", style=fmt.colour(palette, "foreground-muted"))
    views = state.replicas.get(model, {})
    if len(load.replicas) > 1:
        up = sum(1 for v in views.values() if v.state == "up")
        style = "" if up == len(load.replicas) else fmt.colour(palette, "warning")
        text.append(f" {up}/{len(load.replicas)} up", style=style)
    down = state.down_for(model)
    if down is not None and live:
        text.append(f" ALL DOWN {fmt.duration(down)}", style=f"bold {fmt.colour(palette, 'error')}")
    return text
