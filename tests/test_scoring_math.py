"""The `math` evaluator: math-verify in a worker process, with evaltui's reading of where the answer is."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATASETS, requires_shared
from planmaker import chat, of_type, run_plan, write_plan

from evaltui.datasets import load_records, render_sample
from evaltui.engine.stream import events as ev
from evaltui.plan import load_plan
from evaltui.scoring import score
from evaltui.scoring.readers.mathcheck import PROCESS_SECONDS, MathChecker, MathVerifyMissing, answer_region, reference_region
from evaltui.sim import AnswerKey, ModelProfile, SimConfig, answers_correctly, wrong_answer

MATH500 = SHARED_DATASETS / "math500" / "test.jsonl"
# Where the simulator's wrong answer (the last number plus one) changes only what math-verify does
# not compare: a base's subscript (52_8 → 52_9) or a unit's exponent (15\mbox{ cm}^2 → ^3).
NOT_COMPARED_RE = re.compile(r"_\{?\d+\}?$|\\mbox\{[^}]*\}\^\d$")


class Ev:
    type = "math"


@pytest.fixture(scope="module")
def checker():
    with MathChecker() as c:
        yield c


@pytest.mark.parametrize(
    "reply, region",
    [
        ("The answer is $\\frac{1}{2}$.", "answer is $\\frac{1}{2}$."),
        # the last mark wins: a later phrase over an earlier box, a later box over an earlier phrase
        ("\\boxed{16}. Wait, the answer is $18$.", "answer is $18$."),
        ("The answer is 16. Wait, so \\boxed{18}", "\\boxed{18}"),
        ("So \\boxed{16}. Wait, I made an error: \\boxed{18}", "\\boxed{18}"),
        # boxes joined by "and", "or", a comma are one answer
        ("The roots are \\boxed{2} and \\boxed{3}.", "\\boxed{2} and \\boxed{3}."),
        ("x = \\boxed{2} or x = \\boxed{3}", "\\boxed{2} or x = \\boxed{3}"),
        ("so #### 18\nThen 3 more", "\\boxed{18}\nThen 3 more"),
        # an invented next question is cut off
        ("The answer is 8.\n\nQuestion: what is 5 + 6? The answer is 11.", "answer is 8.\n\n"),
        # LaTeX alone, no delimiters: read whole
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}"),
        ("I don't know.", "I don't know."),
    ],
)
def test_answer_region(reply, region):
    assert answer_region(reply) == region


@pytest.mark.parametrize(
    "gold, region",
    [("\\frac{\\pi}{2}", "\\boxed{\\frac{\\pi}{2}}"), ("so it is $\\boxed{5}$.", "so it is $\\boxed{5}$."), ("18 + 2 = 20\n#### 20", "\\boxed{20}"), ("$x^2$", "$x^2$")],
)
def test_reference_region(gold, region):
    assert reference_region(gold) == region


@pytest.mark.parametrize(
    "reply, gold, extracted, correct",
    [
        ("The answer is $\\frac{1}{2}$.", "\\frac12", "\\frac{1}{2}", True),
        ("The answer is $0.5$.", "\\frac{1}{2}", None, True),
        ("So the point is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.", "\\left( 3, \\frac{\\pi}{2} \\right)", "( 3, \\frac{\\pi}{2} )", True),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left( 3, \\frac{\\pi}{2} \\right)", "( 3, \\frac{\\pi}{2} )", True),
        ("The answer is $\\left( 3, \\frac{\\pi}{3} \\right)$.", "\\left( 3, \\frac{\\pi}{2} \\right)", None, False),
        ("So \\boxed{16}. Wait, I made an error: \\boxed{18}", "18", "18", True),
        ("\\boxed{16}. Wait, the answer is $18$.", "18", "18", True),
        ("The roots are \\boxed{3} and \\boxed{2}.", "2, 3", "3,2", True),
        ("The answer is 3 + 6 = 9.", "9", "9", True),
        ("$\\boxed{16}$.", "16", "16", True),  # lm-eval's flexible filter reads "$." here
        ("\\boxed{2{,}125}", "2125", None, True),
        ("\\boxed{\\dfrac{36}{2}}", "18", "\\frac{36}{2}", True),
        ("The interval is $x \\in [2, 5)$.", "[2,5)", None, True),
        ("$\\boxed{10\\sqrt{2}}$", "\\sqrt{200}", "10\\sqrt{2}", True),
        ("The answer is 8.\n\nQuestion: what is 5 + 6?\nThe answer is 11.", "8", "8", True),
        ("I don't know.", "5", None, False),
    ],
)
def test_math_verify_reads_as_a_careful_person(checker, reply, gold, extracted, correct):
    verdict = checker.judge(reply, gold)
    assert verdict.correct is correct
    if extracted is not None:
        assert verdict.extracted == extracted


def test_an_answer_sympy_cannot_finish_is_wrong_and_the_next_sample_is_still_judged():
    """9^(9^(9^9)) keeps sympy inside one C call: math-verify's alarm ends the comparison after
    its 5 s, or (here, with a 2 s bound) evaltui kills the worker and starts another."""
    with MathChecker(timeout=2.0) as checker:
        assert checker.judge("\\boxed{9^{9^{9^{9}}}}", "5") == ("(timed out)", False)
        checker.timeout = PROCESS_SECONDS  # the new worker's first sample, on a loaded machine
        assert checker.judge("\\boxed{5}", "5") == ("5", True)


def test_a_missing_math_verify_is_said_in_one_line(monkeypatch, tmp_path):
    """A worker that cannot import math-verify (here a PYTHONPATH entry shadowing it with a broken
    module) makes scoring fail with what to install, not a traceback from the worker."""
    (tmp_path / "math_verify.py").write_text("raise ImportError('No module named math_verify')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with MathChecker() as checker, pytest.raises(MathVerifyMissing, match="needs the math-verify package.*pip install math-verify"):
        checker.judge("1", "1")


def test_score_with_the_math_evaluator():
    predictions = [
        {"index": 0, "prediction": "so $\\boxed{\\frac{\\sqrt{3}}{2}}$", "gold": "\\frac{\\sqrt3}{2}"},
        {"index": 1, "prediction": "The answer is $\\{1, 2\\}$", "gold": "\\{2,1\\}"},
        {"index": 2, "prediction": "The answer is 7", "gold": "8"},
        {"index": 3, "prediction": "", "gold": "8", "error": {"type": "timeout"}},
    ]
    result = score(Ev(), predictions)
    assert result["accuracy"] == 50.0
    assert [d["correct"] for d in result["details"]] == [True, True, False, False]


def test_plans_that_do_not_score_math_never_import_sympy():
    """math-verify and sympy (~0.5 s to import) live in the worker only: not in evaltui's process,
    whether or not a dataset uses `math`."""
    code = (
        "import sys, evaltui.scoring as s\n"
        "class E:\n    type = 'gsm8k'\n"
        "s.score(E(), [{'prediction': '#### 5', 'gold': '#### 5'}])\n"
        "E.type = 'math'\n"
        "r = s.score(E(), [{'prediction': '$\\\\frac{1}{2}$', 'gold': '0.5'}])\n"
        "print(r['accuracy'], sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'math_verify', 'latex2sympy2_extended', 'antlr4')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "100.0 []"


@requires_shared
def test_every_math500_reference_is_right_as_a_reply_and_wrong_when_changed(checker):
    """All 500 references of MATH-500 (LaTeX: intervals, tuples, matrices, degrees, text) read
    back as right when a model boxes them (alone: the test through the engine), and wrong when the
    simulator's wrong answer (its last number plus one, else "I don't know.") is given instead —
    but for the 8 where that changes only a base's subscript or a unit's exponent."""
    rows = [json.loads(line) for line in MATH500.read_text().splitlines()]
    assert len(rows) == 500
    boxed = sum(checker.judge(f"So the answer is $\\boxed{{{r['answer']}}}$.", r["answer"]).correct for r in rows)
    wrong = [r["answer"] for r in rows if checker.judge(f"So the answer is $\\boxed{{{wrong_answer(r['answer'])}}}$.", r["answer"]).correct]
    assert boxed == 500
    assert wrong == [r["answer"] for r in rows if NOT_COMPARED_RE.search(r["answer"])] and len(wrong) == 8


@requires_shared
def test_math500_through_the_engine_scores_the_known_accuracy(tmp_path: Path, sim_factory) -> None:
    """MATH-500 as a plan would run it: `answer` as the target, the `math` evaluator; a simulated
    model that answers 60 % of the prompts with the bare reference (LaTeX, no delimiters)."""
    dataset = {"abbr": "math500", "path": str(MATH500), "prompt": "{problem}", "target": "{answer}", "limit": 120, "evaluator": {"type": "math"}}
    plan = load_plan(write_plan(tmp_path, models=[chat("solver", "http://127.0.0.1:1")], datasets=[dataset]))
    samples = [render_sample(plan.datasets[0], i, r) for i, r in enumerate(load_records(plan, plan.datasets[0]))]
    key = AnswerKey()
    for s in samples:
        key.add_gen(s.prompt, s.target)
    sim = sim_factory(SimConfig(answer_key=key, models={"solver": ModelProfile(accuracy=0.6)}))
    code, events, _ = run_plan(write_plan(tmp_path, models=[chat("solver", sim.url, max_workers=16)], datasets=[dataset]))
    assert code == 0
    (scored,) = of_type(events, ev.DatasetScored)
    right = sum(answers_correctly("solver", s.prompt, 0.6) or bool(NOT_COMPARED_RE.search(s.target)) for s in samples)
    assert scored.score == round(100 * right / len(samples), 2)
