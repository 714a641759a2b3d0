"""MMLU: lm-eval's `mmlu` (the log-likelihood of " A" … " D", 5-shot from dev) and `mmlu_generative`.

From lm_eval/tasks/mmlu/default and generative (0.4.13): 57 subjects, each with its description
("The following are multiple choice questions (with answers) about <subject>.") and the first
five dev questions of its own subject as examples (sampler first_n); the group's score is
weighted by size (`weight_by_size: True` at both levels), i.e. the mean over all questions.
lm-eval's `--limit` applies per subject; a plan's `limit` to the first records of all of them
(`subsets` chooses subjects).

A local copy is hendrycks/test's release: `data/{dev,val,test}/<subject>_<split>.csv`, no header,
`question, A, B, C, D, answer letter`; the Hub's is `cais/mmlu` (a config per subject).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData
from evaltui.benchmarks.lmeval import Sampler, with_fewshot

SUBJECTS = (
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge", "college_biology", "college_chemistry",
    "college_computer_science", "college_mathematics", "college_medicine", "college_physics", "computer_security", "conceptual_physics",
    "econometrics", "electrical_engineering", "elementary_mathematics", "formal_logic", "global_facts", "high_school_biology",
    "high_school_chemistry", "high_school_computer_science", "high_school_european_history", "high_school_geography",
    "high_school_government_and_politics", "high_school_macroeconomics", "high_school_mathematics", "high_school_microeconomics",
    "high_school_physics", "high_school_psychology", "high_school_statistics", "high_school_us_history", "high_school_world_history",
    "human_aging", "human_sexuality", "international_law", "jurisprudence", "logical_fallacies", "machine_learning", "management",
    "marketing", "medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition", "philosophy", "prehistory",
    "professional_accounting", "professional_law", "professional_medicine", "professional_psychology", "public_relations",
    "security_studies", "sociology", "us_foreign_policy", "virology", "world_religions",
)
LETTERS = "ABCD"
HUB = HubData("cais/mmlu", {s: f"{{part}}/{s}-*.parquet" for s in ("test", "validation", "dev")})
LOCAL = LocalData(
    {"test": "data/test/{part}_test.csv", "validation": "data/val/{part}_val.csv", "dev": "data/dev/{part}_dev.csv"},
    "hendrycks/test (data/{dev,val,test}/<subject>_<split>.csv)",
    columns=("question", "A", "B", "C", "D", "answer"),
)
PROMPT = "{fewshot}{question}\nA. {choices[0]}\nB. {choices[1]}\nC. {choices[2]}\nD. {choices[3]}\nAnswer:"


def as_hub(doc: Doc, subject: str) -> Doc:
    """A document in cais/mmlu's schema (question, subject, choices, answer index), from either copy."""
    if "choices" in doc:
        return {"question": doc["question"], "subject": doc.get("subject", subject), "choices": list(doc["choices"]), "answer": int(doc["answer"])}
    return {"question": doc["question"], "subject": subject, "choices": [doc[c] for c in LETTERS], "answer": LETTERS.index(doc["answer"].strip())}


def _doc_to_text(doc: Doc) -> str:
    c = doc["choices"]
    return f"{doc['question'].strip()}\nA. {c[0]}\nB. {c[1]}\nC. {c[2]}\nD. {c[3]}\nAnswer:"


def _prepare(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    for part in parts:
        mine = [as_hub(d, part) for d in docs.eval if d.get("subset", "") == part]
        pool = [as_hub(d, part) for d in docs.fewshot.get(part, ())]
        description = f"The following are multiple choice questions (with answers) about {part.replace('_', ' ')}.\n\n"
        for record in with_fewshot(mine, Sampler(pool, "first_n"), n, lambda d: (_doc_to_text(d), LETTERS[d["answer"]])):
            record["question"] = record["question"].strip()  # doc_to_text's question.strip()
            yield {**record, "subset": part, "description": description, "letter": LETTERS[record["answer"]]}


COMMON = dict(reference="lm-eval 0.4.13", size=14042, split="test", fewshot_split="dev", hub=HUB, local=LOCAL, prepare=_prepare, parts=SUBJECTS)

MMLU = Entry(
    name="mmlu",
    task="mmlu",
    version="v2",
    metric="acc",
    num_fewshot=5,
    fields={
        "prompt": PROMPT,
        "system": "{description}",
        "system_join": "",
        "target": "{answer}",
        "mode": "loglikelihood",
        "choices": [" A", " B", " C", " D"],
        "evaluator": {"type": "loglikelihood", "metrics": ["acc"]},
    },
    reply="{answer}",
    notes="lm-eval runs it 5-shot (`--num_fewshot 5`, as its MMLU results are quoted); the task's own default is 0.",
    **COMMON,  # type: ignore[arg-type]
)

MMLU_GENERATIVE = Entry(
    name="mmlu_generative",
    task="mmlu_generative",
    version="v3",
    metric="exact_match,get_response",
    num_fewshot=0,
    fields={
        "prompt": PROMPT,
        "system": "{description}",
        "system_join": "",
        "target": "{letter}",
        "stop": ["</s>", "\n"],
        "max_tokens": 256,
        "temperature": 0.0,
        "evaluator": {
            "type": "exact_match",
            "filters": [{"name": "get_response", "steps": [
                {"function": "regex", "pattern": "^(.*?)(?=\\n|$)"}, {"function": "remove_whitespace"}, {"function": "regex", "pattern": "^(.*?)\\s*$"},
            ]}],
            "ignore_case": True,
            "ignore_punctuation": True,
        },
    },
    reply="{letter}",
    **COMMON,  # type: ignore[arg-type]
)

ENTRIES = (MMLU, MMLU_GENERATIVE)
