"""The TOML plan: pydantic models of SPEC §3 and a loader that reports every problem.

A plan error is a user's typo, not a bug: `load_plan` never lets a traceback escape. It collects
each problem as one line `plan.toml: models[1].max_workers: must be ≥ 1 (got 0)` and raises
`PlanError` with all of them, so one run of `evaltui` shows everything to fix.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from yarl import URL

from evaltui.datasets import check_dataset, template_fields
from evaltui.redaction import REDACTED, SECRET_HEADER_RE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ABBR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_WORKERS = 4096
HOUR, DAY = 3600.0, 86400.0  # upper bounds: a typo like 1e300 is an error, not an overflow hours later
MODEL_TYPES = ("lightllm", "lightllm-chat", "openai-chat", "openai-completions")
CHAT_TYPES = ("lightllm-chat", "openai-chat")
PPL_TYPES = ("lightllm", "openai-completions")
EVALUATOR_TYPES = ("exact", "includes", "regex", "gsm8k", "choice", "ppl", "code_exec")
SIM_OPTIONS = {"accuracy": (0.0, 1.0), "latency": (0.0, 600.0), "jitter": (0.0, 600.0)}
DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".csv")


def default_max_workers() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


class PlanError(Exception):
    """The plan (or the command line naming parts of it) is invalid; `problems` are ready to print."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


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
    type: Literal["lightllm", "lightllm-chat", "openai-chat", "openai-completions"]
    url: str
    max_workers: int = Field(default_factory=default_max_workers, ge=1, le=MAX_WORKERS)
    rate_per_worker: float = Field(0.0, ge=0, le=1e6)
    retry: int = Field(4, ge=0, le=100)
    timeout: float = Field(120.0, gt=0, le=DAY)
    backoff: float = Field(1.0, ge=0, le=HOUR)
    generation_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"do_sample": False, "ignore_eos": False, "max_new_tokens": 1024}
    )
    model: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    ca_file: str | None = None
    verify: bool = True

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
    def is_sim(self) -> bool:
        return self.url.startswith("sim://")


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
        return _drop_none(data)


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


# ---------------------------------------------------------------------------------------- loading


def load_plan(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None, check_data: bool = True) -> Plan:
    """Read, validate and check a plan file; raise PlanError listing every problem found."""
    path = Path(path)
    name = path.name
    environ: Mapping[str, str] = os.environ if env is None else env
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        raise PlanError([f"{path}: plan file not found"]) from None
    except OSError as e:
        raise PlanError([f"{path}: cannot read plan file: {e.strerror or e}"]) from None
    try:
        raw = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PlanError([f"{name}: not UTF-8 text ({e.reason} at byte {e.start})"]) from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError([f"{name}: {_toml_error(e)}"]) from None
    # `source` is set here, not by the user: a `source` key in the file is as unknown as any typo.
    shadowed = ["source: unknown key (known keys: title, run, models, datasets)"] if "source" in raw else []
    try:
        plan = Plan.model_validate({**raw, "source": path.resolve()}, context={"base_dir": path.resolve().parent})
    except ValidationError as e:
        raise PlanError([f"{name}: {p}" for p in shadowed + _pydantic_problems(e, raw)]) from None
    problems = shadowed + _check_semantics(plan, environ)
    if check_data:
        for i, ds in enumerate(plan.datasets):
            if not any(p.startswith(f"datasets[{i}].") for p in problems):
                problems += [f"datasets[{i}].{p}" for p in check_dataset(plan, ds)]
    if problems:
        raise PlanError([f"{name}: {p}" for p in problems])
    return plan


def _toml_error(e: Exception) -> str:
    msg = str(e)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        return f"line {m.group(1)}, column {m.group(2)}: invalid TOML: {msg[: m.start()].strip()}"
    m = re.search(r"\(at end of document\)", msg)
    if m:
        return f"end of file: invalid TOML: {msg[: m.start()].strip()}"
    return f"invalid TOML: {msg}"


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


_TYPE_NAMES = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "true or false",
    "dict": "a table",
    "list": "an array",
    "model": "a table",
}


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Plan
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        ann = field.annotation
        inner = getattr(ann, "__args__", (ann,))
        sub = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is None:
            return []
        model = sub
    return [k for k in model.model_fields if k != "source"]


