"""The demo's shape as a scripted stream (sample_configs/demo.toml: two models, four datasets, its
title), for the pictures of what a new user meets at 80×24 — with a clock that moves only when
told and no engine running, so every frame is the same from run to run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan
from ui_script import Clock

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.ui.app import EvalApp

TITLE = "evaltui demo: two simulated models"
MODELS = ("sim-strong", "sim-weak")
DATASETS = ("word-problems", "multiple-choice", "completions", "code")
TOTALS = {"word-problems": 200, "multiple-choice": 200, "completions": 200, "code": 24}


def demo_app(tmp_path: Path, clock: Clock, *, theme: str = "evaltui-dark") -> EvalApp:
    return scripted_app(tmp_path, clock, MODELS, DATASETS, title=TITLE, theme=theme)


def scripted_app(tmp_path: Path, clock: Clock, models: Sequence[str], datasets: Sequence[str], *, title: str | None = None, theme: str = "evaltui-dark") -> EvalApp:
    """The app over a plan of `models` × `datasets` that no server answers: a test scripts its
    events on the fake clock (the engine is not started)."""
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic(4))
    plan = write_plan(
        tmp_path,
        models=[{"abbr": m, "type": "lightllm", "url": "http://127.0.0.1:9/generate", "max_workers": 16} for m in models],
        datasets=[gsm_dataset(d, data) for d in datasets],
        run={"heartbeat_timeout": 60.0},
    )
    if title is not None:
        plan_text = plan.read_text(encoding="utf-8").replace('title = "test"', f'title = "{title}"')
        plan.write_text(plan_text, encoding="utf-8")
    runner = Runner(load_plan(plan), work_dir=tmp_path / "out")
    return EvalApp(runner, theme=theme, start=False, clock=clock.monotonic, wall_clock=clock.wall)


def demo_running(clock: Clock) -> list[ev.Event]:
    """sim-strong's first dataset half-way, everything else pending, a live heartbeat."""
    out: list[ev.Event] = [ev.RunStarted("/home/user/evaltui/outputs/demo", MODELS, DATASETS, TITLE)]
    out += [ev.DatasetPlanned(m, d, TOTALS[d], 1) for m in MODELS for d in DATASETS]
    out += [ev.DatasetStarted("sim-strong", "word-problems", 200, 200)]
    out += [ev.ShardStatusChanged("sim-strong", "word-problems", 0, 1, ev.PairStatus.RUNNING, 200, 0, 0)]
    out += [ev.SampleFinished("sim-strong", "word-problems", 0, i) for i in range(120)]
    out += [ev.Heartbeat(clock.wall() - 1.0), ev.ModelLoad("sim-strong", 16, 16, 0, 120)]
    return out


def demo_failures() -> list[ev.Event]:
    err = ev.SampleError("http", 503, "Service Unavailable: the server is overloaded", 5)
    return [ev.SampleFailed("sim-strong", "word-problems", 0, i, err) for i in (120, 121)]
