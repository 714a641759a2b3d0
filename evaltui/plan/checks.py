"""What the plan's fields must agree on, beyond what each may hold (the schema says that).

Unique, file-safe abbrs; URLs both the checker and the HTTP client accept, without credentials
in them; headers that cannot inject others; templates that parse; evaluators that fit the
dataset's mode. Each problem is `field.path: message`, relative to the plan's top level.
"""

from __future__ import annotations

import importlib.util
import re
import ssl
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from yarl import URL

from evaltui.backends import BACKENDS
from evaltui.backends.params import max_new_tokens
from evaltui.datasets import template_fields, templates_of
from evaltui.fsutil import nul_byte
from evaltui.plan.benchmark import benchmark_keys_unused, check_benchmark, check_filters
from evaltui.plan.conversation import check_conversation
from evaltui.plan.evaluator import EvaluatorConfig
from evaltui.plan.judges import check_judges
from evaltui.plan.schema import ABBR_RE, DatasetConfig, ModelConfig, Plan, RunConfig, expand_home
from evaltui.plan.strict import settings_key
from evaltui.sim.url import sim_options

DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".csv", ".parquet")


def check_semantics(plan: Plan, env: Mapping[str, str]) -> list[str]:
    """Every problem of the validated plan, but for its data files' records (`check_dataset`)."""
    problems = _check_abbrs(plan) + _check_run(plan.run)
    generates = any(ds.mode == "gen" for ds in plan.datasets)  # a ppl or loglikelihood request generates one token
    for i, m in enumerate(plan.models):
        problems += [f"models[{i}].{p}" for p in _check_model(m, env) + _check_fleet(m, generates)]
    # settings (all but abbr and path) checked once a kind: 10,000 datasets of a few kinds were the same checks 10,000 times
    kinds, memo = [settings_key(ds, ("abbr", "path")) for ds in plan.datasets], dict[bytes, list[str]]()
    for i, (ds, kind) in enumerate(zip(plan.datasets, kinds, strict=True)):
        problems += [f"datasets[{i}].{p}" for p in _check_dataset_config(plan, ds, kind, memo)]
    return problems + check_judges(plan, kinds)


def _check_abbrs(plan: Plan) -> list[str]:
    """Each abbr becomes a file name: safe, unique in its group, and not another dataset's shard."""
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
    return problems


def _check_run(run: RunConfig) -> list[str]:
    problems: list[str] = []
    nul = nul_byte(run.work_dir) if run.work_dir is not None else None
    if run.work_dir == "":
        problems.append("run.work_dir: is empty: name a folder (or leave the key out for outputs/<plan file name>)")
    elif nul is not None:
        problems.append(f"run.work_dir: {nul}")
    elif run.work_dir is not None:
        try:
            expand_home(run.work_dir)
        except ValueError as e:
            problems.append(f"run.work_dir: {e}")
    if run.heartbeat_timeout < 2 * run.heartbeat_interval:
        problems.append(
            f"run.heartbeat_timeout: must be at least twice heartbeat_interval ({run.heartbeat_interval:g} s), "
            f"or the watch-scorer gives up on a live run (got {run.heartbeat_timeout:g})"
        )
    return problems


def _check_model(m: ModelConfig, env: Mapping[str, str]) -> list[str]:
    problems = _check_urls(m.url)
    if BACKENDS[m.type].needs_model and not m.model and not m.is_sim:
        problems.append(f"model: required for type {m.type!r} (the model name the server expects)")
    if m.api_key_env is not None:
        problems += _check_api_key_env(m.api_key_env, env)
    mnt = m.generation_kwargs.get("max_new_tokens", 1024)
    if isinstance(mnt, bool) or not isinstance(mnt, int) or mnt < 1:
        problems.append(f"generation_kwargs.max_new_tokens: must be an integer ≥ 1 (got {mnt!r})")
    if m.generation_kwargs.get("stream"):
        problems.append("generation_kwargs.stream: remove stream from here: streaming is a setting of the model (`stream = true` beside its url)")
    for k, v in m.headers.items():
        problems += _check_header(k, v)
    if m.ca_file is not None:
        problems += [f"ca_file: {p}" for p in _check_ca_file(m.ca_file)]
    return problems


