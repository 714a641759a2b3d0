"""GSM8K: lm-eval's `gsm8k` (5-shot from train) and `gsm8k_cot` (8 fixed chain-of-thought examples).

From lm_eval/tasks/gsm8k/gsm8k.yaml and gsm8k-cot.yaml (0.4.13, metadata version 3.0): the
prompts, the stop sequences (`until`), greedy decoding, and the two filters each reports
`exact_match` after — `strict-match` (the answer in the format the examples teach) and
`flexible-extract` (the last number) — with the same `regexes_to_ignore`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData
from evaltui.benchmarks.lmeval import Sampler, with_fewshot

HUB = HubData("openai/gsm8k", {"test": "main/test-*.parquet", "train": "main/train-*.parquet"})
LOCAL = LocalData({"test": "test.jsonl", "train": "train.jsonl"}, "openai/grade-school-math (grade_school_math/data/)")
SIZE = 1319

# generation_kwargs' max_gen_toks is unset in both tasks: lm-eval's API models default to 256.
MAX_GEN_TOKS = 256
IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]
FLEXIBLE = {"name": "flexible-extract", "pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)", "group_select": -1}


def _evaluator(strict: str) -> dict[str, Any]:
    return {
        "type": "exact_match",
        "filters": [{"name": "strict-match", "pattern": strict}, FLEXIBLE],
        "ignore_case": True,
        "ignore_punctuation": False,
        "regexes_to_ignore": IGNORE,
    }


def _prepare_gsm8k(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    sampler = Sampler(docs.fewshot.get("", ()))
    return with_fewshot(docs.eval, sampler, n, lambda d: (f"Question: {d['question']}\nAnswer:", d["answer"]))


GSM8K = Entry(
    name="gsm8k",
    reference="lm-eval 0.4.13",
    task="gsm8k",
    version="v3",
    metric="exact_match,strict-match",
    size=SIZE,
    split="test",
    num_fewshot=5,
    fewshot_split="train",
    fields={
        "prompt": "{fewshot}Question: {question}\nAnswer:",
        "target": "{answer}",
        "stop": ["Question:", "</s>", "<|im_end|>"],
        "max_tokens": MAX_GEN_TOKS,
        "temperature": 0.0,
        "evaluator": _evaluator("#### (\\-?[0-9\\.\\,]+)"),
    },
    hub=HUB,
    local=LOCAL,
    prepare=_prepare_gsm8k,
    reply="{answer}",
)

# gsm8k-cot.yaml's fewshot_config.samples, in order (sampler first_n).
COT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. "
     "How many trees did the grove workers plant today?",
     "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6. The answer is 6."),
    ("If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
     "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5."),
    ("Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
     "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39."),
    ("Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
     "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. The answer is 8."),
    ("Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
     "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. The answer is 9."),
    ("There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. "
     "How many computers are now in the server room?",
     "There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29. "
     "The answer is 29."),
    ("Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
     "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls. "
     "The answer is 33."),
    ("Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
     "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8."),
)


def cot_target(answer: str) -> str:
    """`doc_to_target`: `answer.split('####')[-1].strip()`, the final number of the solution."""
    return answer.split("####")[-1].strip()


def _prepare_cot(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    pool = [{"question": q, "target": t} for q, t in COT_EXAMPLES]
    return with_fewshot(
        docs.eval, Sampler(pool, "first_n"), n, lambda d: (f"Q: {d['question']}\nA:", d["target"]),
        extra=lambda d: {"target": cot_target(d["answer"])},
    )


GSM8K_COT = Entry(
    name="gsm8k_cot",
    reference="lm-eval 0.4.13",
    task="gsm8k_cot",
    version="v3",
    metric="exact_match,strict-match",
    size=SIZE,
    split="test",
    num_fewshot=8,
    fixed_examples=len(COT_EXAMPLES),
    fields={
        "prompt": "{fewshot}Q: {question}\nA:",
        "target": "{target}",
        "stop": ["Q:", "</s>", "<|im_end|>"],
        "max_tokens": MAX_GEN_TOKS,
        "temperature": 0.0,
        "evaluator": _evaluator("The answer is (\\-?[0-9\\.\\,]+)."),
    },
    hub=HUB,
    local=LOCAL,
    prepare=_prepare_cot,
    reply="The answer is {target}.",
    notes="8 fixed examples (gsm8k-cot.yaml's fewshot_config); num_fewshot takes the first n of them.",
)

ENTRIES = (GSM8K, GSM8K_COT)
