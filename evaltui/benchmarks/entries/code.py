"""Code: lm-eval's `humaneval` and `mbpp` (pass@1; pass@k with epochs), OpenCompass's `humaneval_gen`.

From lm_eval/tasks/humaneval and mbpp (0.4.13, v1.0) and OpenCompass's
`deprecated_humaneval_gen_a82cae` (the LightLLM guide's): what is sent, and the program each runs
— in evaltui's sandbox (README, "Evaluators"), with the references' 3 s timeout.

- humaneval: the problem's `prompt` as is; stops `\nclass`, `\ndef`, `\n#`, `\nif`, `\nprint`; 1024
  tokens; the program is prompt + reply (as written: a fenced reply fails) + the tests.
- mbpp: 3 fixed examples (tasks 2, 3, 4), "You are an expert Python programmer, and here is your
  task: … [BEGIN]\n"; stop `[DONE]`; 256 tokens; the program is the reply + the three asserts.
- humaneval_gen: the prompt alone, the model's own generation settings (LightLLM's /generate is
  sent no stop, and the model's max_new_tokens); the completion is OpenCompass's
  `humaneval_postprocess_v2` (the first fenced block, then lstrip) after the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData
from evaltui.benchmarks.lmeval import Sampler, with_fewshot

HUMANEVAL_HUB = HubData("openai/openai_humaneval", {"test": "openai_humaneval/test-*.parquet"})
HUMANEVAL_LOCAL = LocalData({"test": "data/HumanEval.jsonl.gz"}, "openai/human-eval (data/HumanEval.jsonl.gz)")
HUMANEVAL_TESTS = "{prompt}{completion}\n{test}\ncheck({entry_point})"  # what HF code_eval and human_eval both run


def _code_exec(program: str, completion: str) -> dict[str, Any]:
    return {"type": "code_exec", "program": program, "completion": completion, "timeout": 3.0}


def _prepare_humaneval(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    return iter(docs.eval)


HUMANEVAL = Entry(
    name="humaneval", reference="lm-eval 0.4.13", task="humaneval", version="v1", metric="pass@1", size=164, split="test", num_fewshot=0,
    fields={
        "prompt": "{prompt}",
        "target": "{test}\ncheck({entry_point})",
        "stop": ["\nclass", "\ndef", "\n#", "\nif", "\nprint"],
        "max_tokens": 1024,
        "temperature": 0.0,
        "evaluator": _code_exec(HUMANEVAL_TESTS, "raw"),
    },
    hub=HUMANEVAL_HUB, local=HUMANEVAL_LOCAL, prepare=_prepare_humaneval, reply="{canonical_solution}",
    notes="pass@k: set epochs and evaluator = { reducer = \"pass_at_k\", k = [1, 10] } (and a temperature above 0).",
)

HUMANEVAL_GEN = Entry(
    name="humaneval_gen", reference="OpenCompass 0.5.4", task="deprecated_humaneval_gen_a82cae", version="a82cae", metric="pass@1", size=164,
    split="test", num_fewshot=0,
    fields={"prompt": "{prompt}", "target": "{task_id}", "evaluator": _code_exec(HUMANEVAL_TESTS, "first_fence_lstrip")},
    hub=HUMANEVAL_HUB, local=HUMANEVAL_LOCAL, prepare=_prepare_humaneval, reply="```python\n{prompt}{canonical_solution}```",
    notes="As OpenCompass's LightllmAPI sends it: no stop sequences, the model's generation_kwargs (its OpenAI model would send "
    "max_tokens 512 and temperature 0.7: set max_tokens and temperature to send the same).",
)

# mbpp's fewshot_config samples (lm_eval/tasks/mbpp/utils.py: list_fewshot_samples): text, code, tests
MBPP_SHOTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        'Write a function to find the similar elements from the given two tuple lists.',
        "\r\n".join((
            'def similar_elements(test_tup1, test_tup2):',
            '  res = tuple(set(test_tup1) & set(test_tup2))',
            '  return (res) ',
        )),
        (
            'assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)',
            'assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)',
            'assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)',
        ),
    ),
    (
        'Write a python function to identify non-prime numbers.',
        "\r\n".join((
            'import math',
            'def is_not_prime(n):',
            '    result = False',
            '    for i in range(2,int(math.sqrt(n)) + 1):',
            '        if n % i == 0:',
            '            result = True',
            '    return result',
        )),
        (
            'assert is_not_prime(2) == False',
            'assert is_not_prime(10) == True',
            'assert is_not_prime(35) == True',
        ),
    ),
    (
        'Write a function to find the largest integers from a given list of numbers using heap queue algorithm.',
        "\r\n".join((
            'import heapq as hq',
            'def heap_queue_largest(nums,n):',
            '  largest_nums = hq.nlargest(n, nums)',
            '  return largest_nums',
        )),
        (
            'assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65] ',
            'assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],2)==[85, 75] ',
            'assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],5)==[85, 75, 65, 58, 35]',
        ),
    ),
)
MBPP_QUESTION = "You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:\n\n{tests}\n[BEGIN]\n"


def _mbpp_split(doc: Doc) -> str:
    """The release's one file holds every split, by task id (lm-eval reads the Hub's `full` test split: 11–510)."""
    task = int(doc["task_id"])
    return "prompt" if task <= 10 else "test" if task <= 510 else "validation" if task <= 600 else "train"


def _prepare_mbpp(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    pool = [{"text": text, "code": code, "tests": "\n".join(tests)} for text, code, tests in MBPP_SHOTS]

    def example(d: Doc) -> tuple[str, str]:
        return MBPP_QUESTION.format(text=d["text"], tests=d["tests"]), d["code"] + "\n[DONE]"

    mine = [{**d, "tests": "\n".join(d["test_list"][:3])} for d in docs.eval]
    return with_fewshot(mine, Sampler(pool, "first_n"), n, example, target_delimiter="")


MBPP = Entry(
    name="mbpp", reference="lm-eval 0.4.13", task="mbpp", version="v1", metric="pass@1", size=500, split="test", num_fewshot=3,
    fixed_examples=len(MBPP_SHOTS),
    fields={
        "prompt": "{fewshot}" + MBPP_QUESTION,
        "target": "{tests}",
        "stop": ["[DONE]"],
        "max_tokens": 256,
        "temperature": 0.0,
        "evaluator": _code_exec("{completion}\n{tests}", "raw"),
    },
    hub=HubData("google-research-datasets/mbpp", {s: f"full/{s}-*.parquet" for s in ("test", "train", "validation", "prompt")}),
    local=LocalData({s: "mbpp.jsonl" for s in ("test", "train", "validation", "prompt")}, "google-research/mbpp (mbpp.jsonl)", split_of=_mbpp_split),
    prepare=_prepare_mbpp, reply="{code}",
)

ENTRIES = (HUMANEVAL, MBPP, HUMANEVAL_GEN)
