"""Evaluators that need more than a reply and its gold: a judge model's grade, or your own function.

What they share with every other evaluator is the `ScoredJudge` the scorer calls per answer;
what they need besides is made by the engine (the judge's verdicts, already on disk; the user's
function, loaded) and handed in. For a judged dataset this module also says what the judge is
asked (`requests`) and what a verdict is of (`judged_text`), so the engine that asks and the
scorer that reads the verdicts agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from evaltui.conversation import turns_of
from evaltui.plan import DatasetConfig
from evaltui.plan.judges import JUDGED, Key, answer_hash
from evaltui.scoring.judgement import ScoredJudge, Verdict
from evaltui.scoring.judges.arena_hard import ArenaHard
from evaltui.scoring.judges.graded import Grading
from evaltui.scoring.judges.mtbench import SCALE, MtBench, judge_prompts, read_references
from evaltui.scoring.judges.pairwise import TIE, Pairwise
from evaltui.scoring.judges.python import load_function, python_judge
from evaltui.scoring.think import strip_reasoning

__all__ = [
    "JUDGED", "ArenaHard", "Grader",
    "Grading", "Key", "MtBench", "Pairwise", "Request", "answer_hash", "grader_of", "grading_fingerprint", "judged_text", "load_function",
    "python_judge", "requests", "verdicts_judge",
]

Grader = Grading | MtBench | Pairwise


class Request(NamedTuple):
    """One request to the judge: its turn, system prompt and prompt; or why it cannot be asked."""

    turn: int
    system: str = ""
    prompt: str = ""
    error: str = ""


def grader_of(
    ds: DatasetConfig, baseline: Mapping[int, Sequence[str | None]] | None = None, itself: bool = False, digest: str | None = None, label: str | None = None
) -> Grader:
    """The dataset's grading: FastChat's for mt_bench and pairwise (`baseline`: the baseline's
    answers by sample; `itself`: the baseline model's own pair; `digest`: the baseline file's
    sha-256; `label`: what a sample's error calls it), ArenaHard's for pairwise with scale = "arena_hard"; else Inspect's (or the template file's)."""
    ev = ds.evaluator
    if ev.type == "pairwise":
        kind = ArenaHard if ev.scale == "arena_hard" else Pairwise
        return kind(label or ev.baseline or Path(ev.baseline_file or "").name, baseline or {}, itself, digest)
    if ev.type == "mt_bench":
        return MtBench(read_references(ev.references))
    template = None
    if ev.template is not None:
        with open(ev.template, encoding="utf-8") as f:
            template = f.read(1 << 20)
    return Grading(ev.type, template, ev.instructions, ev.grade_pattern, ev.partial_credit)


def grading_fingerprint(grader: Grader) -> dict[str, Any]:
    """What of the grading a verdict depends on (the engine adds the judge model's settings)."""
    if isinstance(grader, Pairwise):  # a baseline file by its content (a changed file re-judges), a model by its abbr
        return {"prompt": grader.prompt, **({"baseline": grader.baseline} if grader.digest is None else {"baseline_file": grader.digest})}
    if isinstance(grader, MtBench):
        refs = hashlib.sha256(json.dumps(grader.references, sort_keys=True, default=str).encode()).hexdigest()
        return {"prompts": judge_prompts(), "references": refs}
    return {"template": grader.template, "instructions": grader.instructions, "pattern": grader.pattern.pattern, "offered": grader.offered}


def _turn_answers(entry: Mapping[str, Any], epoch: int, tags: Sequence[str]) -> tuple[list[str], list[str]]:
    turns = [t for t in turns_of(dict(entry), epoch) if t.kind == "turn"]
    return [t.prompt for t in turns], [strip_reasoning(t.answer, tags) for t in turns]


def judged_text(grader: Grader, entry: Mapping[str, Any], epoch: int, answer: str, tags: Sequence[str]) -> str:
    """What a verdict on this unit is of (its hash is kept with it): the answer, or every answer of the conversation."""
    if isinstance(grader, MtBench):
        return "\0".join(_turn_answers(entry, epoch, tags)[1])
    if isinstance(grader, Pairwise):  # a verdict is on both answers
        return f"{answer}\0{grader.baseline_answer(_index(entry), epoch) or ''}"
    return answer


def _index(entry: Mapping[str, Any]) -> int:
    index = entry.get("index", -1)
    return index if isinstance(index, int) else -1


def requests(grader: Grader, entry: Mapping[str, Any], epoch: int, answer: str, record: Mapping[str, Any] | None, tags: Sequence[str]) -> list[Request]:
    """What the judge is asked about one (sample, epoch)."""
    if isinstance(grader, MtBench):
        questions, answers = _turn_answers(entry, epoch, tags)
        return _as_requests(grader.requests(record or {}, questions, answers))
    if isinstance(grader, Pairwise):
        return _as_requests(grader.requests(str(entry.get("origin_prompt") or ""), answer, _index(entry), epoch))
    return [Request(0, "", grader.prompt(str(entry.get("origin_prompt") or ""), answer, str(entry.get("gold") or ""), record))]


def _as_requests(asked: Sequence[tuple[int, str, str] | tuple[int, str]]) -> list[Request]:
    return [Request(turn, *rest) if len(rest) == 2 else Request(turn, error=rest[0]) for turn, *rest in asked]


def verdicts_judge(grader: Grader, verdicts: Mapping[Key, Mapping[str, Any]], tags: Sequence[str]) -> ScoredJudge:
    """The scorer's judge for a judged dataset: each unit's verdicts as the judge gave them, on
    this very answer; a unit the judge failed (or never got to) fails, with class `judge`."""
    turns = (0,) if isinstance(grader, Grading) else (0, 1)

    def judge(prediction: str, gold: str, sample: dict[str, Any]) -> Verdict:
        index, epoch = sample.get("index", -1), sample.get("epoch", 0)
        if isinstance(grader, Pairwise) and grader.itself:
            return Verdict("tie", False, {"win_rate": TIE}, {"explanation": "the baseline's own answers: ties"})
        text = answer_hash(judged_text(grader, sample, epoch, prediction, tags))
        found = [verdicts.get((index, epoch, t)) for t in turns]
        given = [v for v in found if v is not None and v.get("answer") == text and "grade" in v]
        if len(given) < len(turns):
            return _failed(grader, [v for v in found if v is not None and v.get("answer") == text])
        return _verdict(grader, given)

    return judge


def _failed(grader: Grader, found: list[Mapping[str, Any]]) -> Verdict:
    failed = next((v for v in found if "error" in v), None)
    why = str(failed["error"]) if failed is not None else "not judged (the judge was not reached)"
    extra = {"error": "judge", "why": why, **({"explanation": failed["reply"]} if failed and failed.get("reply") else {})}
    zero = {"accuracy": 0.0}
    if isinstance(grader, MtBench):
        zero = {"score": 0.0, "turn_1": 0.0, "turn_2": 0.0}
    elif isinstance(grader, Pairwise):
        zero = {"win_rate": 0.0}
    return Verdict(None, False, zero, extra)


def _verdict(grader: Grader, given: list[Mapping[str, Any]]) -> Verdict:
    if isinstance(grader, MtBench):
        r1, r2 = (float(v["value"]) for v in given)
        mean = (r1 + r2) / 2
        reasoning = f"turn 1: {given[0].get('reply', '')}\n\nturn 2: {given[1].get('reply', '')}"
        scores = {"score": mean / SCALE, "turn_1": r1 / SCALE, "turn_2": r2 / SCALE}
        return Verdict(f"{r1:g}, {r2:g}", mean >= 5, scores, {"ratings": [r1, r2], "explanation": reasoning})
    if isinstance(grader, Pairwise):
        value = (float(given[0]["value"]) + float(given[1]["value"])) / 2
        reasoning = f"the model as A: {given[0].get('reply', '')}\n\nthe model as B: {given[1].get('reply', '')}"
        return Verdict(f"{given[0]['grade']} {given[1]['grade']}", value > TIE, {"win_rate": value}, {"explanation": reasoning})
    value = float(given[0].get("value", 0.0))
    return Verdict(str(given[0]["grade"]), value >= 1.0, {"accuracy": value}, {"explanation": str(given[0].get("reply", ""))})
