"""GSM8K number extraction and numeric comparison."""

from __future__ import annotations

import pytest

from evaltui.scoring.readers.gsm8k import extract_gold_number, extract_prediction_number, judge_gsm8k, numbers_equal


@pytest.mark.parametrize(
    "text, number",
    [
        ("Natalia sold 48 clips... #### 72", "72"),
        ("#### 1,234", "1234"),
        ("She pays 5 + 3 = 8 dollars.\n#### 8\n\nQuestion: Tom has 3 ... #### 11", "8"),
        ("#### \nso in total 7 apples", "7"),  # a marker with nothing after it is skipped
        ("Step 1: 3*4 = 12. The answer is 12.", "12"),
        ("So the answer is $1,000.50.", "1000.50"),
        ("THE ANSWER IS: 18", "18"),
        ("answer is -5", "-5"),
        ("First 5 apples, then 3 more. The answer is 8. Next question: 10 pears?", "8"),
        ("He had 10 apples and ate 2, leaving 8", "8"),
        ("The total is $18.", "18"),
        ("It is 18.00", "18.00"),
        ("pages 10-12", "12"),
        ("the temperature fell to -3", "-3"),
        ("1, 2, 3", "3"),
        # a minus after a number and a space is subtraction, not a sign
        ("He had 12 apples and ate 3, leaving 12 - 3", "3"),
        ("12 - 3 = 9", "9"),
        ("leaving 12 -3", "3"),
        ("(4 + 8) - 3", "3"),
        ("-3", "-3"),
        ("-3 degrees at night", "-3"),
        ("x = -3", "-3"),
        ("The change is -3", "-3"),
        ("The answer is -3.", "-3"),
        ("#### -3", "-3"),
        ("#### - 5", "-5"),
        ("x = - 5", "-5"),
        ("The answer is - 5", "-5"),
        ("The answer is - 5. Next, 7 more", "-5"),
        ("\\boxed{- 5}", "-5"),
        ("\\boxed{-\t5} degrees", "-5"),
        ("He owes -$5", "-5"),
        ("COVID-19", "19"),
        ("It costs $1,234.50 in total", "1234.50"),
        ("She ate 1/2 of it", "1/2"),
        ("The answer is 3/4.", "3/4"),
        ("on 12/25/2023 she had 7", "7"),
        # \boxed{...} wins over later numbers
        ("So she pays \\boxed{18} dollars. Check: 3 + 4 = 7", "18"),
        ("$\\boxed{1,234}$", "1234"),
        ("\\boxed{-3} degrees", "-3"),
        ("\\boxed{\\text{12 apples}} and 5 pears", "12"),
        ("\\boxed{} so 9", "9"),
        ("I cannot solve this.", None),
        ("", None),
    ],
)
def test_prediction_number(text, number):
    assert extract_prediction_number(text) == number


@pytest.mark.parametrize(
    "gold, number",
    [
        ("She had <<4*3=12>>12 cookies.\n#### 12", "12"),
        ("He has 5 left.\n#### 0", "0"),
        ("#### 1,000", "1000"),
        ("#### 3\nlater #### 4", "4"),  # the last marker
        ("72", "72"),
        ("0", "0"),
        ("no number", None),
    ],
)
def test_gold_number(gold, number):
    assert extract_gold_number(gold) == number


def test_numeric_equality():
    assert numbers_equal("18", "18.0")
    assert numbers_equal("18.00", "18")
    assert numbers_equal("0", "0.0")
    assert numbers_equal("0.1", "0.10000000001")
    assert not numbers_equal("18", "18.5")
    assert not numbers_equal("-5", "5")
    assert numbers_equal("1/2", "0.5")
    assert numbers_equal("6/3", "2")
    assert not numbers_equal("1/0", "0")


def test_judge():
    assert judge_gsm8k("The answer is 18.", "blah\n#### 18") == ("18", True)
    assert judge_gsm8k("#### 18.0", "#### 18") == ("18.0", True)
    assert judge_gsm8k("The answer is 1,234", "#### 1234").correct
    assert judge_gsm8k("The answer is 17", "#### 18") == ("17", False)


def test_gold_zero_is_a_real_answer():
    assert judge_gsm8k("So nothing is left. The answer is 0.", "#### 0") == ("0", True)
    assert judge_gsm8k("The answer is 1", "#### 0") == ("1", False)
    assert judge_gsm8k("0", "0").correct


def test_no_number_is_incorrect():
    assert judge_gsm8k("I do not know", "#### 5") == (None, False)
    assert judge_gsm8k("5", "no number in the gold") == ("5", False)
    assert judge_gsm8k("", "#### 0") == (None, False)
