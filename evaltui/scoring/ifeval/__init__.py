"""IFEval: whether a reply follows the prompt's verifiable instructions, as lm-evaluation-harness
0.4.13 scores its `ifeval` task (lm_eval/tasks/ifeval/utils.py, instructions_registry.py).

    text            sentences, words, languages, keywords (instructions_util)
    checks_content  language, length, content and keyword instructions
    checks_format   format, combination, start/end, case and punctuation instructions

The instruction checkers are Google's (google-research/google-research, instruction_following_eval,
Copyright 2023 The Google Research Authors), as lm-eval carries them, ported under the Apache
License, Version 2.0 (LICENSE in this folder): their checking logic and parameters unchanged.

Each reply is judged strict (as written) and loose (also without its first line, its last line,
both, and each of those with `*` removed: followed if any is); a prompt is followed when all its
instructions are. Metrics: `prompt_level_strict_acc` (main), `inst_level_strict_acc` (over all
instructions of all prompts), and their `loose` twins. Before a checker is built its arguments
that are empty or zero are dropped (lm-eval's `{k: v ... if v}`); an instruction whose argument is
then missing draws it at random, as lm-eval does, but from a generator seeded by the record's
prompt (`draws`): lm-eval draws from the global `random`, so its verdict there depends on what ran
before it; evaltui's is the same in every run. `langdetect` (the response_language and
change_case checks) is seeded here (0): lm-eval leaves it unseeded, so a borderline text can be
judged either way from one lm-eval run to the next.
"""

from __future__ import annotations

import json
from typing import Any

from evaltui.scoring.ifeval import checks_content as c
from evaltui.scoring.ifeval import checks_format as f
from evaltui.scoring.ifeval import draws
from evaltui.scoring.judgement import ScoredJudge, Verdict

INSTRUCTIONS: dict[str, Any] = {
    "keywords:existence": c.KeywordChecker,
    "keywords:frequency": c.KeywordFrequencyChecker,
    "keywords:forbidden_words": c.ForbiddenWords,
    "keywords:letter_frequency": c.LetterFrequencyChecker,
    "language:response_language": c.ResponseLanguageChecker,
    "length_constraints:number_sentences": c.NumberOfSentences,
    "length_constraints:number_paragraphs": c.ParagraphChecker,
    "length_constraints:number_words": c.NumberOfWords,
    "length_constraints:nth_paragraph_first_word": c.ParagraphFirstWordCheck,
    "detectable_content:number_placeholders": c.PlaceholderChecker,
    "detectable_content:postscript": c.PostscriptChecker,
    "detectable_format:number_bullet_lists": f.BulletListChecker,
    "detectable_format:constrained_response": f.ConstrainedResponseChecker,
    "detectable_format:number_highlighted_sections": f.HighlightSectionChecker,
    "detectable_format:multiple_sections": f.SectionChecker,
    "detectable_format:json_format": f.JsonFormat,
    "detectable_format:title": f.TitleChecker,
    "combination:two_responses": f.TwoResponsesChecker,
    "combination:repeat_prompt": f.RepeatPromptThenAnswer,
    "startend:end_checker": f.EndChecker,
    "change_case:capital_word_frequency": f.CapitalWordFrequencyChecker,
    "change_case:english_capital": f.CapitalLettersEnglishChecker,
    "change_case:english_lowercase": f.LowercaseLettersEnglishChecker,
    "punctuation:no_comma": f.CommaChecker,
    "startend:quotation": f.QuotationChecker,
}


def _checker(instruction_id: str, kwargs: dict[str, Any], prompt: str) -> Any:
    """The instruction's checker, built as lm-eval builds it (falsy arguments dropped; the prompt
    given to those that ask for it)."""
    checker = INSTRUCTIONS[instruction_id](instruction_id)
    checker.build_description(**{k: v for k, v in kwargs.items() if v})
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        checker.build_description(prompt=prompt)
    return checker


def loose_variants(response: str) -> list[str]:
    """The reply and its loose readings, in lm-eval's order."""
    r = response.split("\n")
    first, last, both = "\n".join(r[1:]).strip(), "\n".join(r[:-1]).strip(), "\n".join(r[1:-1]).strip()
    return [response, response.replace("*", ""), first, last, both, first.replace("*", ""), last.replace("*", ""), both.replace("*", "")]


def follows(record: dict[str, Any], response: str) -> tuple[list[bool], list[bool]]:
    """(strict, loose): whether each of the record's instructions is followed."""
    strict, loose = [], []
    draws.seed(record["prompt"])
    variants = loose_variants(response)
    for instruction_id, kwargs in zip(record["instruction_id_list"], record["kwargs"], strict=True):
        checker = _checker(instruction_id, kwargs, record["prompt"])
        strict.append(bool(response.strip() and checker.check_following(response)))
        checker = _checker(instruction_id, kwargs, record["prompt"])
        loose.append(any(v.strip() and checker.check_following(v) for v in variants))
    return strict, loose


def reference(record: dict[str, Any]) -> str:
    """What a record's reply is judged against, as one text (the dataset's target): its instructions."""
    return json.dumps({k: record[k] for k in ("prompt", "instruction_id_list", "kwargs")}, ensure_ascii=False)


def make_ifeval(evaluator: Any) -> ScoredJudge:
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0

    def judge(prediction: str, gold: str, entry: dict[str, Any]) -> Verdict:
        record = json.loads(gold)
        strict, loose = follows(record, prediction)
        scores = {
            "prompt_level_strict_acc": float(all(strict)),
            "inst_level_strict_acc": [float(sum(strict)), float(len(strict))],
            "prompt_level_loose_acc": float(all(loose)),
            "inst_level_loose_acc": [float(sum(loose)), float(len(loose))],
        }
        return Verdict(f"strict {sum(strict)}/{len(strict)}, loose {sum(loose)}/{len(loose)}", all(strict), scores)

    return judge
