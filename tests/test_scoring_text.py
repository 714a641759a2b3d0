"""exact / includes / regex / ppl, and what score() does for every evaluator type."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from evaltui.scoring import main_metric, normalize, score
from evaltui.scoring.text_match import judge_exact, judge_includes, judge_ppl, make_regex_judge


@dataclass
class Ev:
    type: str
    pattern: str | None = None
    timeout: float = 10.0
    memory_mb: int = 1024


def preds(*pairs: tuple[str, object]) -> list[dict]:
    return [{"index": i, "origin_prompt": "q", "prediction": p, "gold": g} for i, (p, g) in enumerate(pairs)]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("  Paris  ", "paris"),
        ("PARIS.", "paris"),
        ('"Paris"', "paris"),
        ("'Paris'.", "paris"),
        ('"Paris."', "paris"),
        ("\u201cNew   York\u201d", "new york"),
        ("New\n\tYork", "new york"),
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),  # casefold, not lower
        ("ΣΊΣΥΦΟΣ", "σίσυφοσ"),  # a plain word (the short cut) casefolds like any other text
        ("24697", "24697"),
        ("İ", "i\u0307"),
        ("3.14", "3.14"),
        ("", ""),
        ('""', ""),
        ("0", "0"),
        (0, "0"),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("**Paris**.", "paris"),  # markdown bold, the full stop outside it
        ("*Paris*", "paris"),
        ("Paris!", "paris"),
        ("Answer: Paris", "paris"),
        ("**Answer:** 'Paris'.", "paris"),
        ("Final answer: New York.", "new york"),
        ("The answer is: Paris", "paris"),
        ("\uff30\uff41\uff52\uff49\uff53", "paris"),  # fullwidth forms
        ("New\u00a0York", "new york"),  # a no-break space
        ("Zu\u0308rich", "z\u00fcrich"),  # the accent as a combining mark
        ("O\u2019Keeffe", "o'keeffe"),  # the typographic apostrophe
        ("\u22125", "-5"),  # the minus sign
        ("\u2018Paris\u2019", "paris"),
        ("The answer is Paris", "the answer is paris"),  # a sentence, not a label
        ("__init__", "__init__"),  # underscores are names, not emphasis
        ("~~Paris~~", "~~paris~~"),  # struck out is not the answer
    ],
)
def test_normalize_peels_what_models_decorate_an_answer_with(raw, expected):
    assert normalize(raw) == expected


def test_exact_takes_a_decorated_answer_and_refuses_a_sentence():
    assert judge_exact("**Answer:** Paris!", "Paris").correct
    assert judge_exact("\uff14\uff12", "42").correct
    assert not judge_exact("The answer is Paris.", "Paris").correct
    assert not judge_exact("Paris or London", "Paris").correct


def test_exact_correct_and_incorrect():
    assert judge_exact("  paris. ", "Paris").correct
    assert judge_exact('"PARIS"', "paris").correct
    assert not judge_exact("Paris, France", "Paris").correct
    assert judge_exact("Paris, France", "Paris").extracted == "paris, france"


def test_exact_keeps_falsy_gold():
    assert judge_exact("0", "0").correct
    assert not judge_exact("", "0").correct
    assert judge_exact("", "").correct
    assert not judge_exact("something", "").correct


def test_includes():
    assert judge_includes("The capital is PARIS, of course.", "paris").correct
    assert not judge_includes("The capital is Lyon.", "Paris").correct
    assert judge_includes("It is 0 degrees", "0").correct
    assert not judge_includes("no digits here", "0").correct


@pytest.mark.parametrize(
    "reply, gold, right",
    [
        ("It is Parisian cuisine.", "Paris", False),
        ("The answer is 420.", "42", False),
        ("The answer is 42.5.", "42", False),
        ("It ends at -7 degrees.", "7", False),
        ("It ends at \u22127 degrees.", "7", False),
        ("About 7,000 people.", "7", False),
        ("It costs 3.5 dollars.", "5", False),
        ("They wrote New Yorker.", "New York", False),
        ("It is Paris's river.", "Paris", True),
        ("From 3-7 days, so 7.", "7", True),
        ("It was 42%.", "42", True),
        ("\u7b54\u6848\u662fParis\u3002", "Paris", True),  # Chinese joins words without spaces
        ("\u7b54\u6848\u662f\u5317\u4eac\u3002", "\u5317\u4eac", True),
        ("\uc11c\uc6b8\uc740 \uc218\ub3c4\ub2e4.", "\uc11c\uc6b8", True),  # Korean's particle follows the word
        ("the capital, paris, and then paris again", "Paris", True),
        ("Parisian? No: Paris.", "Paris", True),  # a later stand-alone occurrence counts
    ],
)
def test_includes_finds_the_answer_as_words_of_their_own(reply, gold, right):
    assert judge_includes(reply, gold).correct is right


def test_includes_empty_gold_is_equality_not_match_all():
    assert not judge_includes("anything at all", "").correct
    assert judge_includes("  ", "").correct


def test_regex_first_group_then_normalised_equality():
    judge = make_regex_judge(r"Answer:\s*(\w+)")
    assert judge("Let me think.\nAnswer: PARIS", "paris") == ("PARIS", True)
    assert judge("Answer: Lyon", "paris") == ("Lyon", False)
    assert judge("no marker", "paris") == (None, False)


def test_regex_without_groups_uses_whole_match():
    judge = make_regex_judge(r"\d+")
    assert judge("there are 42 of them", "42") == ("42", True)
    assert judge("zero: 0", "0") == ("0", True)


def test_regex_reads_the_group_of_the_alternative_that_matched():
    judge = make_regex_judge(r"answer is (\w+)|Answer:\s*(\w+)")
    assert judge("Answer: Paris", "paris") == ("Paris", True)
    assert judge("the answer is Paris.", "paris") == ("Paris", True)


def test_regex_optional_group_that_did_not_match():
    judge = make_regex_judge(r"x(\d)?")
    assert judge("x", "1") == (None, False)


def test_ppl_compares_chosen_candidate():
    assert judge_ppl("Yes.", "yes").correct
    assert not judge_ppl("No", "yes").correct


def test_score_metric_is_percent_rounded_to_two_decimals():
    result = score(Ev("exact"), preds(("a", "a"), ("b", "x"), ("c", "c")))
    assert result["accuracy"] == 66.67
    assert [d["correct"] for d in result["details"]] == [True, False, True]
    assert set(result) == {"accuracy", "uncertainty", "details"}  # issue 27: the metric's standard error and interval beside it


def test_score_detail_shape():
    result = score(Ev("exact"), preds(("Paris.", "paris")))
    assert result["details"] == [
        {"index": 0, "prediction": "Paris.", "gold": "paris", "extracted": "paris", "correct": True}
    ]


def test_score_empty_predictions_is_zero():
    for kind in ("exact", "includes", "gsm8k", "choice", "ppl"):
        result = score(Ev(kind), [])
        assert result == {"accuracy": 0.0, "details": []}
    assert score(Ev("regex", pattern="x"), []) == {"accuracy": 0.0, "details": []}
    assert score(Ev("code_exec"), [], records=[]) == {"pass@1": 0.0, "details": []}


def test_score_error_sample_scores_zero_and_says_why():
    error = {"type": "HTTPStatusError", "status": 500, "message": "boom"}
    samples = preds(("x", "x"), ("", ""))
    samples[1]["error"] = error  # an empty gold would otherwise match the empty prediction
    result = score(Ev("exact"), samples)
    assert result["accuracy"] == 50.0
    assert result["details"][1]["correct"] is False
    assert result["details"][1]["error"] == error
    assert result["details"][1]["extracted"] is None
    assert "error" not in result["details"][0]


def test_score_keeps_falsy_gold_values():
    result = score(Ev("exact"), preds(("0", 0), ("", "")))
    assert result["accuracy"] == 100.0
    assert result["details"][0]["gold"] == 0


def test_score_all_types_dispatch():
    assert score(Ev("includes"), preds(("it is paris", "Paris")))["accuracy"] == 100.0
    assert score(Ev("regex", pattern=r"is (\w+)"), preds(("it is paris", "Paris")))["accuracy"] == 100.0
    assert score(Ev("gsm8k"), preds(("so #### 18", "... #### 18")))["accuracy"] == 100.0
    assert score(Ev("choice"), preds(("The answer is C.", "C")))["accuracy"] == 100.0
    ppl_sample = preds(("B", "B"))
    ppl_sample[0]["ppl"] = [2.5, 1.1]
    assert score(Ev("ppl"), ppl_sample)["accuracy"] == 100.0


def test_main_metric():
    assert main_metric("code_exec") == "pass@1"
    for kind in ("exact", "includes", "regex", "gsm8k", "math", "choice", "ppl"):
        assert main_metric(kind) == "accuracy"


def test_unknown_type_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown evaluator type 'bleu'"):
        score(Ev("bleu"), preds(("a", "a")))
    with pytest.raises(ValueError, match="unknown evaluator type"):
        main_metric("nope")


@pytest.mark.parametrize("pattern", [None, ""])
def test_regex_without_pattern_is_a_clear_error(pattern):
    with pytest.raises(ValueError, match="needs a non-empty 'pattern'"):
        score(Ev("regex", pattern=pattern), preds(("a", "a")))


def test_regex_with_invalid_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        score(Ev("regex", pattern="(unclosed"), preds(("a", "a")))


def test_enum_valued_type_is_accepted():
    import enum

    class Kind(str, enum.Enum):
        EXACT = "exact"

    assert score(Ev(Kind.EXACT), preds(("a", "a")))["accuracy"] == 100.0
