"""`evaltui serve-sim` / `python -m evaltui.sim`: options and the serve loop.

The first stdout line is a contract with the evaltui runner, which starts
the simulator with `--port 0` and reads that line to learn the port; nothing
else is ever written to stdout, so a parent that stops reading the pipe can
never block the server. Option destinations are prefixed `sim_` so they can
share a namespace with the main evaltui parser.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from evaltui.cliargs import OneLineParser
from evaltui.exitcode import ExitCode
from evaltui.sim.answers import AnswerKey
from evaltui.sim.config import REASONING_FIELDS, Faults, ModelProfile, SimConfig, normalize_fault_kind
from evaltui.sim.server import SimServer

PROG = "evaltui-sim"
_PROFILE_KEYS = ("accuracy", "latency", "jitter", "token_latency")


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _seconds(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _port(text: str) -> int:
    value = _count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _kind(text: str) -> str:
    try:
        return normalize_fault_kind(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_model_spec(text: str) -> tuple[str, dict[str, float]]:
    """`NAME[:accuracy=0.9,latency=0.05,jitter=0.01,token_latency=0.005]` -> (name, overrides)."""
    name, sep, settings = text.rpartition(":")
    if not sep or "=" not in settings:
        name, settings = text, ""
    name = name.strip()
    if not name:
        raise argparse.ArgumentTypeError(f"missing model name in {text!r}")
    overrides: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in settings.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in _PROFILE_KEYS:
            raise argparse.ArgumentTypeError(
                f"bad setting {item!r} in {text!r}; expected {', '.join(k + '=NUMBER' for k in _PROFILE_KEYS)}")
        overrides[key] = (_fraction if key == "accuracy" else _seconds)(value.strip())
    return name, overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("server")
    g.add_argument("--host", dest="sim_host", metavar="HOST", default="127.0.0.1", help="address to bind (default: %(default)s)")
    g.add_argument("--port", dest="sim_port", type=_port, metavar="PORT", default=8080,
                   help="port; 0 picks a free one (default: %(default)s)")
    g = parser.add_argument_group("models")
    g.add_argument("--accuracy", dest="sim_accuracy", type=_fraction, metavar="A", default=1.0,
                   help="fraction of keyed prompts answered right by models without --model (default: 1)")
    g.add_argument("--latency", dest="sim_latency", type=_seconds, metavar="SECONDS", default=0.0,
                   help="seconds per reply (default: 0)")
    g.add_argument("--jitter", dest="sim_jitter", type=_seconds, metavar="SECONDS", default=0.0,
                   help="extra uniform random delay in [0, JITTER] seconds (default: 0)")
    g.add_argument("--token-latency", dest="sim_token_latency", type=_seconds, metavar="SECONDS", default=0.0,
                   help="streamed replies (stream: true, /generate_stream): seconds between tokens after the first, "
                   "which comes after --latency (default: 0)")
    g.add_argument("--reasoning", dest="sim_reasoning", metavar="TEXT", default="",
                   help="a reasoning model's thinking, sent beside every chat answer (streamed before it) as "
                   "vLLM and SGLang send it (default: none)")
    g.add_argument("--reasoning-field", dest="sim_reasoning_field", choices=REASONING_FIELDS, default=REASONING_FIELDS[0],
                   help="the field --reasoning goes in (default: %(default)s)")
    g.add_argument("--model", dest="sim_models", type=parse_model_spec, action="append", default=[],
                   metavar="NAME[:accuracy=A,latency=S,jitter=S,token_latency=S]",
                   help="a named model's profile (repeatable); unset fields use the defaults above")
    g.add_argument("--answer-key", dest="sim_answer_keys", action="append", default=[], metavar="FILE",
                   help='JSONL of {"prompt", "answer"} or {"prompt", "choices", "answer"} (repeatable)')
    g = parser.add_argument_group("faults")
    for kind in ("429", "500", "malformed", "drop", "slow"):
        g.add_argument(f"--rate-{kind}", dest=f"sim_rate_{kind}", type=_fraction, default=0.0,
                       metavar="P", help=f"probability of a {kind} fault per request (default: 0)")
    g.add_argument("--rate-400", dest="sim_rate_400", type=_fraction, default=0.0, metavar="P",
                   help="probability of a non-retryable 400 (bad request) per request (default: 0)")
    g.add_argument("--slow-seconds", dest="sim_slow_seconds", type=_seconds, metavar="SECONDS", default=30.0,
                   help="delay of a slow reply (default: %(default)s)")
    g.add_argument("--retry-after", dest="sim_retry_after", type=_seconds, metavar="SECONDS", default=1.0,
                   help="Retry-After seconds sent with 429 (default: %(default)s)")
    g.add_argument("--fail-first", dest="sim_fail_first", type=_count, default=0, metavar="N",
                   help="the first N attempts of each (model, prompt) fail (default: 0)")
    g.add_argument("--fail-first-kind", dest="sim_fail_first_kind", type=_kind, default="500",
                   metavar="KIND", help="429, 500, malformed, drop, slow or an HTTP status 400-599 (default: 500)")
    g.add_argument("--max-prompt-chars", dest="sim_max_prompt_chars", type=_count, default=0, metavar="N",
                   help="reject longer prompts with 400; 0 = no limit")
    g.add_argument("--max-in-flight", dest="sim_max_in_flight", type=_count, default=0, metavar="K",
                   help="refuse a model request with 429 (and --retry-after) while K are in flight; 0 = no limit")
    g.add_argument("--serve-at-once", dest="sim_serve_at_once", type=_count, default=0, metavar="K",
                   help="work on at most K model requests at once, the others waiting in line (a server with K slots); 0 = all at once")
    g.add_argument("--die-after", dest="sim_die_after", type=_count, default=0, metavar="N",
                   help="after N model requests, cut every connection and exit (a replica that dies); 0 = never")
    g.add_argument("--seed", dest="sim_seed", type=_int, metavar="N", default=0, help="seed of the fault dice (default: 0)")
    g = parser.add_argument_group("wire-format variants")
    g.add_argument("--no-prompt-logprobs", dest="sim_prompt_logprobs", action="store_false",
                   help="omit prompt_logprobs, like LightLLM without --return_all_prompt_logprobs")
    g.add_argument("--generated-text-string", dest="sim_generated_text_string", action="store_true",
                   help="return generated_text as a string (TGI style) instead of a list")
    g.add_argument("--omit-content-type", dest="sim_omit_content_type", action="store_true",
                   help="send JSON replies without a Content-Type header")
    g.add_argument("--record-bodies", dest="sim_record_bodies", action="store_true",
                   help="keep each request's body in /sim/stats' log (what a conversation's turns carried)")
    g = parser.add_argument_group("process")
    g.add_argument("--parent-pid", dest="sim_parent_pid", type=_count, default=0, metavar="PID",
                   help="exit when process PID exits (Linux), e.g. when evaltui is killed with -9")


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """Raises ValueError with a one-line reason."""
    thinking = {"reasoning": args.sim_reasoning, "reasoning_field": args.sim_reasoning_field}
    default = ModelProfile(args.sim_accuracy, args.sim_latency, args.sim_jitter, args.sim_token_latency, **thinking)
    models: dict[str, ModelProfile] = {}
    for name, overrides in args.sim_models:
        fields: dict[str, Any] = {**{k: getattr(default, k) for k in _PROFILE_KEYS}, **thinking}
        fields.update(overrides)
        models[name] = ModelProfile(**fields)
    key = AnswerKey()
    for path in args.sim_answer_keys:
        try:
            key.load_jsonl(path)
        except OSError as exc:
            raise ValueError(f"cannot read answer key {path}: {exc.strerror or exc}") from None
    faults = Faults(
        rate_429=args.sim_rate_429, rate_500=args.sim_rate_500,
        rate_malformed=args.sim_rate_malformed, rate_drop=args.sim_rate_drop,
        rate_slow=args.sim_rate_slow, rate_400=args.sim_rate_400, slow_seconds=args.sim_slow_seconds,
        retry_after=args.sim_retry_after, fail_first=args.sim_fail_first,
        fail_first_kind=args.sim_fail_first_kind, max_prompt_chars=args.sim_max_prompt_chars,
        seed=args.sim_seed,
    )
    return SimConfig(
        host=args.sim_host, port=args.sim_port, default=default, models=models, faults=faults,
        answer_key=key, prompt_logprobs=args.sim_prompt_logprobs,
        generated_text_as_string=args.sim_generated_text_string,
        omit_content_type=args.sim_omit_content_type,
        max_in_flight=args.sim_max_in_flight, die_after=args.sim_die_after, serve_at_once=args.sim_serve_at_once,
        record_bodies=args.sim_record_bodies,
    )


def where_to_point(url: str, answers: int) -> str:
    """What a standalone server says under its first line: the URLs a plan's `url` takes, and
    what it answers without an answer key (a plan pointed at it then scores 0, which looked
    like a broken evaluator)."""
    lines = [
        f"  lightllm:                           url = \"{url}/generate\"",
        f"  openai-chat, openai-completions:    url = \"{url}/v1\"  (model = any name)",
        f"  a --model NAME's profile: {url}/NAME/generate, or model = \"NAME\" on /v1",
    ]
    if answers:
        lines.append(f"  it knows the answers to {answers} prompts (--answer-key)")
    else:
        lines.append("  without --answer-key every answer is \"I don't know.\": a plan pointed here scores 0 (README: Simulated models)")
    return "\n".join(lines) + "\n"


async def serve(config: SimConfig, *, standalone: bool = True) -> int:
    """Serve until SIGINT/SIGTERM; announce the URL as the first stdout line (the engine reads
    it), then, `standalone` (not started by a run), where to point a plan."""
    server = SimServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
            pass
    try:
        sys.stdout.write(f"evaltui-sim listening on {server.url}\n")
        if standalone:
            sys.stdout.write(where_to_point(server.url, len(config.answer_key)))
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass  # nobody reads our stdout any more; keep serving
    try:
        stopped, died = asyncio.ensure_future(stop.wait()), asyncio.ensure_future(server.died.wait())
        await asyncio.wait((stopped, died), return_when=asyncio.FIRST_COMPLETED)
        for waiter in (stopped, died):
            waiter.cancel()
    finally:
        await server.stop()
    return ExitCode.OK


def _exit_with_parent(pid: int) -> None:
    """Ask Linux to SIGTERM us when our parent dies; leave at once if it already has.

    Done here in the child rather than in a preexec_fn of the parent, which is unsafe once the
    parent runs threads.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != pid:
        raise SystemExit(0)


def run_from_args(args: argparse.Namespace) -> int:
    if getattr(args, "sim_parent_pid", 0):
        _exit_with_parent(args.sim_parent_pid)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        return asyncio.run(serve(config, standalone=not getattr(args, "sim_parent_pid", 0)))
    except KeyboardInterrupt:
        return ExitCode.OK
    except OSError as exc:
        print(f"{PROG}: error: cannot listen on {config.host}:{config.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return ExitCode.FAILED


def main(argv: Sequence[str] | None = None, prog: str = "python -m evaltui.sim") -> int:
    parser = OneLineParser(
        prog=prog, description="Simulated LLM server speaking the LightLLM and OpenAI HTTP APIs.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
