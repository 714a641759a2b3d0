"""The leaderboard's `version` column: which dataset configuration produced a score.

Two runs whose prompts, evaluator or data differ must not be compared as if equal, so the
column is a short hash of the whole dataset configuration; the same configuration always
gives the same hash, whatever order its keys were written in.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def dataset_version(config_dict: dict[str, Any]) -> str:
    canonical = json.dumps(config_dict, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:6]
