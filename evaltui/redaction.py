"""What counts as a secret in a plan, what stands in its place wherever it would be shown, and the
masking itself.

Low in the package (the plan, the backends and the engine all mask secrets), so the backends
need not import the plan to know the mask.

A server, a proxy or an HTTP library may repeat a request back in an error message (OpenAI's
"Incorrect API key provided: sk-abc*****wxyz", a proxy's dump of the headers or the URL it got, a
client library's "invalid header value b'Bearer …'"), and failure messages go to checkpoints,
results, logs/failures.jsonl and the screen. So each one is cleaned before it is kept: every run
of 8 or more characters of a key — a prefix, a suffix, a middle — as sent, URL-encoded or
JSON-escaped, becomes `[redacted]`; a key shorter than 8 characters is masked where it stands
alone. Only failure text is cleaned, never a successful reply: the cost is paid per failure.

And a process holding a key can make its memory and environment unreadable to the model-written
code code_exec runs (`undumpable`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
# A custom header whose name says it carries a credential (Azure's `api-key`, `x-api-key`, a
# session cookie): its value is kept out of the work dir's plan.toml and masked in failure messages.
SECRET_HEADER_RE = re.compile(r"key|token|secret|auth|cookie|password", re.IGNORECASE)
#: The shortest piece of a key that counts as a leak (the promise of README/RELIABILITY.md).
RUN = 8


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every run of ≥ 8 characters of any secret (in any form it is echoed in) masked."""
    if not secrets or not text:
        return text
    return _redactor(secrets).clean(text)


def _forms(secret: str) -> set[str]:
    """The ways a secret comes back: as sent and trimmed, Python- and JSON-escaped, URL-encoded
    (with upper- or lower-case hex, `+` or `%20` for a space) — and, for a key with characters
    beyond ASCII, as a server that read its UTF-8 bytes as Latin-1 or Windows-1252 shows them
    (`ключ` as `ÐºÐ»Ñ\x8eÑ\x87`: HTTP headers are Latin-1 to most servers), or as Python's bytes
    repr (`\\xd0\\xba`). Each also with its whitespace runs as one space, as a failure message is
    put on one line before it is masked (U+0085 and U+00A0 are whitespace to Python)."""
    texts = {secret}
    if not secret.isascii():
        raw = secret.encode("utf-8", "surrogatepass")
        texts |= {raw.decode("latin-1"), _windows_1252(raw), repr(raw)[2:-1]}
    forms: set[str] = set()
    for text in texts:
        forms |= {text, text.strip(), repr(text)[1:-1], json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
        for encoded in (quote(text, safe=""), quote_plus(text, safe=""), quote(text)):
            forms |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)}
    forms |= {" ".join(f.split()) for f in forms}
    return {f for f in forms if f}


def _windows_1252(raw: bytes) -> str:
    """`raw` read as a browser reads Windows-1252: the five bytes it leaves undefined as Latin-1."""
    return "".join(bytes([b]).decode("cp1252", "strict") if b not in _CP1252_HOLES else chr(b) for b in raw)


_CP1252_HOLES = frozenset({0x81, 0x8D, 0x8F, 0x90, 0x9D})


class _Redactor:
    """The 8-character windows of every form of the secrets, in one set: a text position starts
    a leak when the 8 characters there are one of them, and overlapping windows merge."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {f for s in secrets for f in _forms(s)}
        self.grams = frozenset(f[i : i + RUN] for f in forms if len(f) >= RUN for i in range(len(f) - RUN + 1))
        short = sorted((f for f in forms if len(f) < RUN), key=len, reverse=True)
        # A short secret (a 5-character token) is masked where it stands alone, not inside "500".
        self.short = re.compile("|".join(rf"(?<![A-Za-z0-9]){re.escape(f)}(?![A-Za-z0-9])" for f in short)) if short else None

    def clean(self, text: str) -> str:
        spans: list[list[int]] = []
        grams = self.grams
        for i in range(len(text) - RUN + 1):
            if text[i : i + RUN] in grams:
                if spans and spans[-1][1] >= i:
                    spans[-1][1] = i + RUN
                else:
                    spans.append([i, i + RUN])
        if spans:
            pieces, at = [], 0
            for start, end in spans:
                pieces += [text[at:start], REDACTED]
                at = end
            text = "".join(pieces) + text[at:]
        if self.short is not None:
            text = self.short.sub(REDACTED, text)
        return text


@lru_cache(maxsize=64)
def _redactor(secrets: tuple[str, ...]) -> _Redactor:
    """Built once per model's secrets (a few hundred windows), used for each of its failures."""
    return _Redactor(secrets)


def undumpable() -> None:
    """Make this process's /proc files (environ, memory) unreadable to other processes of the same user.

    Model-written code that code_exec runs gets a bare environment, but any process of the same
    user can read another's environment (API keys included) from /proc — unless that process is
    not dumpable, whose /proc files then belong to root. Called by the command line for a plan
    with code_exec (not by the engine a test or an app may embed), and by every Ray actor, which
    holds a model's key (a side effect: attaching a debugger needs root)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # no prctl: nothing to hide behind
        ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE
