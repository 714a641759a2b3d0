"""`evaltui show WORK_DIR --export inspect -o DIR`: each model×dataset as an Inspect AI eval log.

Written through inspect_ai's own log API (`EvalLog` … `write_eval_log`, the optional extra
`evaltui[inspect]`), so `inspect view --log-dir DIR` opens an evaltui run and `read_eval_log`
reads it: one `.eval` file a pair (Inspect's log is one task × one model), each sample an
`EvalSample` — its prompt as the user's message (and the system's; a conversation: its every message), the answer as the
assistant's and as the output, the gold as the target, the verdict as a score (`C` / `I`, the
extracted answer, a judge's reasoning or code_exec's result as the explanation), its tokens,
time, attempts and error. Metrics are fractions, as Inspect's are (71.23 % → 0.7123); epochs
count from 1, as Inspect's do. Inspect writes a log whole, so a pair's samples are in memory
while its file is written (not the whole run's).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui import __version__
from evaltui.engine.disk.records import PairView, WorkDirView

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample, EvalSpec, EvalStats

    from evaltui.commands.export import Records

MISSING = "--export inspect writes Inspect AI's own logs, through its package: pip install 'evaltui[inspect]' (inspect_ai)"


def available() -> bool:
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        return False
    return True


def _iso(t: Any) -> str:
    return datetime.fromtimestamp(float(t), timezone.utc).isoformat(timespec="milliseconds") if isinstance(t, (int, float)) else ""


def export_inspect(view: WorkDirView, pairs: list[PairView], records: Records, folder: Path) -> list[Path]:
    """One `.eval` log per pair in `folder` (made if missing); their paths."""
    from inspect_ai.log import write_eval_log

    folder.mkdir(exist_ok=True)
    created = _iso(view.workdir.plan_file.stat().st_mtime)
    written = []
    for pair in pairs:
        log = _log(view, pair, list(records(pair)), created)
        stamp = created.replace(":", "-")
        path = folder / f"{stamp}_{pair.dataset}_{pair.model}.eval"
        write_eval_log(log, str(path))
        written.append(path)
    return written


def _log(view: WorkDirView, pair: PairView, found: list[dict[str, Any]], created: str) -> EvalLog:
    from inspect_ai.log import EvalError, EvalLog, EvalMetric, EvalPlan, EvalResults, EvalScore

    ds = view.plan.dataset(pair.dataset)
    scorer = ds.evaluator.type
    samples = [_sample(r, pair.model, scorer) for r in found]
    metrics = {k: EvalMetric(name=k, value=v / 100) for k, v in (pair.metrics or {}).items()}
    scores = [EvalScore(name=scorer, scorer=scorer, scored_samples=len(samples), metrics=metrics)] if pair.metrics else []
    status = "success" if pair.status == "scored" else "error" if pair.status in ("fail", "error", "stopped") else "started"
    error = EvalError(message=pair.error or pair.status, traceback="", traceback_ansi="") if status == "error" else None
    return EvalLog(
        version=2, status=status, eval=_spec(view, pair, created), plan=EvalPlan(),
        results=EvalResults(total_samples=pair.total, completed_samples=pair.completed, scores=scores),
        stats=_stats(pair.model, found, samples, created), error=error, samples=samples,
    )


def _spec(view: WorkDirView, pair: PairView, created: str) -> EvalSpec:
    from inspect_ai.log import EvalConfig, EvalDataset, EvalSpec

    plan = view.plan
    ds, model = plan.dataset(pair.dataset), next(m for m in plan.models if m.abbr == pair.model)
    dataset = EvalDataset(name=pair.dataset, location=str(plan.dataset_path(ds)), samples=pair.total // max(pair.epochs, 1))
    about = {"evaltui": __version__, "work_dir": str(view.workdir.root), "version": pair.version, "dataset_version": pair.dataset_version, "type": model.type}
    return EvalSpec(created=created, task=pair.dataset, task_version=pair.dataset_version or 0, dataset=dataset, model=f"evaltui/{pair.model}",
                    model_base_url=model.urls[0], config=EvalConfig(epochs=pair.epochs), metadata=about)


def _stats(model: str, found: list[dict[str, Any]], samples: list[EvalSample], created: str) -> EvalStats:
    from inspect_ai.log import EvalStats
    from inspect_ai.model import ModelUsage

    times = [(r["time"], r["time"] + r.get("took", 0)) for r in found if isinstance(r.get("time"), (int, float))]
    used = [s.model_usage[model] for s in samples if s.model_usage]
    usage = ModelUsage(input_tokens=sum(u.input_tokens for u in used), output_tokens=sum(u.output_tokens for u in used))
    usage.total_tokens = usage.input_tokens + usage.output_tokens
    return EvalStats(started_at=_iso(min(a for a, _ in times)) if times else created, completed_at=_iso(max(b for _, b in times)) if times else "",
                     model_usage={model: usage} if usage.total_tokens else {})


def _sample(r: dict[str, Any], model: str, scorer: str) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    answer = str(r.get("answer", ""))
    usage = r.get("usage") or {}
    tokens = ModelUsage(input_tokens=int(usage.get("prompt_tokens", 0)), output_tokens=int(usage.get("completion_tokens", 0)))
    tokens.total_tokens = tokens.input_tokens + tokens.output_tokens
    error = r.get("error")
    messages, opening = _messages(r, model)
    choices = [ChatCompletionChoice(message=ChatMessageAssistant(content=answer, model=model), stop_reason="stop")] if error is None else []
    said = None if error is None else str(error.get("message", ""))
    output = ModelOutput(model=model, choices=choices, usage=tokens if tokens.total_tokens else None, error=said)
    scores = {}
    if isinstance(r.get("correct"), bool):
        explanation = r.get("explanation") or r.get("result")
        scores[scorer] = Score(value="C" if r["correct"] else "I", answer=None if r.get("extracted") is None else str(r["extracted"]),
                               explanation=None if explanation is None else str(explanation))
    metadata = {k: r[k] for k in ("attempts", "tries", "ttft", "itl", "ppl", "scores") if r.get(k)}
    failed = EvalError(message=f"{error.get('type')}: {error.get('message', '')}", traceback="", traceback_ansi="") if error is not None else None
    return EvalSample(
        id=int(r["index"]), epoch=int(r.get("epoch", 0)) + 1, input=opening,
        target="" if r.get("gold") is None else str(r["gold"]), messages=messages, output=output, scores=scores or None, metadata=metadata,
        model_usage={model: tokens} if tokens.total_tokens else {}, total_time=r.get("took"), started_at=_iso(r.get("time")) or None, error=failed,
    )


def _messages(r: dict[str, Any], model: str) -> tuple[list[Any], list[Any]]:
    """The sample's messages and its input (what it opened with, before the model's first
    answer): a conversation's every message (the per-sample log's `messages`), else the
    system, the prompt and the answer (none when it failed)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    talk = r.get("messages")
    if isinstance(talk, list):
        said = [m for m in talk if isinstance(m, dict)]
        make = {"system": ChatMessageSystem, "user": ChatMessageUser}
        messages = [make[m["role"]](content=str(m.get("content", ""))) if m.get("role") in make
                    else ChatMessageAssistant(content=str(m.get("content", "")), model=model) for m in said]
        answered = [k for k, m in enumerate(said) if m.get("role") == "assistant" and ("took" in m or "earlier" in m)]
        first = answered[0] if answered else next((k for k, m in enumerate(said) if m.get("role") == "assistant"), len(said))
        return messages, messages[:first]
    sent: list[Any] = [ChatMessageSystem(content=r["system"])] if r.get("system") else []
    sent.append(ChatMessageUser(content=str(r.get("prompt", ""))))
    if r.get("error") is not None:
        return sent, list(sent)
    return [*sent, ChatMessageAssistant(content=str(r.get("answer", "")), model=model)], sent
