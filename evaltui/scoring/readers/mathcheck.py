"""The `math` evaluator: answers that are expressions, fractions, LaTeX, intervals and sets,
judged by math-verify (Hugging Face's, the library the field uses) against a LaTeX reference.

What evaltui adds around math-verify is only where the answer is in the reply (`answer_region`):
- a question the model invented after answering ("\\n\\nQuestion: …") is cut off (`reply`);
- the last explicitly marked answer wins: from the last "the answer is" / "Final answer:" /
  "Answer:" on, or from the last box, with the boxes joined to it as one answer ("\\boxed{2}
  and \\boxed{3}", "x = \\boxed{2} or x = \\boxed{3}"; math-verify's own rule would also join
  "\\boxed{16}. Wait, I made an error: \\boxed{18}" for its comma); `#### X` lines are read as
  `\\boxed{X}`;
- a reply that is the answer alone — one line, no `$`, `\\(`, `\\[` nor box, no words but
  inside `\\text{}` (`\\frac{\\pi}{2}`, `6 - 5i`, `(3, 4]`, `y = 2x + 3`) — is read whole, as if boxed.
A reference is read from its last box, or after its last `####`, or whole.

math-verify runs in a worker process (`mathcheck_worker`): its time limits use signal alarms,
which work only in a main thread, and sympy can spend forever in one C call; a worker whose
answer is PROCESS_SECONDS late is killed and the sample is wrong (`extracted`: "(timed out)").
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import time
from contextvars import ContextVar
from types import TracebackType

from ..judgement import Judgement
from . import mathcheck_worker
from .reply import first_follow_up

#: How long one sample may take in the worker (math-verify's own limits are 5 s a parse and 5 s
#: a comparison; two parses and a comparison fit).
PROCESS_SECONDS = 30.0
#: How long the worker may take to import math-verify (sympy: ~0.5 s on an idle machine).
START_SECONDS = 120.0

#: What a sample's `extracted` says when the worker gave up on it.
TIMED_OUT, WORKER_DIED = "(timed out)", "(worker died)"

_WORKER = mathcheck_worker.__file__
_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_PHRASE_RE = re.compile(r"(?i:\bfinal\s+answer\b|\banswer\s+(?:is|would\s+be|should\s+be|will\s+be)\b|\banswer\s*[:：])|答案")
_HASHES_RE = re.compile(r"####[ \t]*(\S[^\n]*?)[ \t]*$", re.MULTILINE)
_DELIMITED_RE = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")
_TEXT_RE = re.compile(r"\\(?:text\w*|mbox|mathrm|operatorname|begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
_WORD_RE = re.compile(r"[A-Za-z]{3,}")
# What may stand between two boxes of one answer: brackets, dollars, a comma or semicolon, "and"
# or "or", and the next box's "x =".
_JOINED_RE = re.compile(r"[\s$(),;]*(?:(?:and|or)\b)?[\s$(),;]*(?:[A-Za-z]\w*\s*=\s*)?[\s$(]*")


class MathVerifyMissing(RuntimeError):
    """The worker could not import math-verify: the plan cannot be scored with `math`."""


def answer_region(reply: str) -> str:
    """The part of `reply` math-verify should read (see the module's doc)."""
    text = _HASHES_RE.sub(lambda m: "\\boxed{" + m.group(1) + "}", reply)
    marks = [m.start() for m in _BOX_RE.finditer(text)] + [m.start() for m in _PHRASE_RE.finditer(text)]
    if marks:
        cut = first_follow_up(text, min(marks))
        if cut is not None:
            text = text[:cut]
    boxes = [m.start() for m in _BOX_RE.finditer(text)]
    phrases = [m.start() for m in _PHRASE_RE.finditer(text)]
    if phrases and (not boxes or phrases[-1] > boxes[-1]):
        return text[phrases[-1]:]
    if boxes:
        return text[_last_box_group(text, boxes):]
    if not boxes and _answer_alone(text):
        return "\\boxed{" + text.strip() + "}"
    return text


def _answer_alone(text: str) -> bool:
    """A reply that is only a mathematical answer: one line, no delimiters, no word of 3 letters
    or more but LaTeX's own (`\\sqrt`, `\\pi`) and what `\\text{}`/`\\mbox{}` hold."""
    line = text.strip()
    if not line or "\n" in line or _DELIMITED_RE.search(line):
        return False
    return _WORD_RE.search(_TEXT_RE.sub("", line)) is None


def _last_box_group(text: str, boxes: list[int]) -> int:
    """Where the last group of joined boxes starts."""
    start = boxes[-1]
    for before in reversed(boxes[:-1]):
        end = _box_end(text, before)
        if end is None or end > start or not _JOINED_RE.fullmatch(text, end, start):
            break
        start = before
    return start


def _box_end(text: str, box: int) -> int | None:
    """Just past the closing brace of the box at `box`; None when it is not closed."""
    depth = 0
    for i in range(text.index("{", box), len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return None


def reference_region(gold: str) -> str:
    """The reference's answer: its last box, else what follows its last `####`, else all of it (boxed)."""
    if _BOX_RE.search(gold):
        return gold
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1]
    gold = gold.strip()
    if gold.startswith("$") and gold.endswith("$") and len(gold) > 1:
        return gold
    return "\\boxed{" + gold + "}"


#: True while a small dataset is scored on the engine's event loop (engine/run/scorer.py): there
#: no worker process may be started, nor waited on for seconds; the scoring goes to a thread instead.
ON_LOOP: ContextVar[bool] = ContextVar("evaltui_scoring_on_loop", default=False)


class NeedsThread(Exception):
    """A scoring on the event loop came to an answer only math-verify's worker can judge."""


class MathChecker:
    """One math-verify worker, started at the first sample and closed at the end (a context manager).

    Not thread-safe: each scoring of a dataset has its own."""

    def __init__(self, *, timeout: float = PROCESS_SECONDS) -> None:
        self.timeout = timeout  # s one sample may take in the worker
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""

    def __enter__(self) -> MathChecker:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def judge(self, prediction: str, gold: str) -> Judgement:
        """math-verify's verdict on the reply's answer; a late or dead worker makes it wrong."""
        return self._judged({"reply": answer_region(prediction), "reference": reference_region(gold)})

    def judge_whole(self, prediction: str, gold: str) -> Judgement:
        """lm-eval's `math_verify` (minerva_math): math-verify's defaults on the whole reply and
        the whole reference solution, nothing read by evaltui first."""
        return self._judged({"reply": prediction, "reference": gold, "whole": True})

    def _judged(self, question: dict[str, object]) -> Judgement:
        request = json.dumps(question).encode() + b"\n"
        proc = self._started()
        try:
            assert proc.stdin is not None
            proc.stdin.write(request)
            proc.stdin.flush()
            answer = self._line(self.timeout)
        except (OSError, TimeoutError) as e:
            self.close()
            return Judgement(TIMED_OUT if isinstance(e, TimeoutError) else WORKER_DIED, False)
        verdict = json.loads(answer)
        return Judgement(verdict.get("extracted"), verdict.get("correct") is True)

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None:
            return self._proc
        if ON_LOOP.get():
            raise NeedsThread("math-verify's worker is not started on the event loop")
        # A bare environment (no API keys): the worker reads model text with sympy, whose parser
        # evaluates what it reads. It imports what this interpreter imports, from the same paths.
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-u", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True
        )
        self._buffer = b""
        try:
            hello = json.loads(self._line(START_SECONDS))
        except (OSError, TimeoutError, ValueError) as e:
            self.close()
            raise MathVerifyMissing(f"the math evaluator's worker did not start ({e})") from None
        if not hello.get("ready"):
            self.close()
            raise MathVerifyMissing(f"evaluator type 'math' needs the math-verify package ({hello.get('error')}): pip install math-verify")
        return self._proc

    def _line(self, timeout: float) -> bytes:
        """The worker's next line, or TimeoutError after `timeout` s, OSError if it ended."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("the math-verify worker did not answer in time")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise OSError("the math-verify worker ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        """End the worker (its stdin closed first, so it ends by itself; killed if it does not)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
