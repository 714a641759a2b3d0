"""One (sample, epoch) through the backend: its tries, and the checkpoint entry they end in.

The backend retries each request (`retry`, with backoff); `retry_on_error = N` tries the whole
sample again up to N more times once a request's retries are spent on errors worth retrying
(connection, timeout, 408, 429, 5xx, an unparseable reply) — a server down for longer than one
request's backoff. An error a try cannot change (a 400, a template that does not fill) fails
at once. The entry of a sample that failed for good keeps why each earlier try failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from evaltui.backends import Backend, BackendError
from evaltui.datasets import Sample
from evaltui.engine.redact import redact
from evaltui.plan import DatasetConfig

OnRetry = Callable[[int, dict[str, Any]], None]  # (the try about to start, from 2; why the last one failed)


def head(index: int, epoch: int) -> dict[str, Any]:
    """A checkpoint line's first keys: the index, and the epoch when it is not the first (so a
    one-epoch run writes the lines it always wrote, and older checkpoints read as epoch 0)."""
    return {"index": index, "epoch": epoch} if epoch else {"index": index}


def failed_entry(index: int, epoch: int, error: dict[str, Any]) -> dict[str, Any]:
    """The entry of a sample that failed before a request could be made (its record or templates)."""
    return {**head(index, epoch), "origin_prompt": "", "prediction": "", "gold": "", "error": error}


class SampleInference:
    """How one model's pool turns a rendered sample into its checkpoint entry."""

    def __init__(self, backend: Backend, secrets: tuple[str, ...]):
        self.backend = backend
        self.secrets = secrets  # masked in failure messages: servers echo requests

    async def entry(self, cfg: DatasetConfig, sample: Sample, epoch: int, on_retry: OnRetry) -> dict[str, Any]:
        """The checkpoint entry of one (sample, epoch): its answer (gen), chosen continuation (ppl)
        or error, after up to 1 + retry_on_error tries."""
        entry = head(sample.index, epoch)
        entry["origin_prompt"] = sample.prompt
        earlier: list[dict[str, Any]] = []
        tries = 1 + cfg.retry_on_error
        for number in range(1, tries + 1):
            if number > 1:
                on_retry(number, earlier[-1])
                # the schedule the request retries were on, continued: the server gets a breather
                await anyio.sleep(self.backend.backoff.delay(self.backend.cfg.retry + number))
            error, again = await self._try(cfg, sample, epoch, entry)
            if error is None:
                return entry
            if not again or number == tries:
                if earlier:
                    error["tries"] = [*earlier, _reason(error)]
                entry.update(prediction="", gold=sample.target, error=error)
                return entry
            earlier.append(_reason(error))
        raise AssertionError("unreachable: the last try returns")

    async def _try(self, cfg: DatasetConfig, sample: Sample, epoch: int, entry: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
        """One try: fills `entry` with the answer, or returns (the error, whether another try may help)."""
        try:
            if cfg.mode == "ppl":
                ppls = [await self.backend.ppl(sample.prompt + c) for c in sample.choices]
                best = min(range(len(ppls)), key=ppls.__getitem__)
                entry.update(prediction=sample.choices[best], gold=sample.target, ppl=ppls)
            else:
                entry.update(prediction=await self.backend.generate(sample.prompt, sample.system, epoch=epoch), gold=sample.target)
            return None, False
        except BackendError as e:
            error = e.as_dict()
            return {**error, "message": redact(error["message"], self.secrets)}, e.retryable
        except Exception as e:  # a bug must cost one sample, not the whole run
            message = redact(f"{type(e).__name__}: {e}", self.secrets)
            return {"type": "internal", "status": None, "message": message, "attempts": 1}, False


def _reason(error: dict[str, Any]) -> dict[str, Any]:
    """What one failed try says in the entry's `tries`."""
    return {key: error.get(key) for key in ("type", "status", "message", "attempts")}
