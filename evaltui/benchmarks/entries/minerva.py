"""MATH-500: lm-eval's `minerva_math500` (4 fixed Minerva examples), answers compared with math-verify.

From lm_eval/tasks/minerva_math (0.4.13, v3.1): the four examples of `list_fewshot_samples`,
each "Problem:\n{problem}\n\nSolution: {solution}\n\n", then the question; stop "Problem:";
256 tokens. Scored by the task's `math_verify` metric — math-verify's own reading of the whole
reply against the whole reference solution (the `math` evaluator with `extract = "whole"`, run in
its worker process). The task's other metric, `exact_match` (Minerva's normalisation, then
sympy's LaTeX parser, which wants antlr4 4.11 beside math-verify's own), is not reproduced.

A local copy is openai/prm800k's `math_splits/test.jsonl` (the 500 problems); the Hub's
`HuggingFaceH4/MATH-500`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from evaltui.benchmarks.entry import Doc, Docs, Entry, HubData, LocalData
from evaltui.benchmarks.lmeval import Sampler, with_fewshot

# minerva_math's fewshot_config samples (lm_eval/tasks/minerva_math/utils.py: list_fewshot_samples): problem, solution
SHOTS: tuple[tuple[str, str], ...] = (
    (
        'Find the domain of the expression  $\\frac{\\sqrt{x-2}}{\\sqrt{5-x}}$.',
        'The expressions inside each square root must be non-negative. Therefore, $x-2 \\ge 0$, so $x\\ge2$, and $5 - x '
        '\\ge 0$, so $x \\le 5$. Also, the denominator cannot be equal to zero, so $5-x>0$, which gives $x<5$. '
        'Therefore, the domain of the expression is $\\boxed{[2,5)}$.\n'
        'Final Answer: The final answer is $[2,5)$. I hope it is correct.',
    ),
    (
        'If $\\det \\mathbf{A} = 2$ and $\\det \\mathbf{B} = 12,$ then find $\\det (\\mathbf{A} \\mathbf{B}).$',
        'We have that $\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B}) = (2)(12) = \\boxed{24}.$\n'
        'Final Answer: The final answer is $24$. I hope it is correct.',
    ),
    (
        'Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound weights instead, how many times '
        'must Terrell lift them in order to lift the same total weight?',
        'If Terrell lifts two 20-pound weights 12 times, he lifts a total of $2\\cdot 12\\cdot20=480$ pounds of weight.  '
        'If he lifts two 15-pound weights instead for $n$ times, he will lift a total of $2\\cdot15\\cdot n=30n$ pounds '
        'of weight.  Equating this to 480 pounds, we can solve for $n$:\n'
        '\\begin{align*}\n'
        '30n&=480\\\\\n'
        '\\Rightarrow\\qquad n&=480/30=\\boxed{16}\n'
        '\\end{align*}\n'
        'Final Answer: The final answer is $16$. I hope it is correct.',
    ),
    (
        'If the system of equations\n'
        '\n'
        '\\begin{align*}\n'
        '6x-4y&=a,\\\\\n'
        '6y-9x &=b.\n'
        '\\end{align*}has a solution $(x, y)$ where $x$ and $y$ are both nonzero,\n'
        'find $\\frac{a}{b},$ assuming $b$ is nonzero.',
        'If we multiply the first equation by $-\\frac{3}{2}$, we obtain\n'
        '\n'
        '$$6y-9x=-\\frac{3}{2}a.$$Since we also know that $6y-9x=b$, we have\n'
        '\n'
        '$$-\\frac{3}{2}a=b\\Rightarrow\\frac{a}{b}=\\boxed{-\\frac{2}{3}}.$$\n'
        'Final Answer: The final answer is $-\\frac{2}{3}$. I hope it is correct.',
    ),
)
QUESTION = "Problem:\n{problem}\n\nSolution:"


def _prepare(docs: Docs, n: int, parts: Sequence[str]) -> Iterator[Doc]:
    pool = [{"problem": p, "solution": s} for p, s in SHOTS]
    return with_fewshot(docs.eval, Sampler(pool, "first_n"), n, lambda d: (QUESTION.format(problem=d["problem"]), d["solution"]))


MINERVA_MATH500 = Entry(
    name="minerva_math500", reference="lm-eval 0.4.13", task="minerva_math500", version="v3.1", metric="math_verify", size=500, split="test",
    num_fewshot=4, fixed_examples=len(SHOTS),
    fields={
        "prompt": "{fewshot}" + QUESTION,
        "target": "{solution}",
        "stop": ["Problem:"],
        "max_tokens": 256,
        "temperature": 0.0,
        "evaluator": {"type": "math", "extract": "whole"},
    },
    hub=HubData("HuggingFaceH4/MATH-500", {"test": "test.jsonl"}),
    local=LocalData({"test": "test.jsonl"}, "openai/prm800k (prm800k/math_splits/test.jsonl)"),
    prepare=_prepare, reply="{solution}",
)

ENTRIES = (MINERVA_MATH500,)
