"""`evaltui show WORK_DIR`: what happened to each sample of a run, read from its files.

Headless and read-only: it runs nothing and never takes the work dir's lock, so it works on a
run in progress (showing what is on disk so far) as on one long finished. One block per
model×dataset, a line per (sample, epoch) — its verdict, error, attempts, time and tokens —
with `--full` its prompt and answer too (a conversation: its every message). `--export json|jsonl` writes the same records, with
the plan, versions and metrics, as one file (docs/export.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from evaltui.cliargs import OneLineParser
from evaltui.commands import inspect_export
from evaltui.commands.common import WorkDirArgs, add_selection, count, read_work_dir
from evaltui.commands.export import EXPORT_FORMATS, FOLDER_FORMATS, export, output_problem
from evaltui.engine.disk.records import PairView, WorkDirView
from evaltui.exitcode import ExitCode
from evaltui.scoring.score import gold_answer
from evaltui.text import one_line


def build_parser() -> OneLineParser:
    p = OneLineParser(
        prog="evaltui show",
        description="Print each (sample, epoch) of a run's work dir: verdict, error, attempts, time and tokens.",
        epilog="Reads the files only (a run in progress shows what is on disk so far). See README.md, 'Looking at a run'.",
    )
    p.add_argument("work_dir", metavar="WORK_DIR", help="the run's work dir (its plan.toml, predictions/, results/, logs/)")
    add_selection(p)
    p.add_argument("--failed", action="store_true", help="only the samples whose inference failed")
    p.add_argument("--wrong", action="store_true", help="only the samples scored wrong (failed ones included)")
    p.add_argument("--full", action="store_true", help="also each sample's prompt and answer (a conversation: every message)")
    p.add_argument("--limit", type=count, default=0, metavar="N", help="at most N samples per model×dataset (0: all)")
    p.add_argument("--export", choices=EXPORT_FORMATS, help="write the plan, versions, metrics and records as one JSON or JSON Lines file instead; "
                   "inspect: an Inspect AI eval log per model×dataset (inspect view reads them; needs evaltui[inspect]); "
                   "lm-eval: lm-evaluation-harness's results_*.json and samples_*.jsonl")
    p.add_argument("-o", "--output", metavar="FILE", help="--export: the file to write (default: standard output); inspect and lm-eval: the folder")
    return p


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.output is not None and not args.export:
        parser.error("-o/--output is the file --export writes: give --export json or --export jsonl too")
    if args.export in FOLDER_FORMATS and args.output is None:
        parser.error(f"--export {args.export} writes a folder of files: give -o DIR")
    if args.export == "inspect" and not inspect_export.available():
        print(f"evaltui: {inspect_export.MISSING}", file=sys.stderr)
        return ExitCode.USAGE
    view = read_work_dir(WorkDirArgs(args.work_dir, args.models, args.datasets))
    if view is None:
        return ExitCode.USAGE
    if args.output is not None and (problem := output_problem(args.output, view.workdir.root, folder=args.export in FOLDER_FORMATS)):
        print(f"evaltui: -o {args.output}: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    pairs = view.pairs(args.models, args.datasets)

    def chosen(pair: PairView) -> Iterator[dict[str, Any]]:
        return _filtered(view.records(pair.model, pair.dataset), args.failed, args.wrong, args.limit)

    if args.export:
        return export(view, pairs, chosen, args.export, args.output)
    for pair in pairs:  # (a reader that stops, `| head`: run_command ends it quietly)
        _write_pair(sys.stdout, view, pair, chosen(pair), args)
    return ExitCode.OK


def _write_pair(out: TextIO, view: WorkDirView, pair: PairView, records: Iterator[dict[str, Any]], args: argparse.Namespace) -> None:
    """A pair's line, its parts, and a line per record chosen (a filter none passes says so,
    rather than a header alone)."""
    out.write(pair_line(view, pair) + "\n")
    out.writelines(f"{line}\n" for line in part_lines(pair.parts))
    ds = view.plan.dataset(pair.dataset)
    choices = len(ds.choices) if ds.mode == "ppl" else 0
    shown = 0
    for record in records:
        out.write(record_line(record, choices, ds.evaluator.type) + "\n")
        shown += 1
        if args.full:
            _texts(out, record)
    if not shown and (args.failed or args.wrong) and pair.total:
        out.write(f"  no {'failed' if args.failed else 'wrong or failed'} samples\n")


def _filtered(records: Iterator[dict[str, Any]], failed: bool, wrong: bool, limit: int) -> Iterator[dict[str, Any]]:
    shown = 0
    for r in records:
        if failed and "error" not in r:
            continue
        if wrong and not ("error" in r or r.get("correct") is False):
            continue
        yield r
        shown += 1
        if limit and shown >= limit:
            return


def pair_line(view: WorkDirView, pair: PairView) -> str:
    """`m/d: scored, accuracy 71.25, pass@10 90.00 · 400 of 400 done, 0 failed · 100 samples × 4 epochs`"""
    state = pair.status or "not run"
    if pair.metrics:
        state += ", " + ", ".join(f"{name} {value:.2f}{_half(pair.uncertainty.get(name))}" for name, value in pair.metrics.items())
    if pair.error:
        state += f" ({pair.error})"
    counts = f"{pair.completed} of {pair.total} done, {pair.failed} failed" if pair.total else "nothing run yet"
    shape = f"{pair.total // max(pair.epochs, 1)} samples × {pair.epochs} epochs" if pair.epochs > 1 else ""
    subset = f"subset {pair.samples}" if pair.samples else ""
    return " · ".join(part for part in (f"{pair.model}/{pair.dataset}: {state}", counts, shape, subset) if part)


def _half(uncertainty: Any) -> str:
    """` ±2.03`: the half-width of a metric's 95 % interval, when its result has one."""
    ci = uncertainty.get("ci95") if isinstance(uncertainty, dict) else None
    if not isinstance(ci, list) or len(ci) != 2 or not all(isinstance(x, (int, float)) for x in ci):
        return ""
    return f" ±{(ci[1] - ci[0]) / 2:.2f}"


def part_lines(parts: dict[str, dict[str, Any]]) -> list[str]:
    """A grouped benchmark's parts, one line each: `  part anatomy: acc 71.11 · 135 samples`."""
    lines = []
    for name, values in parts.items():
        metrics = ", ".join(f"{k} {v:.2f}" for k, v in values.items() if k != "samples" and isinstance(v, (int, float)))
        lines.append(f"  part {name}: {metrics} · {values.get('samples', 0)} samples")
    return lines


def record_line(r: dict[str, Any], choices: int = 0, evaluator: str = "") -> str:
    """`  #3 e1  wrong  "12" (gold "11")  2 attempts: 503 http 1.20 s, 200 ok 0.90 s  took 2.41 s  43 tokens`

    `choices`: a ppl dataset's, which sends a request per choice: its attempts are not retries.
    `evaluator`: its type, which says what of the reference it compares (gsm8k: the number)."""
    where = f"#{r['index']}" + (f" e{r['epoch']}" if r.get("epoch") else "")
    parts = [f"  {where:<10}"]
    error = r.get("error")
    if error is not None:
        code = f" {error.get('status')}" if error.get("status") is not None else ""
        parts.append(f"FAILED {error.get('type')}{code}: {one_line(str(error.get('message', '')), 120, cut='…')}")
    elif "correct" in r:
        answer = gold_answer(evaluator, r.get("gold"))
        gold = f" (gold {_quoted(r.get('gold') if answer is None else answer)})" if not r["correct"] else ""
        parts.append(f"{'right' if r['correct'] else 'wrong'}  {_quoted(r.get('extracted'))}{gold}")
    else:
        parts.append("answered (not scored yet)")
    attempts = r.get("attempts") or []
    if attempts:
        said = ", ".join(f"{a.get('status') or '-'} {a.get('outcome')} {a.get('seconds', 0):.2f} s" for a in attempts[:6])
        parts.append(f"{_attempts_said(len(attempts), choices)}: {said}{', …' if len(attempts) > 6 else ''}")
    if r.get("tries", 1) > 1:
        parts.append(f"{r['tries']} tries")
    if "took" in r:
        parts.append(f"took {r['took']:.2f} s")
    usage = r.get("usage")
    if usage:
        parts.append(f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0)} tokens")
    return "  ".join(parts)


def _attempts_said(n: int, choices: int) -> str:
    """`2 attempts`; for a ppl sample `3 requests (one per choice)`, or with retries among them
    `4 requests (3 choices, retries included)`."""
    if not choices:
        return f"{n} attempt{'s' if n > 1 else ''}"
    if n == choices:
        return f"{n} requests (one per choice)"
    return f"{n} request{'s' if n > 1 else ''} ({choices} choices{', retries included' if n > choices else ''})"


#: A record's text as `show` labels it: a server's reasoning_content is the model's thinking,
#: shown before the answer it came with (never part of what was scored).
TEXT_LABELS = {"reasoning_content": "reasoning"}


def _texts(out: TextIO, r: dict[str, Any]) -> None:
    """The sample's texts; a conversation's every message in order (README "Conversations"),
    then the answer scored (a shuffled multiple choice's mapped back to the record's letter)."""
    messages = r.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, dict):
                if m.get("reasoning_content"):  # the thinking its server sent beside this answer
                    _block(out, "reasoning", str(m["reasoning_content"]))
                _block(out, _said(m), str(m.get("content", "")))
    for key in ("answer",) if isinstance(messages, list) else ("system", "prompt", "reasoning_content", "answer"):
        if r.get(key):
            _block(out, TEXT_LABELS.get(key, key), str(r[key]))


def _said(m: dict[str, Any]) -> str:
    """A message's label: its role, and for an answer its kind, time and tokens (`assistant (critique, 0.8 s, 31+12 tokens)`)."""
    facts = [str(m["kind"])] if m.get("kind") else []
    if isinstance(m.get("took"), (int, float)):
        facts.append(f"{m['took']:.2f} s")
    usage = m.get("usage")
    if isinstance(usage, dict):
        facts.append(f"{usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)} tokens")
    if m.get("earlier"):
        facts.append("answered by an earlier run")
    return f"{m.get('role', '?')} ({', '.join(facts)})" if facts else str(m.get("role", "?"))


def _block(out: TextIO, label: str, text: str) -> None:
    lines = text.splitlines() or [""]
    out.write(f"      {label}: {lines[0]}\n")
    for line in lines[1:]:
        out.write(f"      {' ' * len(label)}  {line}\n")


def _quoted(value: Any) -> str:
    return "-" if value is None else '"' + one_line(str(value), 60, cut="…") + '"'

