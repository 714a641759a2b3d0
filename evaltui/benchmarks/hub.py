"""A benchmark's files from the Hugging Face Hub, through huggingface_hub and its cache.

Everything the library honours is honoured: its cache (`HF_HOME`, `HF_HUB_CACHE`), offline mode
(`HF_HUB_OFFLINE=1`: only what is cached), a mirror (`HF_ENDPOINT`) and a token for gated sets
(`HF_TOKEN`, or `huggingface-cli login`'s). huggingface_hub is imported only here, and this
module only when a plan names a benchmark without a local `path`.

A download reports its bytes through `progress(done, total)` (the run turns that into events
both front ends show); huggingface_hub's own bars stay quiet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evaltui.benchmarks.entry import HubData
from evaltui.text import one_line

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
PROGRESS_EVERY = 1.0  # s between two progress reports of one download


class HubUnavailable(Exception):
    """The files cannot be had from the Hub or its cache; the message says what to do."""


def cached(hub: HubData, patterns: Sequence[str]) -> Path | None:
    """The cached snapshot holding every file `patterns` name, or None (no network is used)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(hub.repo, repo_type="dataset", revision=hub.revision, allow_patterns=list(patterns), local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def offline() -> bool:
    """Whether huggingface_hub is in offline mode (HF_HUB_OFFLINE)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def fetch(name: str, hub: HubData, patterns: Sequence[str], progress: Progress | None = None) -> Path:
    """The snapshot folder holding the files `patterns` name, downloaded when not cached."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    where = f"{hub.repo} on the Hub ({constants.ENDPOINT})"
    try:
        folder = snapshot_download(
            hub.repo, repo_type="dataset", revision=hub.revision, allow_patterns=list(patterns), tqdm_class=_bar_class(progress), max_workers=4
        )
    except GatedRepoError:
        raise HubUnavailable(f"{name}: {where} is gated: accept its terms on the Hub and set HF_TOKEN, or pass `path` to a local copy") from None
    except RepositoryNotFoundError:
        gated = " (a gated set: set HF_TOKEN)" if hub.gated else ""
        raise HubUnavailable(f"{name}: {where} was not found or is not open to this account{gated}; pass `path` to a local copy") from None
    except LocalEntryNotFoundError:
        if constants.HF_HUB_OFFLINE:
            cache = constants.HF_HUB_CACHE
            raise HubUnavailable(f"{name}: HF_HUB_OFFLINE is set and {hub.repo} is not in the Hub cache ({cache}): pass `path` to a local copy") from None
        raise HubUnavailable(f"{name}: cannot reach {where} and its files are not cached: pass `path` to a local copy") from None
    except (HfHubHTTPError, OSError) as e:
        why = one_line(str(e), 301, cut="…")
        raise HubUnavailable(f"{name}: cannot download {hub.repo} from the Hub ({constants.ENDPOINT}): {why}; pass `path` to a local copy") from None
    return Path(folder)


def _bar_class(progress: Progress | None) -> Any:
    """A tqdm class for huggingface_hub that draws nothing and reports the bytes of its byte bars."""
    from huggingface_hub.utils.tqdm import tqdm as hf_tqdm

    state: dict[str, Any] = {"last": 0.0, "said": None}

    class QuietBar(hf_tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
            self.bytes_done = int(kwargs.get("initial") or 0)
            self.in_bytes = kwargs.get("unit") == "B"

        def update(self, n: float | None = 1) -> bool | None:
            self.bytes_done += int(n or 0)
            if progress is not None and self.in_bytes and self.total:
                now = time.monotonic()
                total = int(self.total)
                said = (min(self.bytes_done, total), total)
                # (two byte bars count the same bytes: transferred and written; each state is said once)
                if said != state["said"] and (now - state["last"] >= PROGRESS_EVERY or self.bytes_done >= total):
                    state["last"], state["said"] = now, said
                    progress(*said)
            return None

    return QuietBar
