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


# Issue 29: each way a reply's answer was misread, read as a careful person reads it.
@pytest.mark.parametrize(
    "text, number",
    [
        # where a reply states an expression, the value after its last "=" is the answer
        ("The answer is 3 + 6 = 9.", "9"),
        ("#### 3+6=9", "9"),
        ("\\boxed{x = 9}", "9"),
        ("The answer is 16 - 3 - 4 = 9 eggs, and 9 * 2 = 18 dollars.", "18"),
        # ... but a leading number is the answer whatever follows it
        ("The answer is 18 (because 16 - 3 - 4 = 9 eggs).", "18"),
        # LaTeX's thousands separators, the minus sign, fractions
        ("\\boxed{2{,}125}", "2125"),
        ("The total is $2\\,125$.", "2125"),
        ("The temperature is −10 degrees.", "-10"),
        ("\\boxed{−10}", "-10"),
        ("\\boxed{\\frac{36}{2}}", "36/2"),
        ("\\boxed{\\dfrac{7}{2}}", "7/2"),
        ("The answer is \\$18.", "18"),
        # a mixed number
        ("She needs 2 1/2 cups of flour.", "2 1/2"),
        ("The answer is -2 1/2.", "-2 1/2"),
        # "Final answer: 9" is a mark, whatever reasoning follows it
        ("Final answer: 9\n\nTo check: 3 + 4 = 7, and 2 more is 9, so 12 apples in all.", "9"),
        ("**Answer:** 18\n\nExplanation: 16 eggs, 3 eaten, 4 baked.", "18"),
        ("<answer>18</answer> since 16 + 2", "18"),
        # the last mark wins
        ("The answer is 16. Wait, I forgot the 2 eggs she found. The answer is 18.", "18"),
        ("#### 20\nHmm, no: she sold 2 fewer.\n#### 18", "18"),
        ("So \\boxed{16}. Wait, that misses 2: \\boxed{18}", "18"),
        ("The answer is 16.\nActually, the final answer is \\boxed{18}.", "18"),
        # ... but a question the model invents after answering is not read
        ("She has 5 apples.\n\nQuestion: Tom has 3 apples and buys 4. How many?\nAnswer: 7", "5"),
        ("The answer is 8.\nQ: what is 5 + 6?\nThe answer is 11.", "8"),
        # a phrase with no number after it is no mark
        ("The answer is that she keeps 3 of the 9 eggs.", "9"),
        # an expression without "=" is an expression (worked out by math-verify when scoring)
        ("The answer is 3 + 6.", "3 + 6"),
        ("\\boxed{2^4}", "2^4"),
        ("The answer is (18).", "18"),
    ],
)
def test_prediction_read_as_a_careful_person_reads_it(text, number):
    assert extract_prediction_number(text) == number


@pytest.mark.parametrize("gold", ["#### 2125", "#### 2,125", "The answer is 2{,}125", "2125"])
def test_gold_in_any_of_its_forms(gold):
    assert extract_gold_number(gold) == "2125"
    assert judge_gsm8k("\\boxed{2{,}125}", gold).correct


def test_mixed_numbers_equal_their_value():
    assert numbers_equal("2 1/2", "2.5")
    assert numbers_equal("-2 1/2", "-5/2")
    assert not numbers_equal("2 1/2", "2")


def test_an_expression_is_worked_out_by_math_verify_when_scoring():
    """`score` hands gsm8k's expressions to math-verify (its worker); `judge_gsm8k` alone reads
    their first number."""
    from evaltui.scoring import score

    class Ev:
        type = "gsm8k"

    replies = ["The answer is 3 + 6.", "\\boxed{2^4}", "\\boxed{\\sqrt{324}}", "The answer is 3 \\times 6.", "#### 3 × 6", "The answer is (4 + 8) - 3.", "The answer is 3 + 5."]
    golds = ["#### 9", "#### 16", "#### 18", "#### 18", "#### 18", "#### 9", "#### 9"]
    result = score(Ev(), [{"prediction": p, "gold": g} for p, g in zip(replies, golds, strict=True)])
    assert [d["correct"] for d in result["details"]] == [True] * 6 + [False]
    assert result["details"][0]["extracted"] == "3 + 6"
    assert judge_gsm8k("The answer is 3 + 6.", "#### 9") == ("3 + 6", False)
    assert judge_gsm8k("The answer is 3 + 6.", "#### 3") == ("3 + 6", True)
