"""A scripted event stream for the app: two models, two datasets (one split in two shards),
a clock the test moves, and no engine running — what a run looks like, without its timing."""

from __future__ import annotations

from pathlib import Path

from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.scoring.leaderboard import build_leaderboard
from evaltui.ui.app import EvalApp

HEARTBEAT_TIMEOUT = 30.0


class Clock:
    """Monotonic and wall time that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now


def scripted_app(tmp_path: Path, clock: Clock, *, theme: str | None = "evaltui-dark") -> EvalApp:
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic(4))
    plan = write_plan(
        tmp_path,
        models=[
            {"abbr": "alpha", "type": "lightllm", "url": "http://127.0.0.1:9/generate", "max_workers": 16},
            {"abbr": "beta", "type": "lightllm", "url": "http://127.0.0.1:9/generate", "max_workers": 8},
        ],
        datasets=[gsm_dataset("gsm", data), gsm_dataset("mmlu", data, shards=2)],
        run={"heartbeat_timeout": HEARTBEAT_TIMEOUT},
    )
    runner = Runner(load_plan(plan), work_dir=tmp_path / "out")
    app = EvalApp(runner, theme=theme, start=False, clock=clock.monotonic, wall_clock=clock.wall)
    return app


def planned() -> list[ev.Event]:
    out: list[ev.Event] = [ev.RunStarted("/tmp/out", ("alpha", "beta"), ("gsm", "mmlu"), "scripted run")]
    for model in ("alpha", "beta"):
        out.append(ev.DatasetPlanned(model, "gsm", 100, 1))
        out.append(ev.DatasetPlanned(model, "mmlu", 200, 2))
    return out


def running(clock: Clock) -> list[ev.Event]:
    """alpha/gsm 40 done, 3 failed (with brackets in the message); alpha/mmlu shard 0 half-way."""
    out: list[ev.Event] = [ev.DatasetStarted("alpha", "gsm", 100, 100), ev.DatasetStarted("alpha", "mmlu", 200, 200)]
    out += [ev.SampleFinished("alpha", "gsm", 0, i) for i in range(40)]
    err = ev.SampleError("http", 500, "upstream said [bold]nope[/bold] {\"detail\": [1, 2]}", 3)
    out += [ev.SampleFailed("alpha", "gsm", 0, i, err) for i in (40, 41, 42)]
    out += [ev.ShardStatusChanged("alpha", "mmlu", s, 2, "running", 100, 0, 0) for s in (0, 1)]
    out += [ev.SampleFinished("alpha", "mmlu", 0, i) for i in range(50)]
    out += [ev.Heartbeat(clock.wall() - 2.0), ev.ModelLoad("alpha", 12, 16, 5, 95)]
    return out


def alpha_gsm_failed() -> list[ev.Event]:
    out: list[ev.Event] = [ev.SampleFinished("alpha", "gsm", 0, i) for i in range(43, 100)]
    out.append(ev.ShardStatusChanged("alpha", "gsm", 0, 1, "fail", 100, 97, 3, "3 samples failed"))
    out.append(ev.DatasetInferred("alpha", "gsm", "fail", 97, 3, "", "3 samples failed"))
    return out


def finished() -> list[ev.Event]:
    """Every pair scored (alpha/gsm after its retry), the run over with its leaderboard."""
    scores = {("alpha", "gsm"): 71.0, ("alpha", "mmlu"): 64.5, ("beta", "gsm"): 80.25, ("beta", "mmlu"): 58.0}
    out: list[ev.Event] = [ev.RetryStarted((("alpha", "gsm"),)), ev.DatasetStarted("alpha", "gsm", 100, 3)]
    out += [ev.SampleFinished("alpha", "gsm", 0, i) for i in (40, 41, 42)]
    for model, dataset in scores:
        total = 100 if dataset == "gsm" else 200
        out.append(ev.DatasetInferred(model, dataset, "done", total, 0))
        for s in range(2 if dataset == "mmlu" else 1):
            out.append(ev.ShardStatusChanged(model, dataset, s, 2 if dataset == "mmlu" else 1, "done", total // (2 if dataset == "mmlu" else 1), total // (2 if dataset == "mmlu" else 1), 0))
        out.append(ev.DatasetScored(model, dataset, "accuracy", scores[(model, dataset)]))
    rows = [("gsm", "abc123", "accuracy", "gen"), ("mmlu", "def456", "accuracy", "gen")]
    out.append(ev.RunFinished(0, False, {}, build_leaderboard(rows, ["alpha", "beta"], scores), 42.0))
    return out


def feed(app: EvalApp, events: list[ev.Event]) -> None:
    for e in events:
        app.run_screen.sink(e)
    app.fold_pending()