def _check_urls(url: str | list[str]) -> list[str]:
    """One URL, or a list of replicas: each an http(s) URL, none twice; sim:// only alone."""
    if isinstance(url, str):
        return _check_url(url)
    if not url:
        return ["url: needs at least one URL"]
    problems: list[str] = []
    first: dict[str, int] = {}
    for i, u in enumerate(url):
        if u.startswith("sim://"):
            problems.append(f"url[{i}]: a sim:// URL stands alone (the bundled simulator is one server), not in a list of replicas")
        elif u.rstrip("/") in first:
            problems.append(f"url[{i}]: the same URL as url[{first[u.rstrip('/')]}] ({u!r})")
        else:
            first[u.rstrip("/")] = i
            problems += [p.replace("url:", f"url[{i}]:", 1) for p in _check_url(u)]
    return problems


def _check_fleet(m: ModelConfig, generates: bool) -> list[str]:
    """The keys of replicas, adaptive concurrency and pacing: set only where they mean something,
    and consistent (`generates`: some dataset asks the model for more than one new token)."""
    problems: list[str] = []
    if m.max_workers_per_url is not None:
        if len(m.urls) == 1:
            problems.append("max_workers_per_url: only used with several urls (with one, max_workers is the limit)")
        elif m.max_workers_per_url > m.max_workers:
            problems.append(f"max_workers_per_url: must be ≤ max_workers ({m.max_workers}) (got {m.max_workers_per_url})")
    if m.min_workers is not None:
        if m.concurrency != "adaptive":
            problems.append("min_workers: only used when concurrency = 'adaptive' (the limit's floor)")
        elif m.min_workers > m.max_workers:
            problems.append(f"min_workers: must be ≤ max_workers ({m.max_workers}) (got {m.min_workers})")
        elif m.max_workers_per_url is not None and m.min_workers > m.max_workers_per_url * len(m.urls):
            problems.append(
                f"min_workers: must be ≤ max_workers_per_url × the {len(m.urls)} urls "
                f"({m.max_workers_per_url * len(m.urls)}) (got {m.min_workers})"
            )
    if m.requests_per_minute and m.rate_per_worker:
        problems.append(
            f"requests_per_minute: the same limit as rate_per_worker (requests/second × 60): set one of them "
            f"(got rate_per_worker = {m.rate_per_worker:g} and requests_per_minute = {m.requests_per_minute:g})"
        )
    mnt = max_new_tokens(m.generation_kwargs)  # as the backend reads it (max_tokens too)
    if m.tokens_per_minute and generates and m.tokens_per_minute < mnt:
        problems.append(
            f"tokens_per_minute: each request is charged its prompt and max_new_tokens ({mnt}) before it is sent, "
            f"so no request fits in a minute of {m.tokens_per_minute:g} tokens; raise it or lower max_new_tokens"
        )
    return problems


def _check_api_key_env(name: str, env: Mapping[str, str]) -> list[str]:
    if not name:
        return ["api_key_env: must name an environment variable"]
    if not env.get(name):
        return [f"api_key_env: environment variable {name} is not set (export it before running)"]
    if _BAD_VALUE_RE.search(env[name]):  # the key itself is never shown
        return [
            f"api_key_env: the value of environment variable {name} contains a line break or another "
            "control character (CR, LF, NUL, ...); it would corrupt the Authorization header — set it to the key alone"
        ]
    return []


