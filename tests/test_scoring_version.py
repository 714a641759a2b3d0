"""dataset_version, and keeping the scoring package free of UI dependencies."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from evaltui.scoring import dataset_version


def test_version_is_six_lowercase_hex():
    v = dataset_version({"abbr": "gsm8k", "path": "x.jsonl"})
    assert len(v) == 6 and all(c in "0123456789abcdef" for c in v)


def test_version_is_the_sha256_of_canonical_json():
    config = {"b": [1, 2], "a": {"y": None, "x": "é"}}
    canonical = json.dumps(config, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert dataset_version(config) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:6]


def test_version_is_stable_and_sensitive():
    a = {"abbr": "gsm8k", "evaluator": {"type": "gsm8k"}, "max_out_len": 512}
    b = {"max_out_len": 512, "evaluator": {"type": "gsm8k"}, "abbr": "gsm8k"}
    assert dataset_version(a) == dataset_version(b)
    assert dataset_version(a) != dataset_version({**a, "max_out_len": 513})


def test_scoring_never_imports_the_ui():
    code = (
        "import sys, evaltui.scoring\n"
        "bad = [m for m in ('textual', 'rich', 'httpx') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
