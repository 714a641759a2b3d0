"""Plain settings for the simulated server.

Kept free of any I/O so the CLI, the demo runner and tests can build and
validate a configuration before anything binds a socket: a bad value is
reported as a ValueError at construction time, not as a confusing failure
under load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evaltui.sim.answers import AnswerKey

#: fail_first_kind values that are not a bare HTTP status.
FAULT_KINDS = ("429", "500", "malformed", "drop", "slow")
#: Where servers put a reasoning model's thinking beside a chat answer's content.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _check_number(name: str, value: float, lo: float, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not (lo <= value <= hi) or math.isnan(value):
        bound = f"between {lo:g} and {hi:g}" if hi != math.inf else f">= {lo:g}"
        raise ValueError(f"{name} must be {bound}, got {value:g}")
    return value


def normalize_fault_kind(kind: object) -> str:
    """Accept `"slow"`, `"503"` or `503`; anything else is a typo we must not ignore."""
    text = str(kind).strip().lower()
    if text in FAULT_KINDS:
        return text
    if text.isdigit() and 400 <= int(text) <= 599:
        return str(int(text))
    raise ValueError(
        f"fail_first_kind must be one of {', '.join(FAULT_KINDS)} or an HTTP status "
        f"400-599, got {kind!r}"
    )


@dataclass
class ModelProfile:
    """How good and how fast one simulated model is.

    `latency` is the fixed time to answer in seconds; `jitter` adds a uniform
    random extra delay in [0, jitter] so concurrency-sensitive code sees
    replies complete out of order.
    """

    accuracy: float = 1.0
    latency: float = 0.0
    jitter: float = 0.0
    token_latency: float = 0.0  # streamed replies: seconds between tokens after the first (which comes after `latency`)
    #: A reasoning model's thinking, sent beside each chat answer's `content` (and streamed in
    #: deltas before it) as vLLM, SGLang and DeepSeek send it: under `reasoning_field`
    #: (`reasoning_content`, or `reasoning` as some servers call it); "" sends none.
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"

    def __post_init__(self) -> None:
        if not isinstance(self.reasoning, str):
            raise ValueError(f"reasoning must be a string, got {self.reasoning!r}")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(f"reasoning_field must be one of {', '.join(REASONING_FIELDS)}, got {self.reasoning_field!r}")
        self.accuracy = _check_number("accuracy", self.accuracy, 0.0, 1.0)
        self.latency = _check_number("latency", self.latency, 0.0)
        self.jitter = _check_number("jitter", self.jitter, 0.0)
        self.token_latency = _check_number("token_latency", self.token_latency, 0.0)


@dataclass
class Faults:
    """What goes wrong, and how often.

    Rates are per request and drawn from one `random.Random(seed)` so a run
    is reproducible; `fail_first` is per distinct (model, prompt) so a test
    can say exactly how many attempts a sample needs before it succeeds.
    """

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_malformed: float = 0.0
    rate_drop: float = 0.0
    rate_slow: float = 0.0
    #: Non-retryable rejections (400 bad request), the kind a client must not retry.
    rate_400: float = 0.0
    slow_seconds: float = 30.0
    retry_after: float = 1.0
    fail_first: int = 0
    fail_first_kind: str = "500"
    max_prompt_chars: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rate_429", "rate_500", "rate_malformed", "rate_drop", "rate_slow", "rate_400"):
            setattr(self, name, _check_number(name, getattr(self, name), 0.0, 1.0))
        self.slow_seconds = _check_number("slow_seconds", self.slow_seconds, 0.0)
        self.retry_after = _check_number("retry_after", self.retry_after, 0.0)
        for name in ("fail_first", "max_prompt_chars", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if name != "seed" and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.fail_first_kind = normalize_fault_kind(self.fail_first_kind)


@dataclass
class SimConfig:
    """Everything one SimServer needs.

    `models` maps a model name (the path prefix or the body's "model") to its
    profile; names not listed use `default`. The three flags emulate real
    server variants that client code must cope with: LightLLM started without
    `--return_all_prompt_logprobs`, TGI-style string `generated_text`, and
    servers that forget the JSON Content-Type.
    """

    host: str = "127.0.0.1"
    port: int = 0
    default: ModelProfile = field(default_factory=ModelProfile)
    models: dict[str, ModelProfile] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    answer_key: AnswerKey = field(default_factory=AnswerKey)
    prompt_logprobs: bool = True
    generated_text_as_string: bool = False
    omit_content_type: bool = False
    #: A server (or the gateway in front of it) that takes at most this many model requests at
    #: once: the next one is refused at once with 429 (and `faults.retry_after`); 0 = no limit.
    max_in_flight: int = 0
    #: A server that works on at most this many requests at once (llama.cpp with one slot, a
    #: batch of eight) and keeps the others waiting in line, first come first served: each
    #: waits its turn, then its latency; 0 = every request at once.
    serve_at_once: int = 0
    #: A replica that dies: after this many model requests it stops listening and cuts every
    #: connection, the requests still waiting out their latency included; 0 = never.
    die_after: int = 0
    #: Keep each model request's parsed body in the stats' log (`LogRecord.body`): a test reads
    #: what a conversation's second turn carried. Off by default: a long run would hold them all.
    record_bodies: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be an integer 0-65535, got {self.port!r}")
        for name in ("max_in_flight", "die_after", "serve_at_once"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        for name, profile in self.models.items():
            if not isinstance(profile, ModelProfile):
                raise ValueError(f"models[{name!r}] must be a ModelProfile, got {profile!r}")

    def profile(self, model: str) -> ModelProfile:
        return self.models.get(model, self.default)
