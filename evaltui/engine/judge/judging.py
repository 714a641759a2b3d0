"""Judge models at work: each answered (sample, epoch) of a judged dataset graded by its judge.

A judge is a model of the plan (`role = "judge"`) behind the same backend as any other: its own
`max_workers` (one limiter for every dataset it grades), pacing, retries and replicas. Before a
judged pair is scored, the units without a verdict of this judging are sent to the judge, at
most `max_workers` at once, and each verdict is appended to the pair's verdicts file as it comes
back (engine/judge/verdicts.py): a kill -9 loses only those in flight, a re-run asks only for the
rest. A judge that fails a unit (down, timed out, no grade after its retries) fails that unit —
a sample error of class `judge` in the result — never the pair.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from evaltui.backends import Backend, BackendError, make_backend, make_client
from evaltui.datasets import load_records
from evaltui.engine.disk.predictions import iter_predictions
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.judge.verdicts import VerdictWriter, judged, read_verdicts
from evaltui.engine.stream import events as ev
from evaltui.plan import DatasetConfig, ModelConfig, Plan
from evaltui.plan.baseline import BaselineFileError, read_baseline_file
from evaltui.plan.judges import JUDGED, answer_hash

if TYPE_CHECKING:  # scoring is imported in the scorer's threads, off the start-up path
    from evaltui.scoring.judgement import ScoredJudge
    from evaltui.scoring.judges import Grader

REPLY_KEPT = 4000  # characters of a judge's reply kept with its verdict (the reasoning the details show)


def judging_fingerprint(plan: Plan, ds: DatasetConfig, grader: Grader) -> str:
    """What a verdict depends on besides the answer: the judge model and its settings, and the
    grading (template, instructions, pattern; mt_bench's prompts and references). A change re-judges."""
    from evaltui.scoring.judges import grading_fingerprint

    judge = plan.model(ds.evaluator.judge or "")
    data = {"type": ds.evaluator.type, "judge": [judge.type, judge.model, judge.generation_kwargs], **grading_fingerprint(grader)}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def grader_for(plan: Plan, workdir: WorkDir, model: str, ds: DatasetConfig) -> Grader:
    """The dataset's grader; for pairwise, with the baseline's answers: read from the baseline
    model's predictions, or from the baseline file."""
    from evaltui.scoring.judges import grader_of
    from evaltui.scoring.score import epoch_answers
    from evaltui.scoring.think import stripped_entries

    baseline = ds.evaluator.baseline
    if ds.evaluator.type == "pairwise" and ds.evaluator.baseline_file is not None:
        return _file_grader(plan, ds, ds.evaluator.baseline_file)
    if ds.evaluator.type != "pairwise" or baseline is None or baseline == model:
        return grader_of(ds, itself=baseline == model)
    answers: dict[int, list[str | None]] = {}
    for entry in stripped_entries(iter_predictions(workdir.predictions_file(baseline, ds.abbr)), plan.model(baseline).reasoning_tags):
        if isinstance(entry.get("index"), int):
            answers[entry["index"]] = [None if error is not None else answer for answer, error in epoch_answers(entry)]
    return grader_of(ds, answers)


def _file_grader(plan: Plan, ds: DatasetConfig, path: str) -> Grader:
    """Pairwise against a file of the baseline's answers (thinking cut out, as a model's is); a
    file that became unusable since the plan was checked leaves every sample without a baseline
    answer (each unit fails, saying why), not the run."""
    from evaltui.scoring.judges import grader_of
    from evaltui.scoring.think import strip_reasoning

    try:
        found = read_baseline_file(path)
    except BaselineFileError as e:
        return grader_of(ds, {}, digest="unusable", label=f"{Path(path).name} ({e})")
    answers = found.for_records(load_records(plan, ds) if found.by != "index" else None)
    stripped = {i: [None if a is None else strip_reasoning(a) for a in epochs] for i, epochs in answers.items()}
    return grader_of(ds, stripped, digest=found.digest)


def scoring_judge(plan: Plan, workdir: WorkDir, model: str, ds: DatasetConfig) -> ScoredJudge | None:
    """In the scorer's thread: what judges a python or judged dataset's answers (None for the others)."""
    from evaltui.scoring.judges import load_function, python_judge, verdicts_judge

    if ds.evaluator.type == "python":
        return python_judge(load_function(ds.evaluator.function or ""), load_records(plan, ds))
    if ds.evaluator.type in JUDGED:
        grader = grader_for(plan, workdir, model, ds)
        verdicts = read_verdicts(workdir.verdicts_file(model, ds.abbr), judging_fingerprint(plan, ds, grader))
        return verdicts_judge(grader, verdicts, plan.model(model).reasoning_tags)
    return None


class Unit(NamedTuple):
    """One request to the judge: its unit and turn, what it is of (the hash kept), what it asks."""

    sample: int
    epoch: int
    turn: int
    answer: str  # the hash of what the verdict is of
    system: str
    prompt: str
    error: str = ""  # why it cannot be asked (no request is sent)


def units_to_judge(plan: Plan, model: str, ds: DatasetConfig, grader: Grader, predictions: Path, verdicts: Path) -> list[Unit]:
    """The requests of the pair's answered units that have no verdict of this judging yet."""
    from evaltui.scoring.judges import judged_text, requests
    from evaltui.scoring.score import epoch_answers
    from evaltui.scoring.think import stripped_entries

    done = read_verdicts(verdicts, judging_fingerprint(plan, ds, grader))
    tags = plan.model(model).reasoning_tags
    # a template of your own may name the record's fields; mt_bench reads its category and question_id
    records = load_records(plan, ds) if ds.evaluator.template is not None or ds.evaluator.type == "mt_bench" else None
    todo = []
    for entry in stripped_entries(iter_predictions(predictions), tags):
        index = entry.get("index")
        if not isinstance(index, int):
            continue
        record = records[index] if records is not None and 0 <= index < len(records) else None
        for epoch, (answer, error) in enumerate(epoch_answers(entry)):
            if error is not None:
                continue
            of = answer_hash(judged_text(grader, entry, epoch, answer, tags))
            for r in requests(grader, entry, epoch, answer, record, tags):
                if not judged(done.get((index, epoch, r.turn)), of):
                    todo.append(Unit(index, epoch, r.turn, of, r.system, r.prompt, r.error))
    return todo


class Judges:
    """One session's judge models: each one's backend (made when it first has work) and the
    limiter every dataset it grades shares."""

    def __init__(self, plan: Plan, urls: Callable[[], Mapping[str, list[str]]], emit: ev.Sink) -> None:
        self.plan = plan
        self._urls = urls
        self.emit = emit
        self._made: dict[str, tuple[Backend, anyio.CapacityLimiter]] = {}
        self._lock = anyio.Lock()
        self.stack: AsyncExitStack | None = None  # the session's, while it runs

    async def _of(self, cfg: ModelConfig) -> tuple[Backend, anyio.CapacityLimiter]:
        async with self._lock:
            found = self._made.get(cfg.abbr)
            if found is None:
                assert self.stack is not None, "judges work inside a running session"
                urls = list(self._urls().get(cfg.abbr) or cfg.urls)
                client = await self.stack.enter_async_context(make_client(cfg, urls))
                found = self._made[cfg.abbr] = (make_backend(cfg, client, urls=urls), anyio.CapacityLimiter(cfg.max_workers))
            return found

    async def judge_pair(self, workdir: WorkDir, model: str, dataset: str) -> None:
        """Grade every answered unit of the pair that has no verdict of this judging yet."""
        ds = self.plan.dataset(dataset)
        if ds.evaluator.type not in JUDGED:
            return
        grader = await anyio.to_thread.run_sync(grader_for, self.plan, workdir, model, ds)
        path = workdir.verdicts_file(model, dataset)
        todo = await anyio.to_thread.run_sync(units_to_judge, self.plan, model, ds, grader, workdir.predictions_file(model, dataset), path)
        if not todo:
            return
        cfg = self.plan.model(ds.evaluator.judge or "")
        backend, limiter = await self._of(cfg)
        fingerprint = judging_fingerprint(self.plan, ds, grader)
        self.emit(ev.Notice(f"{model}/{dataset}: {len(todo)} answers sent to the judge {cfg.abbr}"))
        writer = await anyio.to_thread.run_sync(VerdictWriter, path)
        work, failed = iter(todo), [0]

        async def worker() -> None:
            for unit in work:
                if unit.error:
                    line: dict[str, Any] = {"error": unit.error}
                else:
                    async with limiter:
                        line = await _judge_one(backend, cfg, grader, unit)
                failed[0] += "grade" not in line
                writer.write({"index": unit.sample, "epoch": unit.epoch, "turn": unit.turn, "fingerprint": fingerprint, "answer": unit.answer, **line})

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(cfg.max_workers, len(todo))):
                    tg.start_soon(worker)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(writer.close)
        if failed[0]:
            said = f"{model}/{dataset}: the judge {cfg.abbr} gave no grade for {failed[0]} of {len(todo)} answers (errors of class judge)"
            self.emit(ev.Notice(said, "warning"))


async def _judge_one(backend: Backend, cfg: ModelConfig, grader: Grader, unit: Unit) -> dict[str, Any]:
    """One verdict: the grade, its value and the judge's reply; or why there is none."""
    reply = ""
    for attempt in range(cfg.retry + 1):  # a reply without a grade is asked again, as a failed request is
        try:
            reply = await backend.generate(unit.prompt, unit.system, epoch=attempt)
        except BackendError as e:
            return {"error": f"{e.kind}: {e}"[:500]}
        grade = grader.grade(reply)
        if grade is not None:
            return {"grade": grade, "value": grader.value(grade, unit.turn), "reply": reply[:REPLY_KEPT]}
    return {"error": "no grade in the judge's reply", "reply": reply[:REPLY_KEPT]}
