"""Judge models at work: each answered (sample, epoch) of a judged dataset graded by its judge.

A judge is a model of the plan (`role = "judge"`) behind the same backend as any other: its own
`max_workers` (one limiter for every dataset it grades), pacing, retries and replicas. A judged
pair's units go to the judge as they are answered: the pool hands each checkpoint line, once on
disk, to the pair's feed (engine/judge/feed.py), which a task of the session drains into the
judge while inference goes on. When the pair's inference has ended, before it is scored, that
feed is drained and the units still without a verdict of this judging — those the full queue
did not take, those answered in earlier runs, a pairwise unit whose baseline answer was not in
yet — are sent. Each verdict is appended to the pair's verdicts file as it comes back
(engine/judge/verdicts.py): a kill -9 loses only those in flight, a re-run asks only for the
rest, and no unit is asked twice in one run. A judge that fails a unit (down, timed out, no
grade after its retries) fails that unit — a sample error of class `judge` in the result —
never the pair.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from anyio.abc import TaskGroup

from evaltui.backends import Backend, BackendError, make_backend, make_client
from evaltui.datasets import load_records
from evaltui.engine.disk.predictions import iter_predictions
from evaltui.engine.disk.workdir import WorkDir
from evaltui.engine.judge.feed import Asked, PairFeed
from evaltui.engine.judge.progress import Reports, Tally
from evaltui.engine.judge.verdicts import VerdictWriter, judged, read_verdicts
from evaltui.engine.stream import events as ev
from evaltui.engine.stream.events import Pair
from evaltui.plan import DatasetConfig, ModelConfig, Plan
from evaltui.plan.baseline import BaselineFileError, read_baseline_file
from evaltui.plan.judges import JUDGED, Key, answer_hash

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

    def key(self) -> tuple[int, int, int, str]:
        return self.sample, self.epoch, self.turn, self.answer


def entry_units(grader: Grader, entry: dict[str, Any], epoch: int, answer: str, record: Mapping[str, Any] | None, tags: Sequence[str]) -> list[Unit]:
    """What the judge is asked about one answered (sample, epoch) of a predictions entry."""
    from evaltui.scoring.judges import judged_text, requests

    index = entry["index"]
    of = answer_hash(judged_text(grader, entry, epoch, answer, tags))
    return [Unit(index, epoch, r.turn, of, r.system, r.prompt, r.error) for r in requests(grader, entry, epoch, answer, record, tags)]


def line_units(grader: Grader, line: dict[str, Any], tags: Sequence[str], records: list[dict[str, Any]] | None) -> list[Unit]:
    """The same from the unit's checkpoint line, which is a predictions entry of one epoch but
    for a conversation's turns (kept under `turns` whatever the epoch)."""
    from evaltui.scoring.score import epoch_answers
    from evaltui.scoring.think import stripped_entries

    index, epoch = line.get("index"), line.get("epoch", 0)
    if not isinstance(index, int) or not isinstance(epoch, int) or epoch < 0 or line.get("error") is not None:
        return []
    entry = next(stripped_entries([line], tags))
    if epoch and "turns" in entry:
        entry = {**entry, "epoch_turns": [[] for _ in range(epoch)] + [entry["turns"]]}
    record = records[index] if records is not None and 0 <= index < len(records) else None
    return entry_units(grader, entry, epoch, epoch_answers(entry)[0][0], record, tags)


def _records(plan: Plan, ds: DatasetConfig) -> list[dict[str, Any]] | None:
    """The records a grading prompt reads: a template of your own may name their fields; mt_bench reads its category and question_id."""
    return load_records(plan, ds) if ds.evaluator.template is not None or ds.evaluator.type == "mt_bench" else None


def units_to_judge(plan: Plan, model: str, ds: DatasetConfig, grader: Grader, predictions: Path, verdicts: Path) -> tuple[list[Unit], int]:
    """The requests of the pair's answered units that have no verdict of this judging yet, and
    how many its answered units make in all (the judged/answered the screens show)."""
    from evaltui.scoring.score import epoch_answers
    from evaltui.scoring.think import stripped_entries

    done = read_verdicts(verdicts, judging_fingerprint(plan, ds, grader))
    tags = plan.model(model).reasoning_tags
    records = _records(plan, ds)
    todo, asked = [], 0
    for entry in stripped_entries(iter_predictions(predictions), tags):
        index = entry.get("index")
        if not isinstance(index, int):
            continue
        record = records[index] if records is not None and 0 <= index < len(records) else None
        for epoch, (answer, error) in enumerate(epoch_answers(entry)):
            if error is not None:
                continue
            units = entry_units(grader, entry, epoch, answer, record, tags)
            asked += len(units)
            todo += [u for u in units if not judged(done.get((index, epoch, u.turn)), u.answer)]
    return todo, asked