def _pydantic_problems(e: ValidationError, raw: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for err in e.errors(include_url=False):
        loc = tuple(err["loc"])
        # pydantic reports Literal/union failures under a synthetic tag; keep the field path.
        loc = tuple(p for p in loc if not (isinstance(p, str) and (p.startswith("literal[") or p in ("str", "int", "float", "EvaluatorConfig"))))
        kind = err["type"]
        ctx = err.get("ctx") or {}
        got = err.get("input")
        where = _loc(loc)
        if kind == "extra_forbidden":
            known = _known_keys(loc)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else (f" (known keys: {', '.join(known)})" if known else "")
            problems.append(f"{where}: unknown key{hint}")
        elif kind == "missing":
            problems.append(f"{where}: required field is missing")
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            sym = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
            bound = next(iter(ctx.values()))
            problems.append(f"{where}: must be {sym} {bound} (got {got!r})")
        elif kind == "literal_error":
            problems.append(f"{where}: must be one of {ctx.get('expected')} (got {got!r})")
        elif kind == "finite_number":
            problems.append(f"{where}: must be a finite number (got {got!r})")
        elif kind == "value_error":
            problems.append(f"{where}: {ctx.get('error', err['msg'])}")
        elif kind == "too_short":
            problems.append(f"{where}: needs at least {ctx.get('min_length', 1)} entry")
        elif kind.endswith("_type") or kind.endswith("_parsing"):
            base = kind.rsplit("_", 1)[0]
            want = _TYPE_NAMES.get(base, base)
            problems.append(f"{where}: expected {want} (got {_toml_type(got)} {got!r})")
        else:
            problems.append(f"{where}: {err['msg']} (got {got!r})")
    # Duplicates arise when one key fails in several union arms; keep the first.
    return list(dict.fromkeys(problems))


def _toml_type(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", dict: "table", list: "array"}.get(type(v), type(v).__name__)


def _check_semantics(plan: Plan, env: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    groups: tuple[tuple[str, Sequence[ModelConfig | DatasetConfig]], ...] = (("models", plan.models), ("datasets", plan.datasets))
    for group, items in groups:
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            if not ABBR_RE.match(item.abbr):
                problems.append(
                    f"{group}[{i}].abbr: {item.abbr!r} is not a safe name: use at most 100 letters, digits, '.', '_' "
                    "and '-', starting with a letter or digit (it becomes a file name)"
                )
            elif item.abbr in seen:
                problems.append(f"{group}[{i}].abbr: duplicate abbr {item.abbr!r} (also {group}[{seen[item.abbr]}])")
            else:
                seen[item.abbr] = i
    abbrs = {d.abbr for d in plan.datasets}
    for i, ds in enumerate(plan.datasets):
        stem, _, suffix = ds.abbr.rpartition("_")
        if suffix.isdigit() and stem in abbrs:
            problems.append(
                f"datasets[{i}].abbr: {ds.abbr!r} would share files with the shards of dataset {stem!r} "
                f"({stem}_0, {stem}_1, …); choose another name"
            )
    if plan.run.work_dir is not None:
        try:
            expand_home(plan.run.work_dir)
        except ValueError as e:
            problems.append(f"run.work_dir: {e}")
    if plan.run.heartbeat_timeout < 2 * plan.run.heartbeat_interval:
        problems.append(
            f"run.heartbeat_timeout: must be at least twice heartbeat_interval ({plan.run.heartbeat_interval:g} s), "
            f"or the watch-scorer gives up on a live run (got {plan.run.heartbeat_timeout:g})"
        )
    for i, m in enumerate(plan.models):
        problems += [f"models[{i}].{p}" for p in _check_model(m, env)]
    for i, ds in enumerate(plan.datasets):
        problems += [f"datasets[{i}].{p}" for p in _check_dataset_config(plan, ds)]
    return problems


def _check_model(m: ModelConfig, env: Mapping[str, str]) -> list[str]:
    problems = _check_url(m.url)
    if m.type != "lightllm" and not m.model and not m.is_sim:
        problems.append(f"model: required for type {m.type!r} (the model name the server expects)")
    if m.api_key_env is not None:
        if not m.api_key_env:
            problems.append("api_key_env: must name an environment variable")
        elif not env.get(m.api_key_env):
            problems.append(f"api_key_env: environment variable {m.api_key_env} is not set (export it before running)")
        elif _BAD_VALUE_RE.search(env[m.api_key_env]):  # the key itself is never shown
            problems.append(
                f"api_key_env: the value of environment variable {m.api_key_env} contains a line break or another "
                "control character (CR, LF, NUL, ...); it would corrupt the Authorization header — set it to the key alone"
            )
    mnt = m.generation_kwargs.get("max_new_tokens", 1024)
    if isinstance(mnt, bool) or not isinstance(mnt, int) or mnt < 1:
        problems.append(f"generation_kwargs.max_new_tokens: must be an integer ≥ 1 (got {mnt!r})")
    if m.generation_kwargs.get("stream"):
        problems.append("generation_kwargs.stream: evaltui reads each reply whole and does not speak streamed (SSE) replies; remove stream")
    for k, v in m.headers.items():
        shown = k.encode("unicode_escape").decode("ascii")
        if not _TOKEN_RE.match(k):
            problems.append(f"headers.{shown}: not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)")
        elif k.lower() == "authorization":
            problems.append(f"headers.{k}: do not put secrets in the plan; name the key's environment variable in api_key_env")
        elif _BAD_VALUE_RE.search(v):
            problems.append(f"headers.{k}: header values must be one line, without CR, LF or other control characters")
    if m.ca_file is not None:
        problems += [f"ca_file: {p}" for p in _check_ca_file(m.ca_file)]
    return problems


def _check_url(url: str) -> list[str]:
    """Parsed as both urlsplit (here) and yarl (the HTTP client) do, so a URL either refuses is a plan problem."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        return [f"url: invalid URL ({e}) (got {url!r})"]
    if parts.scheme == "sim":
        try:
            sim_options(url)
        except ValueError as e:
            return [f"url: {e}"]
        return []
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [f"url: expected an http://, https:// or sim:// URL (got {url!r})"]
    if parts.username is not None or parts.password is not None:  # the URL itself is not shown: it holds a secret
        return [
            "url: holds credentials (user:password@host); the plan is copied into the work dir, so name the key's "
            "environment variable in api_key_env instead"
        ]
    secret = next((name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if _SECRET_PARAM_RE.match(name)), None)
    if secret is not None:  # the value is not shown: it is the secret
        return [
            f"url: the query parameter {secret!r} holds a credential; the plan is copied into the work dir, so name "
            "the key's environment variable in api_key_env instead"
        ]
    try:
        port = parts.port  # parsing it is the check: out of range or not a number
    except ValueError as e:
        return [f"url: invalid port: {e} (got {url!r})"]
    if port == 0:  # "any free port" to a server binding one; nothing can be reached there
        return [f"url: invalid port: port 0 cannot be connected to (got {url!r})"]
    # urlsplit drops tabs and newlines before parsing: look at the authority as written
    authority = url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    if re.search(r"\s", authority):
        return [f"url: invalid URL (the host contains whitespace) (got {url!r})"]
    try:
        URL(url)
    except ValueError as e:
        return [f"url: invalid URL ({e}) (got {url!r})"]
    return []


# Query parameters that carry a credential (Google's `?key=`, signed URLs' `sig`, `access_token`).
_SECRET_PARAM_RE = re.compile(
    r"^(?:key|api[-_]?key|(?:access|auth|id|bearer)?[-_]?token|auth|authorization|password|passwd|secret|client[-_]secret|sig|signature)$",
    re.IGNORECASE,
)

# RFC 9110 field names are tokens; values may hold tabs but no other control character. A CR or
# LF in a value would end the header early and let the rest inject headers of its own.
_TOKEN_RE = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _check_ca_file(path: str) -> list[str]:
    import ssl

    try:
        ssl.create_default_context(cafile=path)
    except FileNotFoundError:
        return [f"CA bundle {path} not found"]
    except ssl.SSLError as e:  # an OSError too: caught first
        return [f"{path} is not a PEM bundle of CA certificates ({e.reason or e})"]
    except OSError as e:
        return [f"cannot read CA bundle {path}: {e.strerror or e}"]
    return []


def sim_options(url: str) -> dict[str, float]:
    """Options of a `sim://?accuracy=0.9&latency=0.05` URL, checked."""
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError(f"a simulated model URL looks like 'sim://?accuracy=0.9&latency=0.05' (got {url!r})")
    out: dict[str, float] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in SIM_OPTIONS:
            raise ValueError(f"unknown sim:// option {key!r} (known: {', '.join(SIM_OPTIONS)})")
        try:
            val = float(value)
        except ValueError:
            raise ValueError(f"sim:// option {key} must be a number (got {value!r})") from None
        lo, hi = SIM_OPTIONS[key]
        if not lo <= val <= hi:
            raise ValueError(f"sim:// option {key} must be between {lo:g} and {hi:g} (got {value})")
        out[key] = val
    return out


def _check_dataset_config(plan: Plan, ds: DatasetConfig) -> list[str]:
    problems: list[str] = []
    try:
        p = plan.dataset_path(ds)
    except ValueError as e:
        return [f"path: {e}"]
    if not str(p).endswith(DATA_SUFFIXES):
        problems.append(f"path: unsupported file type {p.name!r} (use {', '.join(DATA_SUFFIXES)})")
    elif not p.is_file():
        problems.append(f"path: file not found: {p}")
    if ds.columns and not str(p).endswith(".csv"):
        problems.append("columns: only used for .csv files without a header row")
    if len(set(ds.columns)) != len(ds.columns):
        problems.append("columns: names must be unique")
    templates = {"prompt": ds.prompt, "target": ds.target, "system": ds.system}
    templates.update({f"choices[{j}]": c for j, c in enumerate(ds.choices)})
    for name, tpl in templates.items():
        try:
            template_fields(tpl)
        except ValueError as e:
            problems.append(f"{name}: invalid template: {e}")
    if ds.mode == "ppl":
        if len(ds.choices) < 2:
            problems.append("choices: ppl mode needs at least two candidate continuations")
        bad = [m.abbr for m in plan.models if m.type not in PPL_TYPES]
        if bad:
            problems.append(
                f"mode: 'ppl' needs prompt log-probabilities, which only types {', '.join(PPL_TYPES)} give "
                f"(models {', '.join(bad)} cannot)"
            )
        if ds.evaluator and ds.evaluator.type != "ppl":
            problems.append(f"evaluator.type: ppl mode is scored by the 'ppl' evaluator (got {ds.evaluator.type!r})")
    else:
        if ds.choices:
            problems.append("choices: only used when mode = 'ppl'")
        if ds.evaluator and ds.evaluator.type == "ppl":
            problems.append("evaluator.type: 'ppl' scores mode = 'ppl' datasets only")
    ev = ds.evaluator
    if ev is not None and ev.type == "regex":
        if not ev.pattern:
            problems.append("evaluator.pattern: required for the regex evaluator")
        else:
            try:
                re.compile(ev.pattern)
            except re.error as e:
                problems.append(f"evaluator.pattern: invalid regular expression: {e}")
    elif ev is not None and ev.pattern is not None:
        problems.append(f"evaluator.pattern: only used by the regex evaluator (type is {ev.type!r})")
    return problems


def select(plan: Plan, models: list[str] | None, datasets: list[str] | None) -> Plan:
    """The plan restricted to `--models` / `--datasets`; PlanError naming unknown abbrs."""
    problems: list[str] = []
    for flag, wanted, items in (("--models", models, plan.models), ("--datasets", datasets, plan.datasets)):
        if wanted is None:
            continue
        known = [x.abbr for x in items]
        for w in wanted:
            if w not in known:
                problems.append(f"{plan.source.name}: {flag}: unknown abbr {w!r} (the plan has: {', '.join(known)})")
    if problems:
        raise PlanError(problems)
    update: dict[str, Any] = {}
    if models is not None:
        update["models"] = [m for m in plan.models if m.abbr in models]
    if datasets is not None:
        update["datasets"] = [d for d in plan.datasets if d.abbr in datasets]
    return plan.model_copy(update=update)
