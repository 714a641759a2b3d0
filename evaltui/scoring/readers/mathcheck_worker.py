"""The `math` evaluator's worker: run as a script (`python mathcheck_worker.py`) by `mathcheck`,
it imports math-verify once and judges one (reply, reference) pair per line of its stdin.

Why a process of its own: math-verify bounds its parsing and comparing with `signal.alarm`,
which works only in a main thread (evaltui scores in worker threads), and sympy can spend
forever inside one C call (`9^{9^{9^9}}`), where no signal lands: here the alarms work, and
evaltui kills the worker when an answer is late. It also keeps sympy (~0.5 s to import, ~100 MB)
out of evaltui's own process and off every plan that does not use it.

Protocol: the worker writes one line `{"ready": true}` (or `{"error": "..."}` and exits) once
math-verify is imported; then, for each request line `{"reply": ..., "reference": ...}` (with
`"whole": true`: lm-eval's reading, math-verify's defaults on the whole texts), one answer line
`{"extracted": str | null, "correct": bool}`. It ends at the end of its stdin.
"""

from __future__ import annotations

import json
import resource
import sys
from functools import lru_cache
from typing import Any

#: math-verify's own bounds on one parse and one comparison (its alarms), in seconds.
PARSE_SECONDS = 5
COMPARE_SECONDS = 5
#: Address space the worker may use: sympy asked for 10^(10^10) runs out of it (MemoryError,
#: which math-verify reports as no match) instead of taking the machine's memory.
MEMORY_BYTES = 4 * 2**30


def _answer(line: bytes, judge: Any, whole: Any = None) -> bytes:
    try:
        request = json.loads(line)
        chosen = whole if request.get("whole") and whole is not None else judge
        extracted, correct = chosen(str(request["reply"]), str(request["reference"]))
    except Exception as e:  # one bad line is that sample's failure, not the worker's
        extracted, correct = f"(not judged: {type(e).__name__})", False
    return json.dumps({"extracted": extracted, "correct": bool(correct)}).encode() + b"\n"


def _make_judge() -> Any:
    """The judge: math-verify's parse of the reply (its last box, its answer phrases, its LaTeX)
    verified against the parsed reference; the reference parsed once however many replies share it."""
    import logging

    from latex2sympy2_extended import NormalizationConfig
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    logging.disable(logging.WARNING)  # its timeouts are verdicts here, not news for stderr
    # boxed="last": the last box (and the boxes joined to it by "and", "or", a comma) is the
    # answer, not every box of the reply (math-verify's default, "all", reads a box, a second
    # thought and a corrected box as a set of both)
    latex = LatexExtractionConfig(
        normalization_config=NormalizationConfig(basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="last", equations=False)
    )
    targets = (latex, ExprExtractionConfig())

    @lru_cache(maxsize=64)
    def reference(text: str) -> list[Any]:
        return list(parse(text, targets, parsing_timeout=PARSE_SECONDS))

    def judge(reply: str, gold: str) -> tuple[str | None, bool]:
        want = reference(gold)
        got = parse(reply, targets, parsing_timeout=PARSE_SECONDS)
        if not got:
            return None, False
        extracted = got[-1] if isinstance(got[-1], str) else None  # the text it read, as written
        correct = bool(want) and verify(want, got, timeout_seconds=COMPARE_SECONDS)
        return extracted, correct

    return judge


def _make_whole_judge() -> Any:
    """lm-eval's `math_verify` metric (minerva_math): math-verify's default reading of the whole
    reply against its default reading of the whole reference solution, its default limits."""
    from math_verify import parse, verify

    @lru_cache(maxsize=64)
    def reference(text: str) -> list[Any]:
        return list(parse(text))

    def judge(reply: str, gold: str) -> tuple[str | None, bool]:
        got = parse(reply)
        extracted = got[-1] if got and isinstance(got[-1], str) else None
        return extracted, bool(verify(reference(gold), got))

    return judge


def main() -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    except (ValueError, OSError):  # a lower limit is already in force: keep it
        pass
    out = sys.stdout.buffer
    try:
        judge, whole = _make_judge(), _make_whole_judge()
    except Exception as e:  # math-verify missing or broken: said once, in evaltui's words
        out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode() + b"\n")
        out.flush()
        return
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        out.write(_answer(line, judge, whole))
        out.flush()


if __name__ == "__main__":
    main()
