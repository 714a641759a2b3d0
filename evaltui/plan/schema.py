"""The TOML plan's schema (SPEC §3): pydantic models, strict, frozen, with the defaults filled in.

What a field may hold is said here; what fields must agree on (unique abbrs, URLs, templates
that fit the data) is checked in `checks`, and the one-line messages are made in `errors`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from evaltui.backends import BACKENDS
from evaltui.redaction import REDACTED, SECRET_HEADER_RE

ABBR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_WORKERS = 4096
MAX_REPLY_BYTES = 16 * 2**20  # the default cap on one reply's body: memory is bounded by max_workers × this
HOUR, DAY = 3600.0, 86400.0  # upper bounds: a typo like 1e300 is an error, not an overflow hours later

# A model's `type` names its backend: the registry is the one list of them (a Literal, so a typo
# is reported as "must be one of …" with every name).
if TYPE_CHECKING:
    ModelType = str
else:
    ModelType = Literal[tuple(BACKENDS)]


def default_max_workers() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class RunConfig(_Strict):
    work_dir: str | None = None
    max_num_workers: int = Field(1, ge=1, le=256)
    eval_workers: int = Field(4, ge=1, le=256)
    heartbeat_interval: float = Field(5.0, gt=0, le=HOUR)
    poll_interval: float = Field(1.0, gt=0, le=HOUR)
    log_interval: float = Field(30.0, gt=0, le=DAY)
    watch_interval: float = Field(5.0, gt=0, le=HOUR)
    heartbeat_timeout: float = Field(60.0, gt=0, le=DAY)


class ModelConfig(_Strict):
    abbr: str
    type: ModelType
    url: str | list[str]  # one server, or several replicas of the model
    max_workers: int = Field(default_factory=default_max_workers, ge=1, le=MAX_WORKERS)
    max_workers_per_url: int | None = Field(None, ge=1, le=MAX_WORKERS)  # several urls: at most this many at one
    concurrency: Literal["fixed", "adaptive"] = "fixed"
    min_workers: int | None = Field(None, ge=1, le=MAX_WORKERS)  # adaptive: the limit's floor (default 1)
    rate_per_worker: float = Field(0.0, ge=0, le=1e6)  # requests/second, the whole model's (not per worker)
    requests_per_minute: float = Field(0.0, ge=0, le=6e7)  # the same limit per minute: rate_per_worker × 60
    tokens_per_minute: float = Field(0.0, ge=0, le=1e12)
    down_timeout: float = Field(300.0, gt=0, le=DAY)  # several urls: how long a model waits with all of them down
    retry: int = Field(4, ge=0, le=100)
    timeout: float = Field(120.0, gt=0, le=DAY)
    backoff: float = Field(1.0, ge=0, le=HOUR)
    max_reply_bytes: int = Field(MAX_REPLY_BYTES, ge=1024, le=2**30)  # a longer reply fails its sample, unread
    generation_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"do_sample": False, "ignore_eos": False, "max_new_tokens": 1024}
    )
    model: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    ca_file: str | None = None
    verify: bool = True

    @field_validator("url", mode="before")
    @classmethod
    def _one_url_or_a_list(cls, v: Any) -> Any:
        """One message for a url of the wrong type, rather than one per arm of the union."""
        if isinstance(v, list):
            bad = next((i for i, u in enumerate(v) if not isinstance(u, str)), None)
            if bad is not None:
                raise ValueError(f"item {bad} of the list is not a string (got {v[bad]!r})")
        elif not isinstance(v, str):
            raise ValueError(f"expected a URL (a string) or a list of them, one per replica (got {v!r})")
        return v

    @field_validator("ca_file")
    @classmethod
    def _ca_file_from_plan_dir(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A relative ca_file is relative to the plan's folder (as dataset paths are), not the cwd."""
        base = (info.context or {}).get("base_dir")
        if v is None or base is None:
            return v
        p = expand_home(v)
        return str(p if p.is_absolute() else Path(base) / p)

    def secret_header_values(self) -> tuple[str, ...]:
        return tuple(v for k, v in self.headers.items() if SECRET_HEADER_RE.search(k) and v.strip())

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url,) if isinstance(self.url, str) else tuple(self.url)

    @property
    def request_rate(self) -> float:
        """Requests per second over the whole model: rate_per_worker, or requests_per_minute / 60."""
        return self.rate_per_worker or self.requests_per_minute / 60.0

    @property
    def is_sim(self) -> bool:
        return isinstance(self.url, str) and self.url.startswith("sim://")


