"""No 8 characters of a key survive in a failure message (RELIABILITY.md §6): the whole key, its
first 12 characters as OpenAI's errors print them, a prefix, a suffix, a middle, and the key
URL-encoded or JSON-escaped, as proxies and servers echo it; a key shorter than 8 is masked whole."""

from __future__ import annotations

import json
import random
import string
from urllib.parse import quote, quote_plus

import pytest

from evaltui.redaction import REDACTED as MASK
from evaltui.redaction import redact

KEY = "sk-Tq8+Zr/Wm=Kp\"Hd\\Ux" + "".join(random.Random(3).choices(string.ascii_letters + string.digits, k=30))
FORMS = {
    "raw": KEY,
    "url-encoded": quote(KEY, safe=""),
    "url-encoded, lower-case hex": quote(KEY, safe="").replace("%2B", "%2b").replace("%2F", "%2f"),
    "form-encoded": quote_plus(KEY),
    "json-escaped": json.dumps(KEY)[1:-1],
}


def windows(text: str, n: int = 8) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def leaked(out: str) -> list[str]:
    return sorted(w for form in FORMS.values() for w in windows(form) if w in out)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("part", "cut"),
    [("whole", slice(None)), ("openai's first 12", slice(0, 12)), ("prefix of 20", slice(0, 20)), ("suffix of 9", slice(-9, None)), ("middle of 8", slice(17, 25))],
)
def test_no_run_of_eight_characters_of_the_key_survives(form: str, part: str, cut: slice) -> None:
    piece = FORMS[form][cut]
    text = f"Incorrect API key provided: {piece}****. You can find your API key at https://example.invalid/keys."
    out = redact(text, (KEY,))
    assert leaked(out) == [], (part, form, out)
    assert MASK in out
    assert out.startswith("Incorrect API key provided: ") and out.endswith("find your API key at https://example.invalid/keys.")


def test_pieces_of_several_keys_side_by_side_are_all_masked() -> None:
    other = "hdr-" + "".join(random.Random(4).choices(string.ascii_letters, k=24))
    out = redact(f"{KEY[:10]}{other[-12:]} and {other[3:14]}", (KEY, other))
    assert out.count(MASK) >= 2 and not [w for w in windows(other) if w in out] and leaked(out) == []


def test_text_without_the_key_is_unchanged() -> None:
    text = "500 Internal Server Error: upstream model crashed (sk- prefix mentioned, 7 chars: sk-Tq8+)"
    assert redact(text, (KEY,)) == text
    assert redact(text, ()) == text


def test_a_key_shorter_than_eight_characters_is_masked_whole_but_not_inside_other_words() -> None:
    assert redact("the key abc12 was refused; abc12!", ("abc12",)) == f"the key {MASK} was refused; {MASK}!"
    assert redact("status 500, token 1", ("1",)) == f"status 500, token {MASK}"


WIDE_KEY = "sk-ключ-доступа-" + "".join(random.Random(5).choices(string.ascii_letters, k=12))
_RAW = WIDE_KEY.encode()
WIDE_FORMS = {
    "as sent": WIDE_KEY,
    "utf-8 read as latin-1 (http.server, most servers' headers)": _RAW.decode("latin-1"),
    "utf-8 read as windows-1252": "".join(bytes([b]).decode("cp1252", "replace") if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else chr(b) for b in _RAW),
    "latin-1 read, JSON-escaped": json.dumps(_RAW.decode("latin-1"))[1:-1],
    "latin-1 read, Python repr": repr(_RAW.decode("latin-1"))[1:-1],
    "bytes repr": repr(_RAW)[2:-1],
    "latin-1 read, put on one line": " ".join(_RAW.decode("latin-1").split()),
}


@pytest.mark.parametrize("form", WIDE_FORMS)
def test_a_key_beyond_ascii_is_masked_whole_in_every_form_a_server_echoes(form: str) -> None:
    """A key with Cyrillic in it was masked only in its ASCII part (`Bearer sk-ÐºÐ»ÑÑ…[redacted]`):
    the server had read its UTF-8 bytes as Latin-1. No character of it stays, in any such form."""
    echoed = WIDE_FORMS[form]
    out = redact(f"Incorrect API key provided: Bearer {echoed} (check it)", (WIDE_KEY,))
    assert out == f"Incorrect API key provided: Bearer {MASK} (check it)", out
