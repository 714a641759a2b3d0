"""Multiple choice: find the option letter (A-Z) a free-text answer settles on.

A question the model invented after it began answering ("\\n\\nQuestion: …") is not read
(`reply.first_follow_up`). Then, precedence, first hit wins:
  1. the last explicit statement: "\\boxed{C}", "<answer>C</answer>", "answer is (C)", "The answer
     would be C", "Answer: C", "The answer I think is C", "correct option is C", "答案是 C", or a
     second thought ("The answer is B. Wait, actually it's C." is C);
  2. a letter declared right: "B is correct", "(B) is the correct answer", "C is the best option";
  3. a reply that is only the letter, of either case: "D", "(D)", "D.", "D)", "D:", "d";
  4. a reply that opens with the letter as a label: "B. Paris", "B) Paris", "(B) Paris", "B — Paris";
  5. else the last letter named as a pick ("option B", "I think B", "I think it's D", "I'd go
     with B") or standing alone between punctuation or line boundaries ("... so it must be (B)") -
     a letter followed by a word ("Between A and") is not taken, nor letters of "U.S.".
An unbracketed "I" followed by a lowercase word is the pronoun ("The answer I think is B"),
never an option; an "A" followed by one, unless a verb puts it as the answer ("The answer is
A because…"), may be the article ("Answer: A lot…") and is taken only when nothing else in the
reply names a letter.
Markdown emphasis (`**C**`, backticks) is removed first.  A reply with no letter gives None.
The letter must be a capital (but for a reply that is the letter alone, or inside an answer
tag); only the surrounding words are matched case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..judgement import Judgement
from .reply import first_follow_up, may_follow_up

_LETTER = r"[(\[]?[^\S\n]*(?P<letter>[A-Z])[^\S\n]*[)\]]?(?![A-Za-z0-9])"
_VERB = r"(?:is|was|would\s+be|should\s+be|will\s+be|must\s+be|be)"
_EXPLICIT_RE = re.compile(
    r"(?i:\banswer\b|\b(?:correct|right|best)\s+(?:option|choice)\b|答案)"
    # a few words may stand between the noun and its verb: "The answer, I believe, is C"
    r"(?P<verb>(?i:(?:[^\S\n]*,?[^\S\n]+[A-Za-z']+){1,5}?,?[^\S\n]+" + _VERB + r")"
    r"|(?i:[^\S\n]+" + _VERB + r")|[^\S\n]*(?:是|为))?"
    r"[^\S\n]*[:：]?\s*(?i:option\s+|choice\s+)?" + _LETTER
)
_IS_CORRECT_RE = re.compile(
    r"(?<![A-Za-z0-9])" + _LETTER
    + r"[^\S\n]+(?i:is[^\S\n]+(?:the[^\S\n]+)?(?:correct|right|best)(?:[^\S\n]+(?:answer|option|choice))?)\b"
)
_BOXED_RE = re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?\(?(?P<letter>[A-Z])\)?\s*\}")
_TAG_RE = re.compile(r"<answer>\s*[(\[]?\s*(?P<letter>[A-Za-z])\s*[)\].:]?(?:\s|</answer>)", re.IGNORECASE)
# A second thought: "Wait, actually it's C", "No, C", "Correction: make that C".
_REVISION_RE = re.compile(
    r"(?i:\b(?:actually|wait|correction|on\s+second\s+thought|no)\b[,:.!]?[^\S\n]+"
    r"(?:(?:it'?s|it\s+is|it\s+(?:should|must|would)\s+be|make\s+that|rather|I'?ll\s+(?:go\s+with|pick|choose|say))[^\S\n]+)?)"
    + _LETTER
)
_ONLY_RE = re.compile(r"\A\s*[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:)]?\s*\Z")
_LEADING_RE = re.compile(r"\A\s*(?:[(\[]\s*([A-Z])\s*[)\]]|([A-Z])[.)]|([A-Z])[^\S\n]*[—–-])(?=\s|\Z)")
# A pick: the letter after a word that names one ("option B is plausible", "I'd choose C because",
# "I think it's D").
_PICK_RE = re.compile(
    r"(?i:\b(?:option|choice|think|guess|pick|choose|select|say|go\s+(?:with|for)|lean\s+(?:to|towards))[^\S\n]+"
    r"(?:(?:it'?s|it\s+is|that\s+it'?s)[^\S\n]+)?|\bit'?s[^\S\n]+)"
    + _LETTER
)
# Left: line start, whitespace, an opening bracket or quote.  Right: a closing bracket,
# a quote, sentence punctuation not followed by more letters, or the end of the line.
_STANDALONE_RE = re.compile(
    r"(?:^|(?<=[\s(\[\"']))([A-Z])(?=[)\]\"']|[.,:;!?](?![A-Za-z0-9])|[ \t]*$)", re.MULTILINE
)
_MARKUP_RE = re.compile(r"[*`]")
_GOLD_RE = re.compile(r"\A\s*[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:)]?\s*\Z")
_WORD_AFTER_RE = re.compile(r"[^\S\n]+[a-z]|'[a-z]")


def _as_word(text: str, match: re.Match[str]) -> str:
    """"I" when the matched letter reads as the pronoun, "A" when it may be the article, else ""."""
    letter = match.group("letter")
    start, end = match.span("letter")
    if letter not in "IA" or (start > 0 and text[start - 1] in "([") or _WORD_AFTER_RE.match(text, end) is None:
        return ""
    if letter == "A" and match.groupdict().get("verb"):
        return ""  # "The answer is A because …"
    return letter


def _marked(text: str) -> str | None:
    """The last explicit statement (a box, an answer tag, an answer phrase, a second thought)
    whose letter is not a pronoun or article."""
    found = [(m.start(), m.group("letter")) for m in _BOXED_RE.finditer(text)]
    found += [(m.start(), m.group("letter").upper()) for m in _TAG_RE.finditer(text)]
    for regex in (_EXPLICIT_RE, _REVISION_RE):
        if _may_hold(text, regex):
            found += [(m.start("letter"), m.group("letter")) for m in regex.finditer(text) if not _as_word(text, m)]
    return max(found)[1] if found else None


# Words without which a regex cannot match: a cheap test first (its scan cost ~30 µs a reply).
_NEEDS = {
    id(_EXPLICIT_RE): ("nswer", "NSWER", "ption", "PTION", "hoice", "HOICE", "答案"),
    id(_REVISION_RE): ("ctually", "CTUALLY", "ait", "AIT", "orrection", "ORRECTION", "econd", "ECOND", "no", "No", "NO"),
}


def _may_hold(text: str, regex: re.Pattern[str]) -> bool:
    return any(word in text for word in _NEEDS[id(regex)])


def _answered(text: str) -> str:
    """The reply up to a question the model invented after it began answering."""
    if not may_follow_up(text):  # the usual reply
        return text
    explicit = _EXPLICIT_RE.search(text) if _may_hold(text, _EXPLICIT_RE) else None
    begun = [m.start() for m in (explicit, _BOXED_RE.search(text), _TAG_RE.search(text), _STANDALONE_RE.search(text)) if m]
    cut = first_follow_up(text, min(begun)) if begun else None
    return text if cut is None else text[:cut]


def _declared(text: str) -> str | None:
    declared = _IS_CORRECT_RE.search(text)
    return declared.group("letter") if declared else None


def _whole(regex: re.Pattern[str]) -> Callable[[str], str | None]:
    """A rule for a reply `regex` matches as a whole (the letter is in whichever group took part)."""

    def rule(text: str) -> str | None:
        whole = regex.search(text)
        return next(group for group in whole.groups() if group).upper() if whole else None

    return rule


def _last_named(text: str) -> str | None:
    """The last letter named as a pick or standing alone (an unbracketed "I" is the pronoun)."""
    found: tuple[int, str] | None = None
    for match in _PICK_RE.finditer(text):
        if not _as_word(text, match):
            found = max(found or (-1, ""), (match.start("letter"), match.group("letter")))
    for match in _STANDALONE_RE.finditer(text):
        letter, start = match.group(1), match.start(1)
        if letter == "I" and not (start > 0 and text[start - 1] in "(["):
            continue
        found = max(found or (-1, ""), (start, letter))
    return found[1] if found else None


def _article(text: str) -> str | None:
    """"A" when a statement or pick gave it but it may be the article: taken only as the last resort."""
    if "A" not in text:  # the usual reply by now: no need to run the two regexes again
        return None
    for regex in (_EXPLICIT_RE, _PICK_RE):
        if any(_as_word(text, m) == "A" for m in regex.finditer(text)):
            return "A"
    return None


# The precedence of the module's docstring: the first rule that finds a letter wins.
_RULES: tuple[Callable[[str], str | None], ...] = (
    _marked,
    _declared,
    _whole(_ONLY_RE),
    _whole(_LEADING_RE),
    _last_named,
    _article,
)


def extract_choice(text: str) -> str | None:
    text = _answered(_MARKUP_RE.sub("", text))
    for rule in _RULES:
        letter = rule(text)
        if letter:
            return letter
    return None


def gold_letter(gold: str) -> str | None:
    """References are written "C", "c", "(C)" or "C." - or occasionally as a sentence."""
    match = _GOLD_RE.match(gold)
    if match:
        return match.group(1).upper()
    return extract_choice(gold)


def judge_choice(prediction: str, gold: str) -> Judgement:
    extracted = extract_choice(prediction)
    want = gold_letter(gold)
    return Judgement(extracted, extracted is not None and extracted == want)
