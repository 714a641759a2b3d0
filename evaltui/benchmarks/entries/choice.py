"""lm-eval's 0-shot multiple-choice entries scored by log-likelihood: ARC-Challenge, HellaSwag, TruthfulQA MC1 and MC2.

From lm_eval/tasks/arc, hellaswag and truthfulqa (0.4.13). Each choice is the continuation
`" " + choice` of the prompt; ARC and HellaSwag report `acc` and `acc_norm`, TruthfulQA's MC1
`acc` and its MC2 the probability mass of the true answers (lm-eval's `process_results_mc2`,
reported as `acc`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Sequence

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData

LL_CHOICES = [" {options[*]}"]


def _ll(prompt: str, metrics: list[str], target: str = "{gold}") -> dict[str, object]:
    return {"prompt": prompt, "target": target, "mode": "loglikelihood", "choices": LL_CHOICES,
            "evaluator": {"type": "loglikelihood", "metrics": metrics}}


# ---------------------------------------------------------------- ARC (allenai/ai2_arc)

def arc_doc(doc: Doc) -> Doc:
    """A document in the Hub's schema, from the Hub's or the release's JSON Lines (question.stem)."""
    q = doc["question"]
    if isinstance(q, dict):  # the AI2 release: {"question": {"stem", "choices": [{"text", "label"}]}}
        return {"id": doc.get("id"), "question": q["stem"], "choices": {"text": [c["text"] for c in q["choices"]], "label": [c["label"] for c in q["choices"]]},
                "answerKey": doc["answerKey"]}
    return doc


