"""lm-evaluation-harness's way of building a prompt, as version 0.4.13 does it (lm_eval/api).

A task's context is its description, then `num_fewshot` examples — each the example's question
(`doc_to_text`), the target delimiter, its answer (`doc_to_target`) and the few-shot delimiter —
then the document's own question (`ConfigurableTask.fewshot_context`, `build_qa_turn`). The
examples come from a sampler: `first_n` takes the first n of the few-shot docs; the default one
draws them with `random.Random(1234)` (the fewshot seed `simple_evaluate` sets), one draw per
document in the order the documents are built — so document i's examples depend on i, and the
same records come out whatever `limit` a run uses. When the few-shot docs are the evaluation
split itself it draws n + 1 and drops the document being asked.

Here the context is split in two record fields the templates read: `description` (a chat model's
system message, as lm-eval's `multiturn_to_singleturn` sends it) and `fewshot` (the examples,
each with its delimiters), so the entry's prompt template is `{fewshot}` + its `doc_to_text`.
Each example is also kept in two fields, `fewshot_q<i>` and `fewshot_a<i>` (its question and
answer, no delimiters): the user and assistant turns of `fewshot_as_multiturn` (fill.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

Doc = dict[str, Any]
Render = Callable[[Doc], tuple[str, str]]  # a few-shot doc → (its question, its answer)

FEWSHOT_SEED = 1234  # lm_eval.evaluator.simple_evaluate's fewshot_random_seed default


class Sampler:
    """lm-eval's `ContextSampler` (`default`) or `FirstNSampler` (`first_n`) over `pool`."""

    def __init__(self, pool: Sequence[Doc], kind: str = "default", seed: int = FEWSHOT_SEED):
        self.pool = list(pool)
        self.kind = kind
        self.rnd = random.Random(seed)

    def sample(self, n: int, eval_doc: Doc | None = None) -> list[Doc]:
        """The n examples of the next document (`eval_doc`: the document, when the few-shot docs
        are its own split and it must not be its own example)."""
        if n <= 0:
            return []
        if self.kind == "first_n":
            pool = [d for d in self.pool if d != eval_doc] if eval_doc is not None else self.pool
            if n > len(pool):
                raise ValueError(f"{n} few-shot examples asked for, {len(pool)} available")
            return pool[:n]
        if eval_doc is None:
            return self.rnd.sample(self.pool, n)
        res = [d for d in self.rnd.sample(self.pool, n + 1) if d != eval_doc][:n]
        if len(res) < n:  # the pool holds copies of eval_doc: draw again without any of them
            res = self.rnd.sample([d for d in self.pool if d != eval_doc], n)
        return res


def qa_text(question: str, answer: str, target_delimiter: str = " ", fewshot_delimiter: str = "\n\n") -> str:
    """One example as plain text: `build_qa_turn`'s user and assistant turns, delimited."""
    return question + target_delimiter + answer + fewshot_delimiter


def with_fewshot(
    docs: Sequence[Doc],
    sampler: Sampler | None,
    n: int,
    render: Render,
    *,
    same_split: bool = False,
    target_delimiter: str = " ",
    fewshot_delimiter: str = "\n\n",
    extra: Callable[[Doc], Doc] | None = None,
) -> Iterator[Doc]:
    """Each document with its `fewshot` field (and the fields `extra` adds), in order.

    Every document makes its draw, so document i gets the examples lm-eval gives it."""
    for doc in docs:
        shots = sampler.sample(n, doc if same_split else None) if sampler is not None and n > 0 else []
        text = "".join(qa_text(*render(s), target_delimiter, fewshot_delimiter) for s in shots)
        record = dict(doc)
        if extra is not None:
            record.update(extra(doc))
        record["fewshot"] = text
        for i, shot in enumerate(shots):
            record[f"fewshot_q{i}"], record[f"fewshot_a{i}"] = render(shot)
        yield record