def _check_header(name: str, value: str) -> list[str]:
    if not _TOKEN_RE.match(name):
        shown = name.encode("unicode_escape").decode("ascii")
        return [f"headers.{shown}: not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)"]
    if name.lower() == "authorization":
        return [f"headers.{name}: do not put secrets in the plan; name the key's environment variable in api_key_env"]
    if name.lower() in _FRAMING_HEADERS:
        return [
            f"headers.{name}: set by the HTTP client for each request (the connection, the body's length and "
            "framing, the host): a value from the plan would make the server misread the request; remove it"
        ]
    if _BAD_VALUE_RE.search(value):
        return [f"headers.{name}: header values must be one line, without CR, LF or other control characters"]
    return []


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
# Hop-by-hop (RFC 9110 §7.6.1) and framing headers: the client owns them. `Content-Length = "0"`
# made a server read an empty body; a `Host` or `Transfer-Encoding` of the plan's would be as wrong.
_FRAMING_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"}
)


def _check_ca_file(path: str) -> list[str]:
    nul = nul_byte(path)
    if nul is not None:
        return [nul]
    try:
        ssl.create_default_context(cafile=path)
    except FileNotFoundError:
        return [f"CA bundle {path} not found"]
    except ssl.SSLError as e:  # an OSError too: caught first
        return [f"{path} is not a PEM bundle of CA certificates ({e.reason or e})"]
    except OSError as e:
        return [f"cannot read CA bundle {path}: {e.strerror or e}"]
    return []


def _check_dataset_config(plan: Plan, ds: DatasetConfig, kind: bytes | None, memo: dict[bytes, list[str]]) -> list[str]:
    """Its path's and data file's problems, then its settings' (`memo`: by settings_key `kind`)."""
    nul = nul_byte(ds.path)
    if nul is not None:
        return [f"path: {nul}"]
    try:
        path = plan.dataset_path(ds)
    except ValueError as e:
        return [f"path: {e}"]
    data = check_benchmark(ds, plan.models) if ds.benchmark else _check_data_file(path, ds.columns)
    return data + (_check_settings(plan, ds) if kind is None else memo[kind] if kind in memo else memo.setdefault(kind, _check_settings(plan, ds)))


def _check_settings(plan: Plan, ds: DatasetConfig) -> list[str]:
    """What of a dataset's problems its settings alone make (not its abbr, path or data file)."""
    unused = [] if ds.benchmark else benchmark_keys_unused(ds)
    checks = unused + _check_templates(ds) + _check_mode(plan, ds) + _check_pattern(ds.evaluator) + check_filters(ds.evaluator) + _check_installed(ds.evaluator)
    return checks + _check_epochs(plan, ds) + _check_error_policy(ds) + check_conversation(plan, ds)


def _check_data_file(path: Path, columns: list[str]) -> list[str]:
    problems: list[str] = []
    if not str(path).endswith(DATA_SUFFIXES):
        problems.append(f"path: unsupported file type {path.name!r} (use {', '.join(DATA_SUFFIXES)})")
    else:
        problems += _not_a_data_file(path)
    if columns and not str(path).endswith(".csv"):
        problems.append("columns: only used for .csv files without a header row")
    if len(set(columns)) != len(columns):
        problems.append("columns: names must be unique")
    return problems


