"""Write small plans and datasets for tests; run the engine in-process and collect its events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import tomli_w

from evaltui.engine.run.runner import Runner
from evaltui.engine.stream import events as ev
from evaltui.plan import Plan, load_plan
from evaltui.sim import AnswerKey

FAST_RUN = {"heartbeat_interval": 0.2, "poll_interval": 0.1, "watch_interval": 0.2, "log_interval": 60.0, "heartbeat_timeout": 30.0}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def arithmetic(n: int, prefix: str = "Q") -> list[dict[str, Any]]:
    return [{"question": f"{prefix}{i}: what is {i} + {i + 7}?", "answer": f"{i} + {i + 7} = {2 * i + 7}\n#### {2 * i + 7}"} for i in range(n)]


def key_for(*row_sets: list[dict[str, Any]]) -> AnswerKey:
    """The simulator's answer key for datasets of {question, answer} rows: it answers them right."""
    k = AnswerKey()
    for rows in row_sets:
        for r in rows:
            k.add_gen(r["question"], r["answer"])
    return k


def write_plan(folder: Path, *, models: list[dict[str, Any]], datasets: list[dict[str, Any]], run: dict[str, Any] | None = None, name: str = "plan.toml") -> Path:
    data = {"title": "test", "run": {**FAST_RUN, "work_dir": "out", **(run or {})}, "models": models, "datasets": datasets}
    path = folder / name
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def lightllm(abbr: str, sim_url: str, **kw: Any) -> dict[str, Any]:
    return {"abbr": abbr, "type": "lightllm", "url": f"{sim_url}/{abbr}/generate", "max_workers": 8, "retry": 2, "backoff": 0.0, "timeout": 10.0, **kw}


def chat(abbr: str, sim_url: str, **kw: Any) -> dict[str, Any]:
    return {"abbr": abbr, "type": "openai-chat", "url": f"{sim_url}/{abbr}/v1", "model": abbr, "max_workers": 8, "retry": 2, "backoff": 0.0, "timeout": 10.0, **kw}


def gsm_dataset(abbr: str, path: Path, **kw: Any) -> dict[str, Any]:
    return {"abbr": abbr, "path": str(path), "prompt": "{question}", "target": "{answer}", "evaluator": {"type": "gsm8k"}, **kw}


def run_plan(plan_path: Path | Plan, **runner_kw: Any) -> tuple[int, list[ev.Event], Runner]:
    plan = plan_path if isinstance(plan_path, Plan) else load_plan(plan_path)
    events: list[ev.Event] = []
    runner = Runner(plan, sink=events.append, **runner_kw)
    code = anyio.run(_bounded, runner)
    return code, events, runner


async def _bounded(runner: Runner) -> int:
    with anyio.fail_after(120):  # no test run may hang the suite
        return await runner.run()


def of_type(events: list[ev.Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
