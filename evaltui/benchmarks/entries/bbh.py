"""BIG-Bench Hard: lm-eval's `bbh_cot_fewshot` (27 tasks, the authors' 3-shot chain-of-thought prompts).

From lm_eval/tasks/bbh/cot_fewshot (0.4.13, group version 3, tasks 4.0): each task's
description, then its three fixed examples (`bbh_cot_fewshot.json` beside this module holds them
as lm-eval's task files carry them: in sports_understanding one differs from the authors' file by a
newline), each `Q: {input}\\nA: Let's think step by step.\\n{target}\\n\\n`, then the question; stops
`</s>`, `Q`, `\\n\\n`; 1024 tokens. Scored by `exact_match` after the `get-answer` filter (the text
after "the answer is", less its last character); the group is weighted by size.

A local copy is suzgunmirac/BIG-Bench-Hard's release (`bbh/<task>.json`); the Hub's `SaylorTwift/bbh`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData
from evaltui.benchmarks.lmeval import Sampler, with_fewshot

TASKS = (
    "boolean_expressions", "causal_judgement", "date_understanding", "disambiguation_qa", "dyck_languages", "formal_fallacies",
    "geometric_shapes", "hyperbaton", "logical_deduction_five_objects", "logical_deduction_seven_objects", "logical_deduction_three_objects",
    "movie_recommendation", "multistep_arithmetic_two", "navigate", "object_counting", "penguins_in_a_table",
    "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection", "snarks", "sports_understanding",
    "temporal_sequences", "tracking_shuffled_objects_five_objects", "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects", "web_of_lies", "word_sorting",
)
QUESTION = "Q: {input}\nA: Let's think step by step.\n"


@cache
def prompts() -> dict[str, Any]:
    """Each task's description and its three examples."""
    data: dict[str, Any] = json.loads((Path(__file__).with_name("bbh_cot_fewshot.json")).read_text(encoding="utf-8"))["tasks"]
    return data


def _prepare(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    for part in parts:
        task = prompts()[part]
        mine = [{"input": d["input"], "target": d["target"]} for d in docs.eval if d.get("subset", "") == part]
        shots = Sampler(task["samples"], "first_n")
        for record in with_fewshot(mine, shots, n, lambda d: (QUESTION.format(input=d["input"]), d["target"]), target_delimiter=""):
            yield {**record, "subset": part, "description": task["description"]}


BBH_COT_FEWSHOT = Entry(
    name="bbh_cot_fewshot",
    reference="lm-eval 0.4.13",
    task="bbh_cot_fewshot",
    version="v3",
    metric="exact_match,get-answer",
    size=6511,
    split="test",
    num_fewshot=3,
    fixed_examples=3,
    fields={
        "prompt": "{fewshot}" + QUESTION,
        "system": "{description}",
        "system_join": "",
        "target": "{target}",
        "stop": ["</s>", "Q", "\n\n"],
        "max_tokens": 1024,
        "temperature": 0.0,
        "evaluator": {"type": "exact_match", "filters": [{"name": "get-answer", "pattern": "(?<=the answer is )(.*)(?=.)"}]},
    },
    hub=HubData("SaylorTwift/bbh", {"test": "{part}/test-*.parquet"}),
    local=LocalData({"test": "bbh/{part}.json"}, "suzgunmirac/BIG-Bench-Hard (bbh/<task>.json)"),
    prepare=_prepare,
    parts=TASKS,
    reply="So the answer is {target}.",
)

ENTRIES = (BBH_COT_FEWSHOT,)