def _not_a_data_file(path: Path) -> list[str]:
    """A path that names no file, or something that is not one (a folder or a FIFO once said
    "file not found"; a FIFO would hang the reader)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return [f"path: file not found: {path}"]
    except OSError as e:
        return [f"path: cannot read {path}: {e.strerror or e}"]
    if stat.S_ISREG(mode):
        return []
    kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or a socket"
    return [f"path: {path} is {kind}, not a data file"]


def _check_templates(ds: DatasetConfig) -> list[str]:
    problems: list[str] = []
    for name, tpl in templates_of(ds).items():
        try:
            template_fields(tpl)
        except ValueError as e:
            problems.append(f"{name}: invalid template: {e}")
    return problems


def _check_mode(plan: Plan, ds: DatasetConfig) -> list[str]:
    """A ppl- or loglikelihood-mode dataset ranks its choices by the log-probabilities only some
    backends give and is scored by its own evaluator; a gen-mode dataset uses neither."""
    problems: list[str] = []
    scorer = {"ppl": "ppl", "loglikelihood": "loglikelihood"}
    if ds.mode == "gen":
        if ds.choices and "multiple_choice" not in (ds.steps or ()):
            problems.append("choices: only used when mode = 'ppl' or 'loglikelihood', or by the multiple_choice step")
        if ds.evaluator.type in scorer:
            problems.append(f"evaluator.type: {ds.evaluator.type!r} scores mode = {ds.evaluator.type!r} datasets only")
        return problems
    if ds.mode == "ppl" and len(ds.choices) < 2:
        problems.append("choices: ppl mode needs at least two candidate continuations")
    if ds.mode == "loglikelihood" and not ds.choices:
        problems.append("choices: loglikelihood mode needs the continuations (e.g. [\" A\", \" B\"], or [\" {endings[*]}\"] for a list field)")
    bad = [m.abbr for m in plan.tested if not BACKENDS[m.type].computes_ppl]
    if bad:
        able = [name for name, backend in BACKENDS.items() if backend.computes_ppl]
        problems.append(
            f"mode: {ds.mode!r} needs prompt log-probabilities, which only types {', '.join(able)} give "
            f"(models {', '.join(bad)} cannot)"
        )
    if ds.evaluator.type != scorer[ds.mode]:
        problems.append(f"evaluator.type: {ds.mode} mode is scored by the {scorer[ds.mode]!r} evaluator (got {ds.evaluator.type!r})")
    return problems


def _check_pattern(ev: EvaluatorConfig) -> list[str]:
    uses = ev.type == "regex" or (ev.type == "opencompass" and ev.postprocess == "answer_pattern")
    if not uses:
        return [] if ev.pattern is None else [f"evaluator.pattern: only used by the regex evaluator (type is {ev.type!r})"]
    if not ev.pattern:
        return [f"evaluator.pattern: required for the {'regex evaluator' if ev.type == 'regex' else 'answer_pattern post-processing'}"]
    try:
        re.compile(ev.pattern)
    except re.error as e:
        return [f"evaluator.pattern: invalid regular expression: {e}"]
    return []


def _check_installed(ev: EvaluatorConfig) -> list[str]:
    """The `math` evaluator's library, looked up without importing it (sympy takes ~0.5 s)."""
    if ev.type == "math" and importlib.util.find_spec("math_verify") is None:
        return ["evaluator.type: 'math' needs the math-verify package, which is not installed (pip install math-verify)"]
    return []


def _check_epochs(plan: Plan, ds: DatasetConfig) -> list[str]:
    """The reducer's k against the epochs it reduces; ppl mode has nothing to repeat."""
    of = plan.epochs(ds)
    epochs, reducer, ks = of.count, of.reducer, of.ks
    source = "" if ds.epochs is not None else f" (run.epochs = {epochs} applies to it)"
    problems: list[str] = []
    if ds.mode != "gen" and epochs > 1:
        problems.append(f"epochs: {ds.mode} mode ranks the choices by log-probabilities, which every epoch gives alike; use epochs = 1{source}")
    if reducer not in ("at_least_k", "pass_at_k"):
        if ks:
            problems.append(f"evaluator.k: only used by the at_least_k and pass_at_k reducers (reducer is {reducer!r})")
        return problems
    if not ks:
        example = f"k = {min(epochs, 2)}" if reducer == "at_least_k" or epochs == 1 else f"k = [1, {epochs}]"
        problems.append(f"evaluator.k: required by the {reducer} reducer (e.g. {example})")
    elif reducer == "at_least_k" and len(ks) > 1:
        problems.append(f"evaluator.k: at_least_k takes one k (got {ds.evaluator.k!r})")
    elif max(ks) > epochs:
        problems.append(f"evaluator.k: {max(ks)} is more than the {epochs} epochs each sample gets{source}")
    return problems


def _check_error_policy(ds: DatasetConfig) -> list[str]:
    if ds.score_on_error and ds.fail_on_error != 0:
        why = "score_on_error = true scores every failed sample as wrong"
        return [f"fail_on_error: has no effect with score_on_error = true ({why}; got {ds.fail_on_error!r}); keep one of them"]
    return []