class EvaluatorConfig(_Strict):
    type: Literal["exact", "includes", "regex", "gsm8k", "choice", "ppl", "code_exec"]
    pattern: str | None = None
    timeout: float = Field(10.0, gt=0, le=DAY)
    memory_mb: int = Field(1024, ge=16, le=1 << 20)


class DatasetConfig(_Strict):
    abbr: str
    path: str
    columns: list[str] = Field(default_factory=list)
    prompt: str
    system: str = ""
    target: str
    mode: Literal["gen", "ppl"] = "gen"
    choices: list[str] = Field(default_factory=list)
    shards: int = Field(1, ge=1, le=256)
    limit: int = Field(0, ge=0)
    fail_on_error: float = Field(0.0, ge=0, le=1)
    evaluator: EvaluatorConfig  # when the plan names none: ppl for mode "ppl", else exact

    @model_validator(mode="before")
    @classmethod
    def _default_evaluator(cls, data: Any) -> Any:
        """Filled in before validation, so the field is never None for the code that scores."""
        if isinstance(data, dict) and data.get("evaluator") is None:
            return {**data, "evaluator": {"type": "ppl" if data.get("mode") == "ppl" else "exact"}}
        return data


class Plan(_Strict):
    title: str = ""
    run: RunConfig = Field(default_factory=RunConfig)
    models: list[ModelConfig] = Field(min_length=1)
    datasets: list[DatasetConfig] = Field(min_length=1)

    # Filled by load_plan: where the plan came from, for relative paths and messages.
    source: Path = Field(default=Path("plan.toml"), exclude=True)

    @property
    def base_dir(self) -> Path:
        return self.source.parent

    def dataset_path(self, ds: DatasetConfig) -> Path:
        p = expand_home(ds.path)
        return p if p.is_absolute() else self.base_dir / p

    def default_work_dir(self) -> Path:
        if self.run.work_dir:
            p = expand_home(self.run.work_dir)
            return p if p.is_absolute() else self.base_dir / p
        return self.base_dir / "outputs" / self.source.stem

    def model(self, abbr: str) -> ModelConfig:
        return next(m for m in self.models if m.abbr == abbr)

    def dataset(self, abbr: str) -> DatasetConfig:
        return next(d for d in self.datasets if d.abbr == abbr)

    def snapshot(self) -> dict[str, Any]:
        """The resolved plan for `<work_dir>/plan.toml`: defaults filled in, no secrets, no None."""
        data = self.model_dump(mode="json", exclude={"source"})
        for ds in data["datasets"]:
            ds["path"] = str(self.dataset_path(self.dataset(ds["abbr"])).resolve())
        for m in data["models"]:
            m["headers"] = {k: REDACTED if SECRET_HEADER_RE.search(k) else v for k, v in m["headers"].items()}
        snapshot: dict[str, Any] = _drop_none(data)
        return snapshot


def expand_home(path: str) -> Path:
    """`~` and `~user` expanded; ValueError (a plan problem, not a traceback) for an unknown user."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # pathlib's way of saying "no such user" or "no home directory"
        user = path[1:].split("/", 1)[0]
        raise ValueError(f"cannot expand {path!r}: " + (f"no user named {user!r}" if user else "no home directory")) from None


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj
