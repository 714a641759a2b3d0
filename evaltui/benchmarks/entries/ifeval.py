"""IFEval: lm-eval's `ifeval` (v4.0): the prompt as is, scored by Google's instruction checkers.

From lm_eval/tasks/ifeval (0.4.13): no stop sequences, 1280 tokens, temperature 0; the reply
is judged by each of the prompt's instructions, strict and loose (evaltui/scoring/ifeval). The
record's instructions (the prompt, `instruction_id_list`, `kwargs`) are its target, as one JSON
text: what the reply is judged against.

A local copy is google-research's `instruction_following_eval/data/input_data.jsonl`; the Hub's
`google/IFEval`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData


def _prepare(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    for doc in docs.eval:
        checks = {"prompt": doc["prompt"], "instruction_id_list": list(doc["instruction_id_list"]), "kwargs": list(doc["kwargs"])}
        yield {**doc, "checks": json.dumps(checks, ensure_ascii=False)}


IFEVAL = Entry(
    name="ifeval", reference="lm-eval 0.4.13", task="ifeval", version="v4", metric="prompt_level_strict_acc", size=541, split="train", num_fewshot=0,
    fields={
        "prompt": "{prompt}",
        "target": "{checks}",
        "stop": [],
        "max_tokens": 1280,
        "temperature": 0.0,
        "evaluator": {"type": "ifeval"},
    },
    hub=HubData("google/IFEval", {"train": "ifeval_input_data.jsonl"}),
    local=LocalData({"train": "data/input_data.jsonl"}, "google-research's instruction_following_eval (data/input_data.jsonl)"),
    prepare=_prepare, reply="{prompt}",
    notes="Also reported: inst_level_strict_acc (over every instruction), prompt_level_loose_acc, inst_level_loose_acc.",
)

ENTRIES = (IFEVAL,)