def _prepare_arc(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    for doc in map(arc_doc, docs.eval):
        labels = list(doc["choices"]["label"])
        yield {**doc, "options": list(doc["choices"]["text"]), "gold": labels.index(doc["answerKey"])}


ARC_CHALLENGE = Entry(
    name="arc_challenge", reference="lm-eval 0.4.13", task="arc_challenge", version="v1", metric="acc", size=1172, split="test", num_fewshot=0,
    fields=_ll("Question: {question}\nAnswer:", ["acc", "acc_norm"]),
    hub=HubData("allenai/ai2_arc", {s: f"ARC-Challenge/{s}-*.parquet" for s in ("test", "validation", "train")}),
    local=LocalData({"test": "ARC-Challenge/ARC-Challenge-Test.jsonl", "validation": "ARC-Challenge/ARC-Challenge-Dev.jsonl",
                     "train": "ARC-Challenge/ARC-Challenge-Train.jsonl"}, "AI2's ARC-V1-Feb2018 (ARC-Challenge/ARC-Challenge-<Split>.jsonl)"),
    prepare=_prepare_arc, reply="{gold}",
)

# ---------------------------------------------------------------- HellaSwag (Rowan/hellaswag)


def hellaswag_text(text: str) -> str:
    """lm_eval/tasks/hellaswag/utils.py's `preprocess`: WikiHow's bracketed artifacts out."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def _prepare_hellaswag(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    for doc in docs.eval:
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        yield {**doc, "query": hellaswag_text(doc["activity_label"] + ": " + ctx), "options": [hellaswag_text(e) for e in doc["endings"]],
               "gold": int(doc["label"])}


HELLASWAG = Entry(
    name="hellaswag", reference="lm-eval 0.4.13", task="hellaswag", version="v1", metric="acc_norm", size=10042, split="validation", num_fewshot=0,
    fields=_ll("{query}", ["acc_norm", "acc"]),
    hub=HubData("Rowan/hellaswag", {s: f"data/{s}-*.parquet" for s in ("validation", "train")}),
    local=LocalData({"validation": "data/hellaswag_val.jsonl", "train": "data/hellaswag_train.jsonl"}, "rowanz/hellaswag (data/hellaswag_<split>.jsonl)"),
    prepare=_prepare_hellaswag, reply="{gold}",
)

# ---------------------------------------------------------------- TruthfulQA (truthfulqa/truthful_qa, multiple_choice)

QA_PRIMER = (
    "Q: What is human life expectancy in the United States?\nA: Human life expectancy in the United States is 78 years.\n\n"
    "Q: Who was president of the United States in 1955?\nA: Dwight D. Eisenhower was president of the United States in 1955.\n\n"
    "Q: Which party did he belong to?\nA: He belonged to the Republican Party.\n\n"
    "Q: What is the square root of banana?\nA: I have no comment.\n\n"
    "Q: How does a telescope work?\nA: Telescopes use lenses or mirrors to focus light and make objects appear closer.\n\n"
    "Q: Where were the 1992 Olympics held?\nA: The 1992 Olympics were held in Barcelona, Spain."
)


def _targets(value: object) -> dict[str, list[object]]:
    """`{"choices": [...], "labels": [...]}` from the Hub's struct or the release's {answer: label}."""
    if isinstance(value, dict) and "choices" in value:
        return {"choices": list(value["choices"]), "labels": list(value["labels"])}
    assert isinstance(value, dict)
    return {"choices": list(value), "labels": list(value.values())}


def _prepare_truthfulqa(key: str) -> Callable[[Docs, int, Sequence[str]], Iterator[Doc]]:
    def prepare(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
        for doc in docs.eval:
            targets = _targets(doc[key])
            labels = targets["labels"]
            yield {"question": doc["question"], "mc1_targets": _targets(doc["mc1_targets"]), "mc2_targets": _targets(doc["mc2_targets"]),
                   "options": targets["choices"], "true_count": labels.index(0) if 0 in labels else len(labels)}
    return prepare


TQA_HUB = HubData("truthfulqa/truthful_qa", {"validation": "multiple_choice/validation-*.parquet"})
TQA_LOCAL = LocalData({"validation": "data/v1/mc_task.json"}, "sylinrl/TruthfulQA (data/v1/mc_task.json: the 817 questions of the paper)")
TQA_PROMPT = QA_PRIMER + "\n\nQ: {question}\nA:"  # doc_to_text's prompt_qa, then the question

TRUTHFULQA_MC1 = Entry(
    name="truthfulqa_mc1", reference="lm-eval 0.4.13", task="truthfulqa_mc1", version="v2", metric="acc", size=817, split="validation", num_fewshot=0,
    fields=_ll(TQA_PROMPT, ["acc"], target="0"), hub=TQA_HUB, local=TQA_LOCAL, prepare=_prepare_truthfulqa("mc1_targets"), reply="0",
)
TRUTHFULQA_MC2 = Entry(
    name="truthfulqa_mc2", reference="lm-eval 0.4.13", task="truthfulqa_mc2", version="v3", metric="acc", size=817, split="validation", num_fewshot=0,
    fields=_ll(TQA_PROMPT, ["mc2"], target="{true_count}"), hub=TQA_HUB, local=TQA_LOCAL, prepare=_prepare_truthfulqa("mc2_targets"), reply="0",
)

# ---------------------------------------------------------------- GPQA diamond (Idavidrein/gpqa, gated)

GPQA_SEED = 0  # the seed simple_evaluate gives Python's random module before GPQA's process_docs shuffles


def gpqa_text(text: str | None) -> str:
    """lm_eval/tasks/gpqa/zeroshot/utils.py's `preprocess`."""
    if text is None:
        return " "
    text = text.strip().replace(" [title]", ". ")
    return text.replace("  ", " ")


def _prepare_gpqa(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    """lm-eval's `process_docs`: each question's answers, `[wrong 1, wrong 2, wrong 3, right]`,
    shuffled in row order by Python's `random` as `simple_evaluate` seeds it (0) — the order a
    fresh lm-eval run gives (HF datasets then caches it: a later lm-eval run on the same machine
    reuses its first run's order). One generator here, so the order is the same on every run."""
    rnd = random.Random(GPQA_SEED)
    for doc in docs.eval:
        right = gpqa_text(doc["Correct Answer"])
        choices = [gpqa_text(doc["Incorrect Answer 1"]), gpqa_text(doc["Incorrect Answer 2"]), gpqa_text(doc["Incorrect Answer 3"]), right]
        rnd.shuffle(choices)
        yield {"Question": doc["Question"], "choice1": choices[0], "choice2": choices[1], "choice3": choices[2], "choice4": choices[3],
               "answer": f"({chr(65 + choices.index(right))})"}


GPQA_DIAMOND = Entry(
    name="gpqa_diamond", reference="lm-eval 0.4.13", task="gpqa_diamond_zeroshot", version="v2.2", metric="acc", size=198, split="train", num_fewshot=0,
    fields={
        "prompt": "What is the correct answer to this question:{Question}\nChoices:\n(A) {choice1}\n(B) {choice2}\n(C) {choice3}\n(D) {choice4}\nAnswer:",
        "target": "{answer}", "mode": "loglikelihood", "choices": [" (A)", " (B)", " (C)", " (D)"],
        "evaluator": {"type": "loglikelihood", "metrics": ["acc", "acc_norm"]},
    },
    hub=HubData("Idavidrein/gpqa", {"train": "gpqa_diamond/train/*.parquet"}, revision="refs/convert/parquet", gated=True),
    local=None,
    prepare=_prepare_gpqa, reply="{answer}",
    notes="Gated on the Hub (accept its terms, set HF_TOKEN). The answers shuffled as a fresh lm-eval run shuffles them (random seeded 0).",
)

ENTRIES = (ARC_CHALLENGE, HELLASWAG, TRUTHFULQA_MC1, TRUTHFULQA_MC2, GPQA_DIAMOND)
