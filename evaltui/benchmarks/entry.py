"""One benchmark of the catalog: which reference it reproduces, where its data live, and what it fills.

An entry is data, not code that runs: the plan's dataset table it fills (`fields`: prompt,
target, mode, choices, stop, max_tokens, temperature, evaluator), the files it reads (`data`:
the Hub's, or a local copy in the original release's layout) and how those files' documents
become records (`prepare`: the reference's own document processing and few-shot examples, added
to each record as fields the templates read). The engine then sends and scores a benchmark's
samples as it does any dataset's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Doc = dict[str, Any]


@dataclass(frozen=True)
class Docs:
    """The documents a benchmark dataset is made from: its evaluation split, and the split (or
    the fixed list) its few-shot examples come from; `parts` names each part of a grouped one."""

    eval: Sequence[Doc]
    fewshot: Mapping[str, Sequence[Doc]] = field(default_factory=dict)  # by part ("" for the whole)
    parts: Sequence[str] = ("",)  # a grouped benchmark's parts, in the reference's order


@dataclass(frozen=True)
class HubData:
    """Where the Hub keeps a benchmark's files: the dataset repo, and the files of each split
    (`{part}` stands for a grouped benchmark's part, e.g. MMLU's subject)."""

    repo: str
    files: Mapping[str, str]  # split → a glob of its files in the repo, e.g. "main/test-*.parquet"
    revision: str = "main"
    gated: bool = False


@dataclass(frozen=True)
class LocalData:
    """A local copy in the original release's layout: each split's file (or `{part}` files) under
    the folder `path` names, e.g. {"test": "test.jsonl", "train": "train.jsonl"}; a `path` that is
    a file is the evaluation split, its siblings the others."""

    files: Mapping[str, str]
    release: str  # the release the layout is, for messages: "openai/grade-school-math"
    columns: tuple[str, ...] = ()  # its CSV files have no header row: their columns, in order
    split_of: Callable[[Doc], str] | None = None  # one file holds every split: which one a document is in


@dataclass(frozen=True, eq=False)  # one object an entry: compared and hashed as itself
class Entry:
    """A catalog entry: `evaltui benchmarks` lists these."""

    name: str  # what a plan's `benchmark` says
    reference: str  # "lm-eval 0.4.13", "OpenCompass 0.5.4"
    task: str  # the reference's own name for it: "gsm8k_cot", "gsm8k_gen_1d7fe4"
    version: str  # the reference's version of the task: "v3"
    metric: str  # the headline metric, as the reference names it
    size: int  # records of the evaluation split (all parts)
    split: str  # the reference's evaluation split
    num_fewshot: int
    fields: Mapping[str, Any]  # the plan's dataset keys it fills
    hub: HubData
    local: LocalData | None  # None: Hub only (gated sets)
    prepare: Callable[[Docs, int, Sequence[str]], Iterator[Doc]]  # (docs, num_fewshot, parts) → records
    fewshot_split: str | None = None  # the split few-shot examples are drawn from (None: fixed examples, or none)
    fixed_examples: int = 0  # without a few-shot split: how many fixed examples it has (lm-eval's fewshot_config.samples)
    parts: Sequence[str] = ()  # a grouped benchmark's parts (MMLU's 57 subjects, BBH's 27 tasks)
    aggregate: str = "weighted"  # a grouped one's score: "weighted" by part size (the mean over samples), or "mean" of parts
    reply: str = "{target}"  # the simulator's right answer, a template over the record (evaltui/sim)
    notes: str = ""  # what a user should know (shown by `benchmarks show`)
    #: fewshot_as_multiturn's messages where the examples are written into the prompt rather than
    #: drawn into `{fewshot}` (OpenCompass's rounds, as its API models send them); () otherwise
    turns: tuple[Mapping[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The version column: `lm-eval gsm8k_cot v3`."""
        return f"{self.reference.split()[0]} {self.task} {self.version}"

    @property
    def grouped(self) -> bool:
        return bool(self.parts)
