"""Option-letter extraction from realistic model replies, and its precedence."""

from __future__ import annotations

import pytest

from evaltui.scoring.readers.choice import extract_choice, gold_letter, judge_choice


@pytest.mark.parametrize(
    "reply, letter",
    [
        # 1. explicit statements
        ("The answer is C.", "C"),
        ("I think the answer is D", "D"),
        ("Answer: A\nExplanation: A is the only option that ...", "A"),
        ("answer: (B)", "B"),
        ("**Answer:** (C) Paris", "C"),
        ("The correct answer would be B because it is larger.", "B"),
        ("The correct option is B since", "B"),
        ("The answer is option C.", "C"),
        ("答案是 D", "D"),
        # a letter declared right
        ("B is correct.", "B"),
        ("B is the correct answer.", "B"),
        ("(C) is the right choice because it is larger", "C"),
        ("A. 3\nB. 4\nD is the best option here", "D"),
        ("A is correct", "A"),
        ("A and B are wrong, so the answer is C.", "C"),  # explicit beats earlier letters
        ("The answer is B.\n\nQuestion: ... The answer is A.", "B"),  # the first statement
        # 2. just the letter
        ("D", "D"),
        ("  (D) ", "D"),
        ("D.", "D"),
        ("D)", "D"),
        ("D:", "D"),
        ("**B**", "B"),
        # 3. leading label
        ("(B) Paris", "B"),
        ("B. Paris", "B"),
        ("C) Berlin is the capital", "C"),
        # 4. last standalone letter between punctuation / line ends
        ("Between A and B I'd pick (B), clearly.", "B"),
        ("Looking at the options, I'd go with C.", "C"),
        ("The options are tricky.\nB\n", "B"),
        # no letter at all
        ("I don't know.", None),
        ("A dog is a mammal.", None),  # an article is not an option
        ("The U.S. has fifty states", None),
        ("the answer is c", None),  # only capitals are option letters
        ("", None),
    ],
)
def test_extract_choice(reply, letter):
    assert extract_choice(reply) == letter


# The usual phrasings, and the pronoun "I" / the article "A" standing where a letter could be:
# they are an answer only when nothing better is in the reply.
@pytest.mark.parametrize(
    "reply, letter",
    [
        ("The answer I think is B.", "B"),
        ("The answer, I believe, is (C).", "C"),
        ("The answer I'd pick is D", "D"),
        ("The answer to this question is B.", "B"),
        ("The answer is (B)", "B"),
        ("Answer: B", "B"),
        ("B.", "B"),
        ("**B**", "B"),
        ("I think B", "B"),
        ("I think B is right.", "B"),
        ("I would choose C because it is larger.", "C"),
        ("option B", "B"),
        ("Option B is plausible but I am not sure", "B"),
        ("The answer I cannot say, but I lean to option D.", "D"),
        ("Answer: A lot of people pick B.", "B"),
        ("I think A dog is the answer, so I pick C.", "C"),
        ("The answer is A because option B is wrong.", "A"),
        ("The answer is I.", "I"),
        ("Answer: A", "A"),
        ("The answer is A, not B.", "A"),
        ("The answer I don't know", None),
        ("I think I know", None),
        ("Therefore, the answer is $\\boxed{C}$", "C"),
        ("so it is \\boxed{\\text{(D)}}.", "D"),
    ],
)
def test_usual_phrasings(reply, letter):
    assert extract_choice(reply) == letter


def test_pronoun_i_is_not_an_option_unless_bracketed():
    assert extract_choice("Honestly, neither do I.") is None
    assert extract_choice("It has to be (I).") == "I"


def test_explicit_statement_beats_leading_label():
    assert extract_choice("A) is tempting, but the answer is D.") == "D"


@pytest.mark.parametrize("gold", ["C", "(C)", "C.", "c", " C ", "C)", "Answer: C"])
def test_gold_forms(gold):
    assert gold_letter(gold) == "C"


def test_judge_choice():
    assert judge_choice("The answer is C.", "(C)") == ("C", True)
    assert judge_choice("The answer is C.", "B") == ("C", False)
    assert judge_choice("I don't know.", "A") == (None, False)
    assert judge_choice("A", "") == ("A", False)


# Issue 29: each way a reply's letter was missed or misread.
@pytest.mark.parametrize(
    "reply, letter",
    [
        ("I think it's D because A is wrong.", "D"),
        ("It's B, since the others contradict the premise.", "B"),
        ("b", "B"),
        (" (c) ", "C"),
        ("d.", "D"),
        ("B — London", "B"),
        ("B – London is the capital", "B"),
        ("<answer>B</answer>", "B"),
        ("<answer>b</answer>", "B"),
        ("Let me think. A is wrong, C is too narrow.\n<answer>(D)</answer>", "D"),
        # the last explicit statement wins, a second thought included
        ("The answer is B. Wait, actually it's C.", "C"),
        ("The answer is B. No, wait: it's D.", "D"),
        ("Answer: B\nOn second thought, the answer is C.", "C"),
        ("\\boxed{A} Hmm, that ignores the premise. \\boxed{C}", "C"),
        # ... but not an answer to a question the model invented afterwards
        ("B\n\nQuestion: Which is larger?\nA. 2\nB. 3\nAnswer: B", "B"),
        ("The answer is C.\nQ: Which is smaller?\nA. 2\nB. 3\nThe answer is A.", "C"),
        # OpenCompass's first_option_postprocess reads A (from "Answer") here
        ("**Answer: (C)**", "C"),
    ],
)
def test_read_as_a_careful_person_reads_it(reply, letter):
    assert extract_choice(reply) == letter