class Judging(NamedTuple):
    """What a pair's judging while it is inferred holds, read once as it begins."""

    grader: Grader
    fingerprint: str
    records: list[dict[str, Any]] | None
    given: dict[Key, str]  # the units with a verdict of this judging: the hash of the answer it is of
    complete: bool  # False: a pairwise grader made before the baseline's answers were in


def live_judging(plan: Plan, workdir: WorkDir, model: str, ds: DatasetConfig) -> Judging:
    """In a worker thread: the pair's grader (pairwise: with the baseline's answers when they are
    in), its fingerprint, its records and the verdicts already given."""
    from evaltui.scoring.judges import grader_of

    baseline = ds.evaluator.baseline
    complete = ds.evaluator.type != "pairwise" or baseline is None or workdir.predictions_file(baseline, ds.abbr).exists()
    grader = grader_for(plan, workdir, model, ds) if complete else grader_of(ds)
    fingerprint = judging_fingerprint(plan, ds, grader)
    given = {key: str(v.get("answer")) for key, v in read_verdicts(workdir.verdicts_file(model, ds.abbr), fingerprint).items() if "grade" in v}
    return Judging(grader, fingerprint, _records(plan, ds), given, complete)


class Judges:
    """One session's judge models: each one's backend (made when it first has work), the limiter
    every dataset it grades shares, and the judged pairs' feeds while they are inferred."""

    def __init__(self, plan: Plan, workdir: WorkDir, urls: Callable[[], Mapping[str, list[str]]], emit: ev.Sink) -> None:
        self.plan = plan
        self.workdir = workdir
        self._urls = urls
        self.emit = emit
        self._made: dict[str, tuple[Backend, anyio.CapacityLimiter]] = {}
        self._lock = anyio.Lock()
        self._feeds: dict[Pair, PairFeed] = {}
        self.reports = Reports(emit)  # how far each pair's judging is, said on the stream
        self.stack: AsyncExitStack | None = None  # the session's, while it runs
        self.tasks: TaskGroup | None = None  # the session's, while it takes work: where feeds are drained

    async def _of(self, cfg: ModelConfig) -> tuple[Backend, anyio.CapacityLimiter]:
        async with self._lock:
            found = self._made.get(cfg.abbr)
            if found is None:
                assert self.stack is not None, "judges work inside a running session"
                urls = list(self._urls().get(cfg.abbr) or cfg.urls)
                client = await self.stack.enter_async_context(make_client(cfg, urls))
                found = self._made[cfg.abbr] = (make_backend(cfg, client, urls=urls), anyio.CapacityLimiter(cfg.max_workers))
            return found

    # ------------------------------------------------------------------ while the pair is inferred
    def answered(self, model: str, dataset: str, line: dict[str, Any]) -> None:
        """A unit's answer is checkpointed (the pool, at once): queue it for its judge, if its dataset has one."""
        ds = self.plan.dataset(dataset)
        if self.tasks is None or ds.evaluator.type not in JUDGED or ds.evaluator.baseline == model:  # the baseline's own: ties, no judge
            return
        feed = self._feeds.get((model, dataset))
        tally = self.reports.tally(model, dataset, ds.evaluator.judge or "")
        if feed is None or feed.closed:
            feed = self._feeds[(model, dataset)] = PairFeed(feed)
            tally.judged = tally.answered = tally.failed = 0  # counted from its answers as they come; again from the files at the end
            self.tasks.start_soon(self._drain, model, ds, feed)
        if line.get("error") is None:  # the verdicts it needs: one, or mt_bench's two turns, pairwise's two orders
            tally.answered += 2 if ds.evaluator.type in ("mt_bench", "pairwise") else 1
        feed.put(line)

    def close_feeds(self) -> None:
        """The session's inference has ended: every drain ends once its queue is judged (a pair
        that did not end done is never scored, so nothing else would close its feed)."""
        for feed in self._feeds.values():
            feed.close()

    async def _drain(self, model: str, ds: DatasetConfig, feed: PairFeed) -> None:
        try:
            if feed.after is not None:
                await feed.after.done.wait()
            await self._judge_fed(model, ds, feed)
        except Exception as e:  # e.g. an unreadable template: the judging at the end meets it again, and fails the pair saying why
            said = f"{model}/{ds.abbr}: judging stopped while answers came in ({type(e).__name__}: {e}); what is left is judged at the end"
            self.emit(ev.Notice(said, "warning"))
        finally:
            feed.receive.close()  # lines not judged now are judged at the end
            feed.done.set()

    async def _judge_fed(self, model: str, ds: DatasetConfig, feed: PairFeed) -> None:
        """Judge the pair's units as they are queued, at most the judge's max_workers at once
        (over every dataset it grades), until the feed is closed and drained."""
        judging = await anyio.to_thread.run_sync(live_judging, self.plan, self.workdir, model, ds)
        cfg = self.plan.model(ds.evaluator.judge or "")
        backend, limiter = await self._of(cfg)
        tags = self.plan.model(model).reasoning_tags
        self.emit(ev.Notice(f"{model}/{ds.abbr}: answers go to the judge {cfg.abbr} as they come"))
        writer = await anyio.to_thread.run_sync(VerdictWriter, self.workdir.verdicts_file(model, ds.abbr))
        slots = anyio.Semaphore(cfg.max_workers)  # this drain's requests out or waiting for the judge's limiter
        tally = self.reports.tally(model, ds.abbr, cfg.abbr)

        async def ask(unit: Unit, judging: Judging) -> None:
            try:
                async with limiter:
                    line = await _judge_one(backend, cfg, judging.grader, unit)
            finally:
                slots.release()
            writer.write(_verdict_line(unit, judging.fingerprint, line))
            self.reports.verdict(tally, "grade" in line)
            if "grade" not in line:
                feed.asked.failed.add(unit.key())

        try:
            async with self.reports.reporting(tally, cfg, backend), anyio.create_task_group() as tg:
                async for answered in feed.receive:
                    if not judging.complete and self.workdir.predictions_file(ds.evaluator.baseline or "", ds.abbr).exists():
                        judging = await anyio.to_thread.run_sync(live_judging, self.plan, self.workdir, model, ds)  # the baseline's answers are in
                    for unit in line_units(judging.grader, answered, tags, judging.records):
                        if judging.given.get((unit.sample, unit.epoch, unit.turn)) == unit.answer:
                            tally.judged += 1
                            continue
                        if unit.error:
                            continue  # cannot be asked yet (a baseline answer not in): asked at the end, or said why there
                        await slots.acquire()  # waits here, with the queue filling, never in the pool
                        feed.asked.count += 1
                        tg.start_soon(ask, unit, judging)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(writer.close)

    # ------------------------------------------------------------------ once the pair is inferred
    async def _drained(self, pair: Pair) -> Asked:
        """Close the pair's feed and wait until what it queued is judged; what it asked."""
        feed = self._feeds.get(pair)
        if feed is None:
            return Asked()
        feed.close()
        await feed.done.wait()
        if self._feeds.get(pair) is feed:
            del self._feeds[pair]
        return feed.asked

    async def judge_pair(self, workdir: WorkDir, model: str, dataset: str) -> None:
        """Grade every answered unit of the pair that has no verdict of this judging yet (those
        judged while it was inferred have theirs; those that failed then are not asked again)."""
        ds = self.plan.dataset(dataset)
        if ds.evaluator.type not in JUDGED:
            return
        asked = await self._drained((model, dataset))
        grader = await anyio.to_thread.run_sync(grader_for, self.plan, workdir, model, ds)
        path = workdir.verdicts_file(model, dataset)
        todo, needed = await anyio.to_thread.run_sync(units_to_judge, self.plan, model, ds, grader, workdir.predictions_file(model, dataset), path)
        cfg = self.plan.model(ds.evaluator.judge or "")
        tally = self.reports.tally(model, dataset, cfg.abbr)
        tally.judged, tally.answered, tally.failed = needed - len(todo), needed, len(asked.failed)  # counted again from the files
        todo = [unit for unit in todo if unit.key() not in asked.failed]
        failed = [len(asked.failed)]
        if todo:
            failed[0] += await self._judge_units(cfg, grader, judging_fingerprint(self.plan, ds, grader), path, todo, tally)
        if needed:
            self.reports.say(tally, cfg, None, ended=True)
        if failed[0]:
            said = f"{model}/{dataset}: the judge {cfg.abbr} gave no grade for {failed[0]} of {asked.count + len(todo)} answers (errors of class judge)"
            self.emit(ev.Notice(said, "warning"))

    async def _judge_units(self, cfg: ModelConfig, grader: Grader, fingerprint: str, path: Path, todo: list[Unit], tally: Tally) -> int:
        """Ask the judge about `todo`, at most its max_workers at once; how many it gave no grade for."""
        backend, limiter = await self._of(cfg)
        self.emit(ev.Notice(f"{tally.model}/{tally.dataset}: {len(todo)} answers sent to the judge {cfg.abbr}"))
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
                writer.write(_verdict_line(unit, fingerprint, line))
                self.reports.verdict(tally, "grade" in line)

        try:
            async with self.reports.reporting(tally, cfg, backend), anyio.create_task_group() as tg:
                for _ in range(min(cfg.max_workers, len(todo))):
                    tg.start_soon(worker)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(writer.close)
        return failed[0]


def _verdict_line(unit: Unit, fingerprint: str, line: dict[str, Any]) -> dict[str, Any]:
    return {"index": unit.sample, "epoch": unit.epoch, "turn": unit.turn, "fingerprint": fingerprint, "answer": unit.answer, **line}


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
