"""IFEval's instructions, part two: format, combination, start and end, case and punctuation."""

# Ported from lm-evaluation-harness 0.4.13 (lm_eval/tasks/ifeval/instructions.py), itself from Google's
# instruction_following_eval (google-research/google-research), Copyright 2023 The Google Research
# Authors, licensed under the Apache License, Version 2.0 (LICENSE beside this file): the checks'
# logic and parameters unchanged; docstrings and the unregistered instructions left out.

from __future__ import annotations

import json
import logging
import re

import langdetect

from evaltui.scoring.ifeval import draws as random
from evaltui.scoring.ifeval import text as instructions_util
from evaltui.scoring.ifeval.checks_content import (
    _ALL_CAPITAL_WORD_FREQUENCY,
    _COMPARISON_RELATION,
    _CONSTRAINED_RESPONSE_OPTIONS,
    _ENDING_OPTIONS,
    _NUM_BULLETS,
    _NUM_HIGHLIGHTED_SECTIONS,
    _NUM_SECTIONS,
    _SECTION_SPLITER,
    Instruction,
)

logger = logging.getLogger(__name__)


class BulletListChecker(Instruction):
    def build_description(self, *, num_bullets=None):
        self._num_bullets = num_bullets
        if self._num_bullets is None or self._num_bullets < 0:
            self._num_bullets = random.randint(1, _NUM_BULLETS)
        self._description_pattern = (
            "Your answer must contain exactly {num_bullets} bullet points. "
            + "Use the markdown bullet points such as:\n"
            + "* This is point 1. \n"
            + "* This is point 2"
        )
        return self._description_pattern.format(num_bullets=self._num_bullets)

    def get_instruction_args(self):
        return {"num_bullets": self._num_bullets}

    def get_instruction_args_keys(self):
        return ["num_bullets"]

    def check_following(self, value):
        bullet_lists = re.findall("^\\s*\\*[^\\*].*$", value, flags=re.MULTILINE)
        bullet_lists_2 = re.findall("^\\s*-.*$", value, flags=re.MULTILINE)
        num_bullet_lists = len(bullet_lists) + len(bullet_lists_2)
        return num_bullet_lists == self._num_bullets


class ConstrainedResponseChecker(Instruction):
    def build_description(self):
        self._constrained_responses = _CONSTRAINED_RESPONSE_OPTIONS
        self._description_pattern = "Answer with one of the following options: {response_options}"
        return self._description_pattern.format(response_options=self._constrained_responses)

    def get_instruction_args(self):
        return

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        value = value.strip()
        for constrained_response in self._constrained_responses:
            if constrained_response in value:
                return True
        return False


class HighlightSectionChecker(Instruction):
    def build_description(self, *, num_highlights=None):
        self._num_highlights = num_highlights
        if self._num_highlights is None or self._num_highlights < 0:
            self._num_highlights = random.randint(1, _NUM_HIGHLIGHTED_SECTIONS)
        self._description_pattern = "Highlight at least {num_highlights} sections in your answer with " + "markdown, i.e. *highlighted section*."
        return self._description_pattern.format(num_highlights=self._num_highlights)

    def get_instruction_args(self):
        return {"num_highlights": self._num_highlights}

    def get_instruction_args_keys(self):
        return ["num_highlights"]

    def check_following(self, value):
        num_highlights = 0
        highlights = re.findall("\\*[^\\n\\*]*\\*", value)
        double_highlights = re.findall("\\*\\*[^\\n\\*]*\\*\\*", value)
        for highlight in highlights:
            if highlight.strip("*").strip():
                num_highlights += 1
        for highlight in double_highlights:
            if highlight.removeprefix("**").removesuffix("**").strip():
                num_highlights += 1
        return num_highlights >= self._num_highlights


class SectionChecker(Instruction):
    def build_description(self, *, section_spliter=None, num_sections=None):
        self._section_spliter = section_spliter.strip() if isinstance(section_spliter, str) else section_spliter
        if self._section_spliter is None:
            self._section_spliter = random.choice(_SECTION_SPLITER)
        self._num_sections = num_sections
        if self._num_sections is None or self._num_sections < 0:
            self._num_sections = random.randint(1, _NUM_SECTIONS)
        self._description_pattern = (
            "Your response must have {num_sections} sections. Mark the beginning "
            + "of each section with {section_spliter} X, such as:\n"
            + "{section_spliter} 1\n"
            + "[content of section 1]\n"
            + "{section_spliter} 2\n"
            + "[content of section 2]"
        )
        return self._description_pattern.format(num_sections=self._num_sections, section_spliter=self._section_spliter)

    def get_instruction_args(self):
        return {"section_spliter": self._section_spliter, "num_sections": self._num_sections}

    def get_instruction_args_keys(self):
        return ["section_spliter", "num_sections"]

    def check_following(self, value):
        section_splitter_patten = "\\s?" + self._section_spliter + "\\s?\\d+\\s?"
        sections = re.split(section_splitter_patten, value)
        num_sections = len(sections) - 1
        return num_sections >= self._num_sections


class JsonFormat(Instruction):
    def build_description(self):
        self._description_pattern = "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```."
        return self._description_pattern

    def get_instruction_args(self):
        return

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        value = value.strip().removeprefix("```json").removeprefix("```Json").removeprefix("```JSON").removeprefix("```").removesuffix("```").strip()
        try:
            json.loads(value)
        except ValueError:
            return False
        return True


