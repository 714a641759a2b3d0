"""What a simulated model knows, and how it decides to be right or wrong.

Everything here is a pure function of (model name, prompt, key) so that a test
elsewhere can predict the exact score a run must reach: `answers_correctly`
is the single decision rule, and wrong answers are derived deterministically
from the right ones so evaluators are guaranteed to mark them wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import zlib
from decimal import Decimal
from functools import lru_cache
from typing import Any

from evaltui.conversation.text import user_texts

BOS_ID = 1
VOCAB = 32000
DONT_KNOW = "I don't know."
WRONG_CODE = '    assert False, "simulated wrong answer"\n'

#: Log-probs per token; the gaps are wide enough that the mean over a whole
#: prompt+choice text always ranks the preferred choice first, and so does the sum over a
#: choice's own tokens (lm-eval's loglikelihood), also over their length, unless the preferred
#: choice has 40 times the tokens of another.
LP_PROMPT = -1.0
LP_PREFERRED = -0.05
LP_OTHER = -2.0
LP_GENERATED = -0.25

# Every character belongs to exactly one piece, so "".join(tokenize(t)) == t
# and text offsets can be computed by summing piece lengths.
_TOKEN_RE = re.compile(r"\s*\S+|\s+")
_NUMBER_RE = re.compile(r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?")
_INDENTED_LINE_RE = re.compile(r"^[ \t]+\S", re.M)


def answers_correctly(model: str, prompt: str, accuracy: float, seed: int | None = None) -> bool:
    """Whether `model` answers `prompt` right; the one rule tests predict scores with.

    `seed`: a sampled request's (see `sampling_seed`); each seed draws anew, as sampling at a
    temperature does, and None (greedy decoding, or no seed sent) keeps the one answer."""
    if accuracy >= 1:
        return True
    if accuracy <= 0:
        return False
    text = f"{model}\0{prompt}" if seed is None else f"{model}\0{prompt}\0{seed}"
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < accuracy


def tokenize(text: str) -> list[str]:
    """Whitespace-attached word pieces: cheap, deterministic and lossless."""
    return _TOKEN_RE.findall(text)


@lru_cache(maxsize=65536)
def token_id(piece: str) -> int:
    """Stable id in [3, 32003); 0-2 stay free for special tokens like BOS."""
    return zlib.crc32(piece.encode("utf-8")) % VOCAB + 3


def truncate(text: str, max_tokens: int | None) -> tuple[str, int, str]:
    """Cut generated text to `max_tokens` pieces: (text, n_tokens, finish_reason)."""
    pieces = tokenize(text)
    if max_tokens is not None and len(pieces) > max_tokens:
        return "".join(pieces[:max_tokens]), max_tokens, "length"
    return text, len(pieces), "stop"


def wrong_answer(answer: str) -> str:
    """A deterministic answer that an evaluator must mark wrong."""
    stripped = answer.strip()
    if len(stripped) == 1 and "A" <= stripped <= "Z":
        if stripped in "ABCD":
            nxt = "ABCD"[("ABCD".index(stripped) + 1) % 4]
        else:
            nxt = chr((ord(stripped) - ord("A") + 1) % 26 + ord("A"))
        result = answer.replace(stripped, nxt)
    elif _INDENTED_LINE_RE.search(answer) or "return" in answer or "def " in answer:
        result = WRONG_CODE
    else:
        matches = list(_NUMBER_RE.finditer(answer))
        if matches:
            m = matches[-1]
            start = m.start()
            negative = start > 0 and answer[start - 1] == "-" and (
                start == 1 or not answer[start - 2].isalnum()
            )
            if negative:
                start -= 1
            result = answer[:start] + _plus_one(m.group(), negative) + answer[m.end():]
        else:
            result = DONT_KNOW
    if result == answer:  # only if the right answer is itself "I don't know." or similar
        result = "I know." if answer == DONT_KNOW else DONT_KNOW
    return result


def _plus_one(number: str, negative: bool) -> str:
    grouped = "," in number
    digits = number.replace(",", "")
    _, _, frac = digits.partition(".")
    value = Decimal(("-" if negative else "") + digits) + 1
    spec = ("," if grouped else "") + (f".{len(frac)}f" if frac else "f")
    return format(value.quantize(Decimal(1).scaleb(-len(frac))), spec)


class AnswerKey:
    """The prompts a simulated model knows, with their right answers.

    Generation entries map a prompt to its answer text. PPL entries map a
    prompt to candidate continuations; scoring asks about the full text
    prompt + choice, so we also index those texts.
    """

    def __init__(self) -> None:
        self._gen: dict[str, str] = {}
        self._ppl: dict[str, tuple[list[str], int]] = {}
        self._ppl_texts: dict[str, tuple[str, int]] = {}

    def __len__(self) -> int:
        return len(self._gen) + len(self._ppl)

    def __repr__(self) -> str:
        return f"AnswerKey(gen={len(self._gen)}, ppl={len(self._ppl)})"

    def add_gen(self, prompt: str, answer: str) -> None:
        if not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string, got {type(prompt).__name__}")
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            raise ValueError(f"answer must be a string, got {type(answer).__name__}")
        self._gen[prompt] = answer

    def add_ppl(self, prompt: str, choices: list[str], answer: str) -> None:
        if not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string, got {type(prompt).__name__}")
        if not isinstance(choices, (list, tuple)) or not choices or not all(
            isinstance(c, str) for c in choices
        ):
            raise ValueError("choices must be a non-empty list of strings")
        if answer not in choices:
            raise ValueError(f"answer {answer!r} is not one of the choices {list(choices)!r}")
        choices = list(choices)
        self._ppl[prompt] = (choices, choices.index(answer))
        for i, choice in enumerate(choices):
            self._ppl_texts.setdefault(prompt + choice, (prompt, i))

    def gen_answer(self, prompt: str) -> str | None:
        return self._gen.get(prompt)

    def match_ppl(self, text: str) -> tuple[str, list[str], int, int] | None:
        """(prompt, choices, choice index of `text`, right index) if text = prompt + choice."""
        hit = self._ppl_texts.get(text)
        if hit is None:
            return None
        prompt, idx = hit
        choices, right = self._ppl[prompt]
        return prompt, choices, idx, right

    def load_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Add every line of a JSONL key file ("-": standard input); returns how many were read.

        Standard input lets the evaltui runner hand the key over without a file on disk, where
        every prompt and reference would outlive a killed run.
        """
        count = 0
        with (open(sys.stdin.fileno(), encoding="utf-8", closefd=False) if os.fspath(path) == "-" else open(path, encoding="utf-8")) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    if not isinstance(rec, dict) or "prompt" not in rec or "answer" not in rec:
                        raise ValueError('expected an object with "prompt" and "answer"')
                    if "choices" in rec:
                        self.add_ppl(rec["prompt"], rec["choices"], rec["answer"])
                    else:
                        self.add_gen(rec["prompt"], rec["answer"])
                except ValueError as exc:  # json.JSONDecodeError is a ValueError
                    raise ValueError(f"{os.fspath(path)}:{lineno}: {exc}") from None
                count += 1
        return count

    def dump_jsonl(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            for prompt, answer in self._gen.items():
                fh.write(json.dumps({"prompt": prompt, "answer": answer}, ensure_ascii=False) + "\n")
            for prompt, (choices, right) in self._ppl.items():
                rec = {"prompt": prompt, "choices": choices, "answer": choices[right]}
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def sampling_seed(params: dict[str, Any]) -> int | None:
    """The seed a request samples with: its `seed` when it samples (OpenAI: temperature > 0;
    LightLLM: do_sample), else None — a greedy server gives one answer whatever the seed."""
    seed = params.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        return None
    temperature = params.get("temperature", 1.0)
    sampled = params["do_sample"] is True if "do_sample" in params else isinstance(temperature, (int, float)) and temperature > 0
    return seed if sampled else None


def asked(key: AnswerKey, questions: list[str]) -> str:
    """What a conversation is answered as: its latest user message the key knows (a second turn
    it does not know, or self_critique's revision, asks again about the question before), else
    its last one."""
    return next((q for q in reversed(questions) if key.gen_answer(q) is not None), questions[-1])


_SUBMISSION_RE = re.compile(r"\[Submission\]: (.*?)\n\*\*\*", re.S)
_CRITERION_RE = re.compile(r"\[(?:Criterion|Expert)\]: (.*?)\n\*\*\*", re.S)


def judge_reply(prompt: str) -> str | None:
    """A judge's reply to Inspect AI's grading prompts (model_graded_qa, model_graded_fact), by a
    rule a test predicts: `GRADE: C` when the submission holds the criterion (case and spacing
    aside), else `GRADE: I`, after a line of reasoning as the instructions ask; None for another prompt."""
    submission, criterion = _SUBMISSION_RE.search(prompt), _CRITERION_RE.search(prompt)
    if submission is None or criterion is None:
        return None
    wanted = " ".join(criterion.group(1).split()).lower()
    holds = bool(wanted) and wanted in " ".join(submission.group(1).split()).lower()
    return f"The criterion is {wanted!r}; the submission {'states' if holds else 'does not state'} it.\n\nGRADE: {'C' if holds else 'I'}"


_ANSWER_START, _ANSWER_END = "[The Start of Assistant's Answer]\n", "\n[The End of Assistant's Answer]"
_LAST_ANSWER, _CONVERSATION_END = "### Assistant A:\n", "\n\n<|The End of Assistant A's Conversation with User|>"


def rating_reply(prompt: str) -> str | None:
    """A judge's reply to FastChat's single-answer prompts (MT-Bench), by a rule a test predicts:
    the rating is 1 + the last number of the answer judged (the turn's own; the conversation's
    last) modulo 10, 1 without a number; None for another prompt."""
    if _ANSWER_START in prompt and _ANSWER_END in prompt:
        judged = prompt.split(_ANSWER_START, 1)[1].split(_ANSWER_END, 1)[0]
    elif _CONVERSATION_END in prompt and _LAST_ANSWER in prompt:
        judged = prompt.rsplit(_LAST_ANSWER, 1)[1].split(_CONVERSATION_END, 1)[0]
    else:
        return None
    numbers = re.findall(r"\d+", judged)
    rating = 1 + int(numbers[-1]) % 10 if numbers else 1
    return f"The answer ends on {numbers[-1] if numbers else 'no number'}.\n\nRating: [[{rating}]]"


_A = ("[The Start of Assistant A's Answer]\n", "\n[The End of Assistant A's Answer]")
_B = ("[The Start of Assistant B's Answer]\n", "\n[The End of Assistant B's Answer]")


def pair_reply(prompt: str) -> str | None:
    """A judge's reply to FastChat's pair-v2 prompt, by a rule a test predicts: the answer whose
    last number is larger wins; equal ones go to A (a position bias, which asking in both orders
    cancels); None for another prompt."""
    if _A[0] not in prompt or _B[0] not in prompt:
        return None
    a, b = (prompt.split(start, 1)[1].split(end, 1)[0] for start, end in (_A, _B))
    na, nb = (int(found[-1]) if (found := re.findall(r"\d+", text)) else -1 for text in (a, b))
    return f"A ends on {na}, B on {nb}.\n\n[[{'A' if na >= nb else 'B'}]]"


_ARENA_A = ("<|The Start of Assistant A's Answer|>\n", "\n<|The End of Assistant A's Answer|>")
_ARENA_B = ("<|The Start of Assistant B's Answer|>\n", "\n<|The End of Assistant B's Answer|>")


def arena_reply(prompt: str) -> str | None:
    """A judge's reply to ArenaHard's prompt, by a rule a test predicts: the answers' last numbers
    compared (A's larger by 5 or more: [[A>>B]], by less: [[A>B]], equal: [[A=B]], and so for B);
    the reply quotes every label before its verdict, so only a reader of the last label reads it
    right. None for another prompt."""
    if _ARENA_A[0] not in prompt or _ARENA_B[0] not in prompt:
        return None
    a, b = (prompt.split(start, 1)[1].split(end, 1)[0] for start, end in (_ARENA_A, _ARENA_B))
    na, nb = (int(found[-1]) if (found := re.findall(r"\d+", text)) else -1 for text in (a, b))
    d = na - nb
    label = "A>>B" if d >= 5 else "A>B" if d > 0 else "A=B" if d == 0 else "B>A" if d > -5 else "B>>A"
    return f"A ends on {na}, B on {nb} (labels: [[A>>B]], [[A>B]], [[A=B]], [[B>A]], [[B>>A]]).\n\nMy final verdict is: [[{label}]]"


def generate(key: AnswerKey, model: str, prompt: str, accuracy: float, seed: int | None = None) -> str:
    """The full (untruncated) reply of `model` to `prompt` (sampled with `seed`, when not None);
    a prompt that is a conversation written as one text (evaltui.conversation.text) is answered
    as its latest user message the key knows; a grading prompt it does not know is graded
    (`judge_reply`): any simulated model can judge."""
    answer = key.gen_answer(prompt)
    if answer is None:
        graded = judge_reply(prompt) or rating_reply(prompt) or pair_reply(prompt) or arena_reply(prompt)
        if graded is not None:
            return graded
        turns = user_texts(prompt)
        if not turns:
            return DONT_KNOW
        prompt = asked(key, turns)
        answer = key.gen_answer(prompt)
    if answer is None:
        return DONT_KNOW
    if answers_correctly(model, prompt, accuracy, seed):
        return answer
    return wrong_answer(answer)


def text_logprobs(key: AnswerKey, model: str, text: str, accuracy: float) -> tuple[list[str], list[float]]:
    """Pieces of `text` and the log-prob the model gives each one.

    If `text` is a keyed prompt + choice, pieces that contain any character
    of the choice score LP_PREFERRED for the model's preferred choice and
    LP_OTHER for the rest; everything else scores LP_PROMPT.
    """
    pieces = tokenize(text)
    lps = [LP_PROMPT] * len(pieces)
    hit = key.match_ppl(text)
    if hit is not None:
        prompt, choices, idx, right = hit
        preferred = right if answers_correctly(model, prompt, accuracy) else (right + 1) % len(choices)
        lp = LP_PREFERRED if idx == preferred else LP_OTHER
        end, boundary = 0, len(prompt)
        for i, piece in enumerate(pieces):
            end += len(piece)
            if end > boundary:
                lps[i] = lp
    return pieces, lps
