"""The TOML plan's schema (SPEC §3): pydantic models, strict, frozen, with the defaults filled in.

What a field may hold is said here; what fields must agree on (unique abbrs, URLs, templates
that fit the data) is checked in `checks`, and the one-line messages are made in `errors`.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from evaltui.backends import BACKENDS
from evaltui.fsutil import real_path_text
from evaltui.plan.evaluator import LATER_EVALUATOR_KEYS, Epochs, EvaluatorConfig
from evaltui.plan.price import Price
from evaltui.plan.strict import DAY, HOUR, Strict, private, without_later
from evaltui.redaction import REDACTED, SECRET_HEADER_RE

ABBR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_WORKERS = 4096
MAX_REPLY_BYTES = 16 * 2**20  # the default cap on one reply's body: memory is bounded by max_workers × this
MAX_EPOCHS = 1000

# A model's `type` names its backend: the registry is the one list of them (a Literal, so a typo
# is reported as "must be one of …" with every name).
if TYPE_CHECKING:
    ModelType = str
else:
    ModelType = Literal[tuple(BACKENDS)]


class ModelLimits(NamedTuple):
    """How many requests a model may have in flight, as its settings resolve: the one place
    `max_workers`, `max_workers_per_url`, `concurrency` and `min_workers` are made limits (for
    the backend's replicas, the worker pool, the load it reports, Ray and the fleet screen)."""

    max_workers: int  # over the whole model: its worker pool's slots
    per_url: int  # at one replica: max_workers_per_url, else max_workers
    adaptive: bool  # concurrency = "adaptive": each replica's limit is found between floor_per_url and per_url
    floor: int  # adaptive: the model's floor, min_workers (default 1)
    floor_per_url: int  # the floor shared out over the urls, rounded up (at most per_url)
    per_replica: bool  # several urls, or adaptive: its load is reported replica by replica
    capped_per_url: bool  # max_workers_per_url is set


def default_max_workers() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


class RunConfig(Strict):
    work_dir: str | None = None
    max_num_workers: int = Field(1, ge=1, le=256)
    eval_workers: int = Field(4, ge=1, le=256)
    heartbeat_interval: float = Field(5.0, gt=0, le=HOUR)
    poll_interval: float = Field(1.0, gt=0, le=HOUR)
    log_interval: float = Field(30.0, gt=0, le=DAY)
    watch_interval: float = Field(5.0, gt=0, le=HOUR)
    heartbeat_timeout: float = Field(60.0, gt=0, le=DAY)
    epochs: int = Field(1, ge=1, le=MAX_EPOCHS)  # what a dataset without `epochs` of its own runs
    sample_log: bool = True  # logs/samples/: every (sample, epoch)'s prompt, attempts, answer and usage
    executor: Literal["local", "ray"] = "local"  # where requests (and code_exec) run: this process, or a Ray cluster
    cost_limit: float = Field(0.0, ge=0, le=1e12)  # no new request once this run's tokens cost this much (the models' prices); 0 = none
    scorer_process: Literal["auto", "always", "never"] = "auto"  # small light pairs planned and scored in a process of their own (auto: 200 or more)


class ModelConfig(Strict):
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
    down_timeout: float = Field(300.0, gt=0, le=DAY)  # how long a model's requests wait while its server (every replica) is down
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
    stream: bool = False  # ask for streamed replies (SSE): each answer's time to first token and between tokens
    role: Literal["tested", "judge"] = "tested"  # a judge is sent no dataset: evaluators name it (judge = "<abbr>")
    reasoning_tags: list[str] = Field(default_factory=lambda: ["<think>", "</think>"])  # thinking cut out before scoring; [] keeps replies whole
    price: Price | None = None  # per million tokens: {input = 2.5, output = 10.0}; the run's cost is shown and cost_limit applies

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

    @field_validator("reasoning_tags")
    @classmethod
    def _two_tags(cls, v: list[str]) -> list[str]:
        if v and (len(v) != 2 or not all(v) or v[0] == v[1]):
            raise ValueError(f'expected an opening and a closing tag, e.g. ["<think>", "</think>"], or [] for none (got {v!r})')
        return v

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
    def limits(self) -> ModelLimits:
        """Its limits over its urls (see ModelLimits)."""
        return self.limits_for(len(self.urls))

    def limits_for(self, urls: int) -> ModelLimits:
        """Its limits over `urls` replicas (where the engine resolved its urls to: a simulator's one)."""
        per_url = self.max_workers_per_url or self.max_workers
        floor = self.min_workers or 1
        adaptive = self.concurrency == "adaptive"
        shared = min(-(-floor // urls), per_url)  # rounded up
        return ModelLimits(self.max_workers, per_url, adaptive, floor, shared, urls > 1 or adaptive, self.max_workers_per_url is not None)

    @property
    def is_sim(self) -> bool:
        return isinstance(self.url, str) and self.url.startswith("sim://")


# Keys added after results were first fingerprinted, with their defaults: left out of a
# fingerprint while at their default, so a plan that does not use them keeps the versions (the
# leaderboard's column, the evaluator's) it had before they existed.
LATER_DATASET_KEYS: dict[str, Any] = {
    "epochs": None, "retry_on_error": 0, "score_on_error": False, "time_limit": 0.0, "token_limit": 0, "sample_ids": None,
    "benchmark": None, "split": None, "subsets": None, "num_fewshot": None, "fewshot_as_multiturn": False,
    "stop": None, "max_tokens": None, "temperature": None, "system_join": "\n\n",
    "messages": None, "turns": None, "steps": None, "shuffle": False, "tools": None,
}
#: The request settings a dataset may set over its models' generation_kwargs (they change what is sent).
GENERATION_KEYS = ("stop", "max_tokens", "temperature")
MAX_FAILURE_COUNT = 10**12  # fail_on_error as a count: more samples than any dataset has


#: A dataset's `steps`, after Inspect AI's solvers (evaltui/conversation/solvers.py).
Step = Literal["multiple_choice", "chain_of_thought", "generate", "self_critique"]
STEPS: tuple[str, ...] = get_args(Step)


class MessageTemplate(Strict):
    """One message of a dataset's `messages`: its role, and its content as a template over the record."""

    role: Literal["system", "user", "assistant"]
    content: str


class DatasetConfig(Strict):
    abbr: str
    path: str  # a benchmark's: "" for the Hub, else its local copy (a file, or a folder in the release's layout)
    benchmark: str | None = None  # an entry of `evaltui benchmarks`: fills the keys below the plan leaves out
    split: str | None = None  # benchmark: the split evaluated (None: the reference's)
    subsets: list[str] | None = None  # grouped benchmark: some of its parts (None: all)
    num_fewshot: int | None = Field(None, ge=0, le=100)  # benchmark: examples before each question (None: the reference's)
    fewshot_as_multiturn: bool = False  # benchmark, chat models: the examples as user/assistant turns
    columns: list[str] = Field(default_factory=list)
    prompt: str  # "" (filled in) when the dataset gives `messages` or `turns` instead
    system: str = ""
    messages: list[MessageTemplate] | None = None  # instead of prompt and system: each content a template
    turns: str | None = None  # a record field holding the user turns, each sent after the answer to the one before
    steps: list[Step] | None = None  # Inspect's solvers, in order
    shuffle: bool = False  # multiple_choice: the options shuffled (a fixed draw per sample), the answer mapped back
    tools: str | None = None  # a record field holding the tools a chat request offers (OpenAI's function definitions)
    system_join: str = "\n\n"  # what a completions model gets between system and prompt (one text)
    target: str
    mode: Literal["gen", "ppl", "loglikelihood"] = "gen"
    choices: list[str] = Field(default_factory=list)
    stop: list[str] | None = None  # stop sequences sent with each request (over the model's generation_kwargs)
    max_tokens: int | None = Field(None, ge=1, le=10_000_000)  # new tokens a request may generate (over max_new_tokens)
    temperature: float | None = Field(None, ge=0, le=100)  # sampling temperature (over the model's)
    shards: int = Field(1, ge=1, le=256)
    limit: int = Field(0, ge=0)
    fail_on_error: int | float = 0.0  # a fraction (float, 0–1) or a count (integer ≥ 2) of samples that may fail
    retry_on_error: int = Field(0, ge=0, le=100)  # whole-sample tries after a request's retries are spent
    score_on_error: bool = False  # failed samples are scored as wrong, however many (fail_on_error = 1.0)
    epochs: int | None = Field(None, ge=1, le=MAX_EPOCHS)  # None: [run] epochs
    time_limit: float = Field(0.0, ge=0, le=DAY)  # s a (sample, epoch) may take, all its tries together; 0: no limit
    token_limit: int = Field(0, ge=0, le=10**12)  # tokens a sample may use, all its epochs and tries together; 0: no limit
    sample_ids: list[int] | None = None  # run only these samples (indices, from 0); None: all
    evaluator: EvaluatorConfig  # when the plan names none: ppl for mode "ppl", else exact

    @field_validator("fail_on_error", mode="before")
    @classmethod
    def _fraction_or_count(cls, v: Any) -> Any:
        """A float is a fraction of the samples, an integer (≥ 2) a count of them.

        An integer 1 is refused: before counts existed it was the fraction 1.0 (every sample may
        fail), so taking it as a count of one would change what a plan that says it means, and
        its leaderboard version with it. 0 is 0.0 however it is written, so that a float hashes
        as it always did."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"expected a fraction between 0 and 1 or a count (an integer ≥ 2) of samples (got {v!r})")
        if isinstance(v, float) and not 0.0 <= v <= 1.0:
            example = int(v) if math.isfinite(v) and v > 1 else 5
            raise ValueError(f"a fraction must be between 0 and 1; a count of samples is an integer, e.g. {example} (got {v!r})")
        if isinstance(v, int) and v < 0:
            raise ValueError(f"a count of samples must be ≥ 0 (got {v!r})")
        if isinstance(v, int) and v > MAX_FAILURE_COUNT:
            raise ValueError(f"a count of samples must be ≤ {MAX_FAILURE_COUNT} (got {v!r})")
        if isinstance(v, int) and v == 1:
            raise ValueError("fail_on_error = 1 is ambiguous: write 1.0 for every sample may fail, or a count ≥ 2")
        return 0.0 if v == 0 else v  # none may fail, however it is written

    @field_validator("sample_ids")
    @classmethod
    def _indices(cls, v: list[int] | None) -> list[int] | None:
        """Indices from 0, each once, in order (that they are below the record count is checked with the data)."""
        if v is None:
            return v
        if not v:
            raise ValueError("lists no sample; leave it out to run them all")
        if any(i < 0 for i in v):
            raise ValueError(f"sample indices count from 0 (got {min(v)})")
        if len(set(v)) != len(v):
            twice = next(i for i, n in Counter(v).items() if n > 1)
            raise ValueError(f"lists sample {twice} twice")
        return sorted(v)

    def versioned_dump(self) -> dict[str, Any]:
        """The dataset's settings as fingerprints hash them (JSON types, later keys at their defaults left out)."""
        data = without_later(self.model_dump(mode="json"), LATER_DATASET_KEYS)
        data["evaluator"] = without_later(data["evaluator"], LATER_EVALUATOR_KEYS)  # its versioned_dump, from the dump made here
        return data

    @model_validator(mode="before")
    @classmethod
    def _filled(cls, data: Any) -> Any:
        """A benchmark's keys filled in where the plan has none (the catalog is imported only
        then), and the evaluator when nothing names one, so the field is never None for the code
        that scores."""
        if isinstance(data, dict) and data.get("benchmark") is not None:
            from evaltui.benchmarks.fill import fill

            data = fill(data)
        if isinstance(data, dict) and "prompt" not in data and (data.get("messages") is not None or data.get("turns") is not None):
            data = {**data, "prompt": ""}  # the conversation is the prompt; "both" is said in checks
        if isinstance(data, dict) and data.get("evaluator") is None:
            mode = data.get("mode")
            return {**data, "evaluator": {"type": mode if mode in ("ppl", "loglikelihood") else "exact"}}
        return data

    @field_validator("benchmark")
    @classmethod
    def _known_benchmark(cls, v: str | None) -> str | None:
        if v is not None:
            from evaltui.benchmarks.catalog import lookup

            lookup(v)  # ValueError naming the close names
        return v

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and any(s == "" for s in v):
            raise ValueError("an empty stop sequence would end every reply at once")
        return v

    def generation_overrides(self) -> dict[str, Any]:
        """What this dataset sets over its models' generation_kwargs, in their words
        (`max_new_tokens`), for the backends to merge: {} when it sets nothing."""
        out: dict[str, Any] = {}
        if self.stop is not None:
            out["stop"] = list(self.stop)
        if self.max_tokens is not None:
            out["max_new_tokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        return out


class Plan(Strict):
    title: str = ""
    run: RunConfig = Field(default_factory=RunConfig)
    models: list[ModelConfig] = Field(min_length=1)
    datasets: list[DatasetConfig] = Field(min_length=1)

    # Filled by load_plan: where the plan came from, for relative paths and messages.
    source: Path = Field(default=Path("plan.toml"), exclude=True)
    _by_abbr: tuple[list[DatasetConfig], dict[str, DatasetConfig]] | None = PrivateAttr(default=None)
    _paths: tuple[Path, dict[str, Path]] | None = PrivateAttr(default=None)  # see dataset_path

    @property
    def base_dir(self) -> Path:
        return self.source.parent

    def dataset_path(self, ds: DatasetConfig) -> Path:
        """Where its data file is: kept per `path` for the plan's folder, as a run of 10,000
        datasets asks this a dozen times a dataset. A `~` path is expanded each time (it follows
        $HOME, which is the environment's, not the plan's)."""
        memo = private(self)
        cache: tuple[Path, dict[str, Path]] | None = memo["_paths"]
        if cache is None or cache[0] is not self.source:  # a copy from another source (model_copy shares the cache)
            cache = memo["_paths"] = (self.source, {})
        found = cache[1].get(ds.path)
        if found is None:
            p = expand_home(ds.path)
            found = p if p.is_absolute() else self.base_dir / p
            if not ds.path.startswith("~"):
                cache[1][ds.path] = found
        return found

    def default_work_dir(self) -> Path:
        if self.run.work_dir:
            p = expand_home(self.run.work_dir)
            return p if p.is_absolute() else self.base_dir / p
        return self.base_dir / "outputs" / self.source.stem

    @property
    def tested(self) -> list[ModelConfig]:
        """The models the datasets are sent to (not the judges)."""
        return [m for m in self.models if m.role == "tested"]

    def model(self, abbr: str) -> ModelConfig:
        return next(m for m in self.models if m.abbr == abbr)

    def dataset(self, abbr: str) -> DatasetConfig:
        """By its abbr, from an index kept beside the list (a run of 10,000 datasets asks this
        for every status it reads: a walk of the list each time was quadratic)."""
        memo = private(self)
        index: tuple[list[DatasetConfig], dict[str, DatasetConfig]] | None = memo["_by_abbr"]
        if index is None or index[0] is not self.datasets:  # a copy with other datasets (select): index anew
            index = memo["_by_abbr"] = (self.datasets, {d.abbr: d for d in self.datasets})
        return index[1][abbr]

    def key_variables(self) -> list[str]:
        """The environment variables the plan reads API keys from (kept from processes that need none)."""
        return [m.api_key_env for m in self.models if m.api_key_env]

    def epochs(self, ds: DatasetConfig) -> Epochs:
        """How many times each sample of `ds` is sent (its own `epochs`, else the run's) and how
        its epochs' verdicts are reduced: the one place a dataset's epochs are resolved."""
        count = ds.epochs if ds.epochs is not None else self.run.epochs
        return Epochs(count, ds.evaluator.reducer, ds.evaluator.ks())

    def snapshot(self) -> dict[str, Any]:
        """The resolved plan for `<work_dir>/plan.toml`: defaults filled in, no secrets, no None."""
        data = self.model_dump(mode="json", exclude={"source"})
        folders: dict[str, str] = {}  # each resolved once (real_path_text)
        for ds in data["datasets"]:
            if ds["path"] or not ds.get("benchmark"):  # a benchmark's "" (the Hub) stays ""
                ds["path"] = real_path_text(self.dataset_path(self.dataset(ds["abbr"])), folders)
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
        return {k: _drop_none(v) if isinstance(v, (dict, list)) else v for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) if isinstance(v, (dict, list)) else v for v in obj]
    return obj
