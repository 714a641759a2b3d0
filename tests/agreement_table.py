"""The agreement suite's tables: reply styles with the truth by construction (tests/test_agreement.py,
bench/agreement.py).

Each style writes a reply that settles on a known answer, in the way models do (few-shot `####`,
chain-of-thought "The answer is", boxes, second thoughts, an invented next question, LaTeX
numbers, option labels…), with other numbers or letters around it to mislead a careless reader.
A style is a function of the answer; a table is every style over a few answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Row(NamedTuple):
    style: str
    reply: str
    gold: str  # the dataset's reference, as the dataset writes it


# -- gsm8k: golds as GSM8K writes them ("… #### 18") ---------------------------------------------

GSM8K_ANSWERS = (18, 72, 5, 1234, 2125, 7, 36, 150, 9, 64)
_WORDS = {
    18: "eighteen", 72: "seventy-two", 5: "five", 1234: "one thousand two hundred thirty-four", 2125: "two thousand one hundred twenty-five",
    7: "seven", 36: "thirty-six", 150: "one hundred fifty", 9: "nine", 64: "sixty-four",
}


def _latex_thousands(n: int) -> str:
    return format(n, ",").replace(",", "{,}")


# style → (reply of the answer n, the gold's number): most golds are n itself
GSM8K_STYLES: dict[str, Callable[[int], tuple[str, str]]] = {
    "few-shot ####": lambda n: (f"She buys {n - 3} and 3 more: {n - 3} + 3 = {n}.\n#### {n}", str(n)),
    "the answer is": lambda n: (f"First 4 apples, then {n + 4} in all, less 4. The answer is {n}.", str(n)),
    "boxed in $…$.": lambda n: (f"So the total is $\\boxed{{{n}}}$.", str(n)),
    "the answer is $\\boxed{}$": lambda n: (f"Adding 2 and 3 gives 5 boxes. The answer is $\\boxed{{{n}}}$.", str(n)),
    "answer is a + b = n": lambda n: (f"The answer is {n - 6} + 6 = {n}.", str(n)),
    "LaTeX thousands {,}": lambda n: (f"The total is $\\boxed{{{_latex_thousands(n)}}}$ dollars.", str(n)),
    "Final answer: then more reasoning": lambda n: (f"Final answer: {n}\n\nTo check: she had {n + 5}, gave 5 away, and 2 + 2 = 4 pens are left.", str(n)),
    "second thought": lambda n: (f"The answer is {n - 2}. Wait, I forgot the 2 she found. The answer is {n}.", str(n)),
    "#### twice": lambda n: (f"#### {n + 2}\nNo: she sold 2 fewer.\n#### {n}", str(n)),
    "Unicode minus": lambda n: (f"It falls {n} degrees from 0, so it ends at −{n} degrees.", f"-{n}"),
    "mixed number": lambda n: (f"For 3 cakes, the answer is {n} 1/2 cups of flour.", f"{n}.5"),
    "\\frac in a box": lambda n: (f"$\\boxed{{\\frac{{{2 * n}}}{{2}}}}$", str(n)),
    "**Answer:** then explanation": lambda n: (f"**Answer:** {n}\n\nExplanation: {n + 3} less 3, from 7 + 2 = 9 boxes.", str(n)),
    "<answer> tag": lambda n: (f"<answer>{n}</answer> since {n - 1} + 1", str(n)),
    "invented next question": lambda n: (f"She has {n} apples.\n\nQuestion: Tom has 3 apples and buys 4. How many?\nAnswer: 7", str(n)),
    "dollars with commas": lambda n: (f"Each costs $3, so the answer is ${n:,}.", str(n)),
    "last number": lambda n: (f"She gives away 3 of the {n + 3} and keeps {n}.", str(n)),
    "the number alone": lambda n: (f"{n}", str(n)),
    "bold number": lambda n: (f"The answer is **{n}**.", str(n)),
    "reason in brackets": lambda n: (f"The answer is {n} (because {n + 4} - 4 = {n} and 2 × 3 = 6).", str(n)),
    "expression in a box": lambda n: (f"\\boxed{{{n - 5} + 5}}", str(n)),
    "expression after the phrase": lambda n: (f"The answer is {n - 4} + 4.", str(n)),
    "答案是": lambda n: (f"所以答案是 {n}。", str(n)),
    "number in words": lambda n: (f"The answer is {_WORDS[n]}.", str(n)),
}
#: Styles evaltui is known not to read (a number written in words): the count floor allows them.
GSM8K_NOT_READ = ("number in words",)


def gsm8k_rows() -> list[Row]:
    rows = []
    for style, write in GSM8K_STYLES.items():
        for n in GSM8K_ANSWERS:
            reply, gold = write(n)
            rows.append(Row(style, reply, f"It works out.\n#### {gold}"))
    return rows


# -- choice: golds as MMLU writes them ("C") -----------------------------------------------------

CHOICE_ANSWERS = "ABCD"
_OPTIONS = {"A": "Paris", "B": "London", "C": "Berlin", "D": "Madrid"}


def _other(letter: str) -> str:
    return "ABCD"[("ABCD".index(letter) + 1) % 4]


CHOICE_STYLES: dict[str, Callable[[str], str]] = {
    "the answer is": lambda c: f"The answer is {c}.",
    "the answer is (C)": lambda c: f"The answer is ({c}).",
    "**Answer: (C)**": lambda c: f"**Answer: ({c})**",
    "the letter alone": lambda c: c,
    "a lowercase letter alone": lambda c: c.lower(),
    "label": lambda c: f"{c}. {_OPTIONS[c]}",
    "label with an em dash": lambda c: f"{c} — {_OPTIONS[c]}",
    "I think it's": lambda c: f"I think it's {c} because {_other(c)} is wrong.",
    "<answer> tag": lambda c: f"<answer>{c}</answer>",
    "second thought": lambda c: f"The answer is {_other(c)}. Wait, actually it's {c}.",
    "boxed": lambda c: f"Therefore, the answer is $\\boxed{{{c}}}$",
    "declared correct": lambda c: f"{c} is the correct answer.",
    "a pick after a rejected option": lambda c: f"Option {_other(c)} is tempting, but I'd go with {c}.",
    "invented next question": lambda c: f"{c}\n\nQuestion: Which is larger?\nA. 2\nB. 3\nAnswer: {_other(c)}",
    "correct option is": lambda c: f"The correct option is {c} since the others fail.",
    "答案是": lambda c: f"答案是 {c}",
    "reasoning, then the answer": lambda c: f"{_other(c)} is wrong because it ignores the premise, so the answer is {c}.",
}
CHOICE_NOT_READ: tuple[str, ...] = ()


def choice_rows() -> list[Row]:
    return [Row(style, write(c), c) for style, write in CHOICE_STYLES.items() for c in CHOICE_ANSWERS]


# -- math: golds as MATH writes them (LaTeX) -----------------------------------------------------

# (reference, an equivalent way to write it, a wrong answer)
MATH_ANSWERS = (
    ("\\frac{1}{2}", "0.5", "\\frac{1}{3}"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)", "\\left( 3, \\pi \\right)"),
    ("[2, 5)", "x \\in [2, 5)", "[2, 5]"),
    ("\\{1, 2\\}", "\\{2, 1\\}", "\\{1, 3\\}"),
    ("10\\sqrt{2}", "\\sqrt{200}", "10\\sqrt{3}"),
    ("-\\frac{3}{4}", "-0.75", "\\frac{3}{4}"),
    ("x^2 + 1", "1 + x^2", "x^2 - 1"),
    ("18", "18.0", "16"),
)

MATH_STYLES: dict[str, Callable[[str, str, str], str]] = {
    "boxed": lambda g, e, w: f"So the answer is $\\boxed{{{g}}}$.",
    "boxed, equivalent form": lambda g, e, w: f"So the answer is $\\boxed{{{e}}}$.",
    "final answer is": lambda g, e, w: f"Working it out gives it. The final answer is ${g}$.",
    "second thought, boxes": lambda g, e, w: f"\\boxed{{{w}}}. Wait, I made an error: \\boxed{{{g}}}",
    "second thought, a phrase after a box": lambda g, e, w: f"\\boxed{{{w}}}. Wait, the answer is ${g}$.",
    "the answer alone": lambda g, e, w: g,
    "invented next question": lambda g, e, w: f"The answer is ${g}$.\n\nQuestion: what is the next one?\nThe answer is ${w}$.",
    "#### line": lambda g, e, w: f"Putting it together:\n#### {g}",
}
MATH_NOT_READ: tuple[str, ...] = ()


def math_rows() -> list[Row]:
    return [Row(style, write(g, e, w), g) for style, write in MATH_STYLES.items() for g, e, w in MATH_ANSWERS]