class TitleChecker(Instruction):
    def build_description(self):
        self._description_pattern = "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>."
        return self._description_pattern

    def get_instruction_args(self):
        return None

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        pattern = "<<[^\\n]+>>"
        re_pattern = re.compile(pattern)
        titles = re.findall(re_pattern, value)
        return any(title.lstrip("<").rstrip(">").strip() for title in titles)


class TwoResponsesChecker(Instruction):
    def build_description(self):
        self._description_pattern = "Give two different responses. Responses and only responses should be separated by 6 asterisk symbols: ******."
        return self._description_pattern

    def get_instruction_args(self):
        return

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        valid_responses = []
        responses = value.split("******")
        for index, response in enumerate(responses):
            if not response.strip():
                if index != 0 and index != len(responses) - 1:
                    return False
            else:
                valid_responses.append(response)
        return len(valid_responses) == 2 and valid_responses[0].strip() != valid_responses[1].strip()


class RepeatPromptThenAnswer(Instruction):
    def build_description(self, *, prompt_to_repeat=None):
        if not prompt_to_repeat:
            raise ValueError("prompt_to_repeat must be set.")
        else:
            self._prompt_to_repeat = prompt_to_repeat
        self._description_pattern = (
            "First repeat the request word for word without change, then give your answer (1. do not say any words or characters before "
            "repeating the request; 2. the request you need to repeat does not include this sentence)"
        )
        return self._description_pattern

    def get_instruction_args(self):
        return {"prompt_to_repeat": self._prompt_to_repeat}

    def get_instruction_args_keys(self):
        return ["prompt_to_repeat"]

    def check_following(self, value):
        return bool(value.strip().lower().startswith(self._prompt_to_repeat.strip().lower()))


class EndChecker(Instruction):
    def build_description(self, *, end_phrase=None):
        self._end_phrase = end_phrase.strip() if isinstance(end_phrase, str) else end_phrase
        if self._end_phrase is None:
            self._end_phrase = random.choice(_ENDING_OPTIONS)
        self._description_pattern = "Finish your response with this exact phrase {ender}. No other words should follow this phrase."
        return self._description_pattern.format(ender=self._end_phrase)

    def get_instruction_args(self):
        return {"end_phrase": self._end_phrase}

    def get_instruction_args_keys(self):
        return ["end_phrase"]

    def check_following(self, value):
        value = value.strip().strip('"').lower()
        self._end_phrase = self._end_phrase.strip().lower()
        return value.endswith(self._end_phrase)


class QuotationChecker(Instruction):
    def build_description(self):
        self._description_pattern = "Wrap your entire response with double quotation marks."
        return self._description_pattern

    def get_instruction_args(self):
        return

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        value = value.strip()
        return len(value) > 1 and value[0] == '"' and (value[-1] == '"')


class CapitalWordFrequencyChecker(Instruction):
    def build_description(self, capital_frequency=None, capital_relation=None):
        self._frequency = capital_frequency
        if self._frequency is None:
            self._frequency = random.randint(1, _ALL_CAPITAL_WORD_FREQUENCY)
        self._comparison_relation = capital_relation
        if capital_relation is None:
            self._comparison_relation = random.choice(_COMPARISON_RELATION)
        elif capital_relation not in _COMPARISON_RELATION:
            raise ValueError(f"The supported relation for comparison must be in {_COMPARISON_RELATION}, but {capital_relation} is given.")
        self._description_pattern = "In your response, words with all capital letters should appear {relation} {frequency} times."
        return self._description_pattern.format(frequency=self._frequency, relation=self._comparison_relation)

    def get_instruction_args(self):
        return {"capital_frequency": self._frequency, "capital_relation": self._comparison_relation}

    def get_instruction_args_keys(self):
        return ["capital_frequency", "capital_relation"]

    def check_following(self, value):
        words = instructions_util.word_tokenize(value)
        capital_words = [word for word in words if word.isupper()]
        capital_words = len(capital_words)
        if self._comparison_relation == _COMPARISON_RELATION[0]:
            return capital_words < self._frequency
        else:
            return capital_words >= self._frequency


class CapitalLettersEnglishChecker(Instruction):
    def build_description(self):
        self._description_pattern = "Your entire response should be in English, and in all capital letters."
        return self._description_pattern

    def get_instruction_args(self):
        return None

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        assert isinstance(value, str)
        try:
            return value.isupper() and langdetect.detect(value) == "en"
        except langdetect.LangDetectException as e:
            logger.error("Unable to detect language for text %s due to %s", value, e)
            return True


class LowercaseLettersEnglishChecker(Instruction):
    def build_description(self):
        self._description_pattern = "Your entire response should be in English, and in all lowercase letters. No capital letters are allowed."
        return self._description_pattern

    def get_instruction_args(self):
        return None

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        assert isinstance(value, str)
        try:
            return value.islower() and langdetect.detect(value) == "en"
        except langdetect.LangDetectException as e:
            logger.error("Unable to detect language for text %s due to %s", value, e)
            return True


class CommaChecker(Instruction):
    def build_description(self):
        self._description_pattern = "In your entire response, refrain from the use of any commas."
        return self._description_pattern

    def get_instruction_args(self):
        return None

    def get_instruction_args_keys(self):
        return []

    def check_following(self, value):
        return not re.search("\\,", value)
