"""The agreement suite's tables: reply styles with the truth by construction (tests/test_agreement.py).

Each style writes a reply that settles on a known answer, in the way models do (few-shot `####`,
chain-of-thought "The answer is", boxes, second thoughts, an invented next question, LaTeX
numbers, option labels…), with other numbers or letters around it to mislead a careless reader.
A style is a function of the answer; a table is every style over a few answers.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import NamedTuple


class Row(NamedTuple):
    style: str
    reply: str
    gold: str  # the dataset's reference, as the dataset writes it
    right: bool = True  # whether a careful person counts the reply right (False: a trap)
    pattern: str | None = None  # regex: the dataset's pattern


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


def _next(answers: str | tuple[str, ...], answer: str) -> str:
    """Another answer of the table: the one after `answer`."""
    return answers[(answers.index(answer) + 1) % len(answers)]


def _other(letter: str) -> str:
    return _next(CHOICE_ANSWERS, letter)


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


# -- exact, includes, regex: short answers as a QA dataset writes them ---------------------------


def _fullwidth(text: str) -> str:
    """The answer in fullwidth forms (`Ｐａｒｉｓ`, `４２`), as CJK-trained models sometimes write it."""
    return "".join("\u3000" if c == " " else chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _nbsp(text: str) -> str:
    return text.replace(" ", "\u00a0")


def _nfd(text: str) -> str:
    """Accents as combining marks (`Zu` + U+0308 `rich`): the same letters, other code points."""
    return unicodedata.normalize("NFD", text)


EXACT_ANSWERS = ("Paris", "New York", "-5", "Zürich", "O'Keeffe")


def _other_exact(answer: str) -> str:
    return _next(EXACT_ANSWERS, answer)


# style → reply of the answer g: the reply is the answer, decorated; the truth is "right"
EXACT_STYLES: dict[str, Callable[[str], str]] = {
    "the answer alone": lambda g: g,
    "surrounding whitespace": lambda g: f"\n  {g} \n",
    "lowercase": lambda g: g.lower(),
    "uppercase": lambda g: g.upper(),
    "trailing full stop": lambda g: f"{g}.",
    "trailing exclamation mark": lambda g: f"{g}!",
    "double quotes": lambda g: f'"{g}"',
    "typographic quotes": lambda g: f"\u201c{g}\u201d",
    "quotes and a full stop": lambda g: f"'{g}'.",
    "markdown bold": lambda g: f"**{g}**",
    "markdown bold, full stop outside": lambda g: f"**{g}**.",
    "markdown italic": lambda g: f"*{g}*",
    "inline code": lambda g: f"`{g}`",
    "a leading Answer:": lambda g: f"Answer: {g}",
    "a bold Answer: label": lambda g: f"**Answer:** {g}",
    "Final answer:": lambda g: f"Final answer: {g}.",
    "fullwidth forms": _fullwidth,
    "no-break spaces": lambda g: _nbsp(f" {g} "),
    "decomposed accents": _nfd,
    "typographic apostrophe and minus": lambda g: g.replace("'", "\u2019").replace("-", "\u2212"),
    "in a sentence": lambda g: f"The answer is {g}.",
    "an explanation after it": lambda g: f"{g}\n\nIt is the one the question describes.",
}
#: exact compares the whole reply: an answer inside a sentence is for `includes` or `regex`.
EXACT_NOT_READ = ("in a sentence", "an explanation after it")

# style → a reply that does not give the answer g: the truth is "wrong"
EXACT_TRAPS: dict[str, Callable[[str], str]] = {
    "another answer": _other_exact,
    "two answers": lambda g: f"{g} or {_other_exact(g)}",
    "a longer name": lambda g: f"{g} Street",
    "Answer: another one": lambda g: f"Answer: {_other_exact(g)}",
    "an empty reply": lambda g: "",
    "a refusal": lambda g: "I don't know.",
}


def exact_rows() -> list[Row]:
    rows = [Row(style, write(g), g) for style, write in EXACT_STYLES.items() for g in EXACT_ANSWERS]
    return rows + [Row(style, write(g), g, right=False) for style, write in EXACT_TRAPS.items() for g in EXACT_ANSWERS]


INCLUDES_ANSWERS = ("Paris", "New York", "42", "Zürich", "Mars", "7")
# a longer word or number that starts or ends with the answer and is not it
_LONGER = {"Paris": "Parisian", "New York": "New Yorker", "42": "42.5", "Zürich": "Zürichsee", "Mars": "Marseille", "7": "-7"}


def _other_includes(answer: str) -> str:
    return _next(INCLUDES_ANSWERS, answer)


INCLUDES_STYLES: dict[str, Callable[[str], str]] = {
    "the answer alone": lambda g: g,
    "in a sentence": lambda g: f"I am fairly sure it is {g}, given the clues.",
    "after a label": lambda g: f"Answer: {g}",
    "another case": lambda g: f"it is {g.upper()} without a doubt",
    "bold in a sentence": lambda g: f"So it must be **{g}**.",
    "typographic quotes": lambda g: f"The one you want is \u201c{g}\u201d.",
    "in brackets": lambda g: f"The result ({g}) follows.",
    "followed by a dash": lambda g: f"{g} \u2014 as the clue says.",
    "over a line break": lambda g: "It is\n" + g.replace(" ", "\n") + "\nfor sure.",
    "a line, then an explanation": lambda g: f"Answer: {g}\nExplanation: the other options fail.",
    "a distractor named first": lambda g: f"Not {_other_includes(g)}; it is {g}.",
    "a markdown list": lambda g: f"- {g}\n- (the others are wrong)",
    "a Chinese sentence": lambda g: f"答案是{g}。",
    "a Japanese sentence": lambda g: f"答えは{g}です。",
    "fullwidth forms": lambda g: f"It is {_fullwidth(g)}.",
    "decomposed accents": lambda g: f"It is {_nfd(g)}.",
    "no-break spaces": lambda g: _nbsp(f"It is {g} indeed."),
}
INCLUDES_NOT_READ = ("negated", "two answers")  # includes finds the answer; it cannot tell it was denied or hedged

INCLUDES_TRAPS: dict[str, Callable[[str], str]] = {
    "another answer": lambda g: f"It is {_other_includes(g)}.",
    "a longer word or number": lambda g: f"It is {_LONGER[g]}.",
    "an empty reply": lambda g: "",
    "negated": lambda g: f"It is not {g}; it is {_other_includes(g)}.",
    "two answers": lambda g: f"Either {g} or {_other_includes(g)}.",
}


def includes_rows() -> list[Row]:
    rows = [Row(style, write(g), g) for style, write in INCLUDES_STYLES.items() for g in INCLUDES_ANSWERS]
    return rows + [Row(style, write(g), g, right=False) for style, write in INCLUDES_TRAPS.items() for g in INCLUDES_ANSWERS]


_ANSWER_LINE = r"Answer:\s*(.+)"
# style → (the dataset's pattern, reply of the answer g, whether it is right): the pattern is the
# dataset's rule for where the answer is, so a reply that does not match it is wrong
REGEX_STYLES: dict[str, tuple[str, Callable[[str], str], bool]] = {
    "first group": (_ANSWER_LINE, lambda g: f"Working: not {_other_includes(g)}.\nAnswer: {g}", True),
    "first group, bold and a full stop": (_ANSWER_LINE, lambda g: f"Answer: **{g}**.", True),
    "first group, another case": (_ANSWER_LINE, lambda g: f"Answer: {g.upper()}", True),
    "first group, quoted": (_ANSWER_LINE, lambda g: f'Answer: "{g}"', True),
    "first group, fullwidth forms": (_ANSWER_LINE, lambda g: f"Answer: {_fullwidth(g)}", True),
    "first group, spaces around": (r"Answer:(.*)", lambda g: f"Answer:   {g}   \nDone.", True),
    "a tag": (r"<answer>(.*?)</answer>", lambda g: f"I reason first.\n<answer> {g} </answer>", True),
    "a box": (r"\\boxed\{([^{}]*)\}", lambda g: f"So it is $\\boxed{{{g}}}$.", True),
    "the whole match (no group)": (r"(?<=Answer: )[^\n]+", lambda g: f"Answer: {g}\nThat is all.", True),
    "alternatives: the second group took part": (r"answer is (.+?)\.|Answer:\s*(.+)", lambda g: f"Answer: {g}", True),
    "a case-insensitive pattern": (r"(?i)answer:\s*(.+)", lambda g: f"ANSWER: {g}", True),
    "second thought": (_ANSWER_LINE, lambda g: f"Answer: {_other_includes(g)}\nWait, that is wrong.\nAnswer: {g}", True),
    "no match": (_ANSWER_LINE, lambda g: f"I think it is {g}.", False),
    "another answer after the right one named": (_ANSWER_LINE, lambda g: f"It is not {g}.\nAnswer: {_other_includes(g)}", False),
    "a longer word or number": (_ANSWER_LINE, lambda g: f"Answer: {_LONGER[g]}", False),
}
#: regex reads the pattern's first match (as re.search does); `exact_match` with `group_select = -1` reads the last
REGEX_NOT_READ = ("second thought",)


def regex_rows() -> list[Row]:
    return [Row(style, write(g), g, right, pattern) for style, (pattern, write, right) in REGEX_STYLES.items() for g in INCLUDES_ANSWERS]
