"""A dataset's `[datasets.evaluator]` table: how its replies are judged, and the filters lm-eval's exact_match reads with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from evaltui.plan.strict import DAY, Strict, without_later

#: Every evaluator `type` a dataset may name: the one list (scoring judges each; tests/test_epochs.py checks it does).
EVALUATORS = (
    "exact", "includes", "regex", "gsm8k", "math", "choice", "ppl", "code_exec", "exact_match", "loglikelihood", "opencompass", "ifeval", "tool_call_match",
    "model_graded_qa", "model_graded_fact", "python", "mt_bench", "pairwise",
)
#: How a sample's epochs become one score (scoring/reducers.py reduces by each).
REDUCERS = ("mean", "max", "median", "mode", "at_least_k", "pass_at_k")

# Literals made from the lists, so a typo is "must be one of …" with every name.
if TYPE_CHECKING:
    EvaluatorType = str
    Reducer = str
else:
    EvaluatorType = Literal[EVALUATORS]
    Reducer = Literal[REDUCERS]


@dataclass(frozen=True, slots=True)
class Epochs:
    """How a dataset's samples are repeated and their verdicts made one score: what travels
    together from the plan (`Plan.epochs`) to the scorer, the summary, the follower and the
    fingerprints, rather than a count here and a reducer there."""

    count: int  # times each sample is sent: the dataset's own `epochs`, else [run] epochs
    reducer: str = "mean"  # one of REDUCERS
    ks: tuple[int, ...] = ()  # at_least_k's k, pass_at_k's (several)

    @property
    def trivial(self) -> bool:
        """Once, by mean: nothing is reduced (a result says neither epochs nor reducer)."""
        return self.count == 1 and self.reducer == "mean"


LATER_EVALUATOR_KEYS: dict[str, Any] = {
    "reducer": "mean", "k": None, "filters": None, "ignore_case": False, "ignore_punctuation": False, "regexes_to_ignore": None,
    "metrics": None, "target_delimiter": " ", "aggregate": "samples", "program": None, "completion": "cleaned", "extract": "answer",
    "postprocess": None, "judge": None, "template": None, "instructions": None, "grade_pattern": None, "partial_credit": False, "function": None,
    "references": None, "baseline": None, "baseline_file": None, "scale": None,
}


class FilterStep(Strict):
    """One step of an lm-eval filter pipeline."""

    function: Literal["regex", "remove_whitespace", "lowercase", "uppercase"]
    pattern: str | None = None  # regex: the pattern
    group_select: int = 0  # regex: which match findall gives (-1: the last)
    fallback: str = "[invalid]"  # regex: what is kept when nothing matches


class FilterConfig(Strict):
    """One of lm-eval's filter pipelines, then `take_first`: a `regex` filter (`pattern`), or
    the `steps` of a longer one."""

    name: str
    pattern: str | None = None
    group_select: int = 0  # which match findall gives (-1: the last)
    fallback: str = "[invalid]"  # what is kept when nothing matches
    steps: list[FilterStep] | None = None

    @model_validator(mode="after")
    def _one_pipeline(self) -> FilterConfig:
        if (self.pattern is None) == (self.steps is None):
            raise ValueError("give a filter either `pattern` (one regex) or `steps` (a pipeline), not both or neither")
        return self

    def pipeline(self) -> list[FilterStep]:
        if self.steps is not None:
            return self.steps
        return [FilterStep(function="regex", pattern=self.pattern, group_select=self.group_select, fallback=self.fallback)]


class EvaluatorConfig(Strict):
    type: EvaluatorType
    pattern: str | None = None
    timeout: float = Field(10.0, gt=0, le=DAY)
    memory_mb: int = Field(1024, ge=16, le=1 << 20)
    reducer: Reducer = "mean"
    k: int | list[int] | None = None  # at_least_k: one k; pass_at_k: one or several
    # exact_match (lm-eval's): a metric per filter, the texts compared after regexes_to_ignore
    filters: list[FilterConfig] | None = None
    ignore_case: bool = False
    ignore_punctuation: bool = False
    regexes_to_ignore: list[str] | None = None
    # loglikelihood (lm-eval's multiple choice): acc (the highest sum of the continuation's log-probs),
    # acc_norm (that over the choice's length in characters, less target_delimiter), mc2 (TruthfulQA)
    metrics: list[Literal["acc", "acc_norm", "mc2"]] | None = None
    target_delimiter: str = " "
    # a grouped benchmark's score: the mean over its samples (each part weighted by its size), or of its parts
    aggregate: Literal["samples", "parts"] = "samples"
    # code_exec: the program run, a template over the record with {completion} (None: the HumanEval
    # prompt, the completion and the record's test); the completion as evaltui cleans it (unfenced,
    # re-indented), as the model wrote it ("raw", lm-eval's), or OpenCompass's humaneval_postprocess_v2
    program: str | None = None
    completion: Literal["cleaned", "raw", "first_fence_lstrip"] = "cleaned"
    # math: the answer found where evaltui reads it ("answer"), or math-verify's own reading of the whole
    # reply against the whole reference (lm-eval's minerva_math math_verify: "whole")
    extract: Literal["answer", "whole"] = "answer"
    # opencompass: OpenCompass's post-processing and evaluator (gsm8k's; match_answer_pattern's with `pattern`)
    postprocess: Literal["gsm8k", "answer_pattern"] | None = None
    # model_graded_qa / model_graded_fact: the judge model (its abbr; a model of role = "judge"), and
    # Inspect AI's grading keys: a template file of your own, its instructions, the grade's pattern, P as 0.5
    judge: str | None = None
    template: str | None = None
    instructions: str | None = None
    grade_pattern: str | None = None
    partial_credit: bool = False
    # python: 'package.module:function', or a name registered under the entry points `evaltui.evaluators`
    function: str | None = None
    # mt_bench: FastChat's reference answers (reference_answer/gpt-4.jsonl) for math, reasoning and coding
    references: str | None = None
    # pairwise: the tested model whose answers each answer is judged against (FastChat's pair-v2, both orders)
    baseline: str | None = None
    # pairwise: or the baseline as a file of its answers (plan/baseline.py: .jsonl rows, or evaltui's predictions .json)
    baseline_file: str | None = None
    # pairwise: FastChat's pair-v2 verdicts [[A]]/[[B]]/[[C]] (None, "pair_v2") or ArenaHard's [[A>>B]] scale
    scale: Literal["pair_v2", "arena_hard"] | None = None

    @field_validator("template", "references", "baseline_file")
    @classmethod
    def _template_from_plan_dir(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A relative template is relative to the plan's folder (as dataset paths are)."""
        base = (info.context or {}).get("base_dir")
        if v is None or base is None:
            return v
        p = Path(v).expanduser()
        return str(p if p.is_absolute() else Path(base) / p)

    @field_validator("grade_pattern")
    @classmethod
    def _one_group(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                groups = re.compile(v).groups
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
            if groups < 1:
                raise ValueError("has no group: its first group is the grade (e.g. 'GRADE: ([CPI])')")
        return v

    @field_validator("k", mode="before")
    @classmethod
    def _k_shape(cls, v: Any) -> Any:
        """One positive integer, or (pass_at_k) a list of distinct ones; how k fits the epochs is in checks."""
        if v is None:
            return v
        values = v if isinstance(v, list) else [v]
        if not values or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in values):
            raise ValueError(f"must be an integer ≥ 1 or a list of them (got {v!r})")
        if len(set(values)) != len(values):
            raise ValueError(f"lists the same k twice (got {v!r})")
        return v

    def versioned_dump(self) -> dict[str, Any]:
        return without_later(self.model_dump(mode="json"), LATER_EVALUATOR_KEYS)

    def ks(self) -> tuple[int, ...]:
        """k as a tuple (empty when not given)."""
        return () if self.k is None else tuple(self.k) if isinstance(self.k, list) else (self.k,)
