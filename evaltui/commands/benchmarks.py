"""`evaltui benchmarks`: the catalog of standard benchmarks; `evaltui benchmarks show NAME`: one of them.

`show` prints the [[datasets]] table the entry resolves to (what a plan naming it runs, key for
key) and the exact first request a model of `--type` is sent — built by that type's own backend,
as the run builds it. The request needs the data: a `--path` to a local copy, else the Hub's
files (downloaded into its cache, with the progress on stderr, unless HF_HUB_OFFLINE is set).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import tomli_w

from evaltui.backends import BACKENDS, make_backend, make_client
from evaltui.benchmarks import ENTRIES, DataUnavailable, Entry, dataset_records, lookup, wanted_of
from evaltui.benchmarks.fill import entry_fields
from evaltui.cliargs import OneLineParser
from evaltui.datasets import render_sample
from evaltui.exitcode import ExitCode
from evaltui.plan import DatasetConfig, ModelConfig


def build_parser() -> OneLineParser:
    p = OneLineParser(
        prog="evaltui benchmarks",
        description="List the standard benchmarks a plan can name (`benchmark = NAME` in [[datasets]]), "
        "or show one: the dataset table it resolves to and the exact first request.",
        epilog="See README.md, 'Standard benchmarks'.",
    )
    p.add_argument("action", nargs="?", choices=("list", "show"), default="list", help="list (the default) or show NAME")
    p.add_argument("name", nargs="?", metavar="NAME", help="show: the entry")
    p.add_argument("--json", action="store_true", help="list: the catalog as JSON")
    p.add_argument("--path", metavar="PATH", help="show: a local copy to read (a file, or a folder in the original release's layout)")
    p.add_argument("--split", metavar="SPLIT", help="show: another split than the reference's")
    p.add_argument("--subsets", metavar="A,B", help="show: some parts of a grouped benchmark")
    p.add_argument("--num-fewshot", type=int, metavar="N", help="show: another number of examples than the reference's")
    p.add_argument("--fewshot-as-multiturn", action="store_true", help="show: the examples as user/assistant turns (chat types; lm-eval's flag)")
    p.add_argument("--type", choices=sorted(BACKENDS), default="openai-completions", help="show: the model type whose request is printed")
    return p


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.action == "list":
        if args.name:
            parser.error(f"unexpected {args.name!r}: did you mean `evaltui benchmarks show {args.name}`?")
        _list(args.json)
        return ExitCode.OK
    if not args.name:
        parser.error("show: name an entry (`evaltui benchmarks` lists them)")
    try:
        lookup(args.name)
    except ValueError as e:
        print(f"evaltui benchmarks: {e}", file=sys.stderr)
        return ExitCode.USAGE
    return _show(args)


def source(entry: Entry) -> str:
    local = f"; or `path`: {entry.local.release}" if entry.local else " (only there)"
    return f"Hub {entry.hub.repo}{' (gated)' if entry.hub.gated else ''}{local}"


def _list(as_json: bool) -> None:
    rows = [
        {"name": e.name, "reference": e.reference, "version": e.label, "records": e.size, "split": e.split, "shots": e.num_fewshot,
         "metric": e.metric, "parts": len(e.parts), "hub": e.hub.repo, "gated": e.hub.gated, "local": e.local.release if e.local else None}
        for e in ENTRIES.values()
    ]
    if as_json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return
    table = [("name", "reference", "version", "records", "metric", "data")]
    for e in ENTRIES.values():
        parts = f" ({len(e.parts)} parts)" if e.parts else ""
        table.append((e.name, e.reference, e.label, f"{e.size}{parts}", e.metric, source(e)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for i, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * len(row[-1]))


def _dataset(args: Any) -> DatasetConfig:
    table: dict[str, Any] = {"abbr": args.name, "benchmark": args.name}
    if args.path:
        table["path"] = str(Path(args.path).expanduser().resolve())
    for key, value in (("split", args.split), ("num_fewshot", args.num_fewshot)):
        if value is not None:
            table[key] = value
    if args.subsets:
        table["subsets"] = [s.strip() for s in args.subsets.split(",") if s.strip()]
    if args.fewshot_as_multiturn:
        table["fewshot_as_multiturn"] = True
    return DatasetConfig.model_validate(table)


def _show(args: Any) -> int:
    entry = lookup(args.name)
    try:
        ds = _dataset(args)
    except ValueError as e:
        print(f"evaltui benchmarks: {' '.join(str(e).split())}", file=sys.stderr)
        return ExitCode.USAGE
    w = wanted_of(ds, Path.cwd())
    out = sys.stdout
    shots = f"{w.num_fewshot}-shot" + (f" from {entry.fewshot_split}" if entry.fewshot_split and w.num_fewshot else "")
    out.write(f"# {entry.name}: {entry.reference} {entry.task} ({entry.label}); {entry.size} records in {entry.split}; {shots}; "
              f"metric {entry.metric}\n# data: {source(entry)}\n")
    if entry.notes:
        out.write(f"# {entry.notes}\n")
    if entry.parts:
        out.write(f"# parts ({len(entry.parts)}, `subsets` chooses): {', '.join(entry.parts)}\n")
    out.write("\n" + tomli_w.dumps({"datasets": [_table(entry, ds)]}))
    try:
        records = dataset_records(ds, Path.cwd(), _progress(entry))
    except DataUnavailable as e:
        print(f"evaltui benchmarks: {e}", file=sys.stderr)
        return ExitCode.USAGE
    sample = render_sample(ds, 0, records[0])
    cfg = ModelConfig.model_validate({"abbr": "model", "type": args.type, "url": _url(args.type), "model": "MODEL"})
    backend = make_backend(cfg, make_client(cfg), api_key=None)
    if ds.mode == "loglikelihood":
        context = f"{sample.system}{ds.system_join}{sample.prompt}" if sample.system else sample.prompt
        payloads = backend.ll_payloads(context, sample.choices)
        if not payloads:
            print(f"evaltui benchmarks: {entry.name} ranks choices by their log-likelihood, which type {args.type} does not give: "
                  "--type openai-completions or lightllm", file=sys.stderr)
            return ExitCode.USAGE
        out.write(f"\n# The first record's requests (record 0 of {len(records)}, {w.where()}), one a choice"
                  f"{' after the context alone' if len(payloads) > len(sample.choices) else ''}, to a model of type {args.type}:\n")
        out.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in payloads)
        return ExitCode.OK
    settings = ds.generation_overrides() or None
    if sample.script is not None:  # a conversation (the examples as turns): its first request
        payload = backend.conversation_payload(sample.script.request(0, ()).conversation, settings=settings, join=ds.system_join)
    else:
        payload = backend.payload(sample.prompt, sample.system, settings=settings, join=ds.system_join)
    out.write(f"\n# The first request (record 0 of {len(records)}, {w.where()}) a model of type {args.type} is sent "
              f"(model's generation_kwargs at their defaults; --type for another):\n")
    out.write(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    return ExitCode.OK


def _table(entry: Entry, ds: DatasetConfig) -> dict[str, Any]:
    """The [[datasets]] table the entry resolves to (with `fewshot_as_multiturn`, its messages)."""
    table = {"abbr": entry.name, "benchmark": entry.name, **{k: v for k, v in entry_fields(entry.name).items() if v not in ("", [])}}
    if ds.fewshot_as_multiturn and ds.messages is not None:  # the entry's system and prompt, as turns
        table = {k: v for k, v in table.items() if k not in ("prompt", "system")}
        table.update(fewshot_as_multiturn=True, messages=[m.model_dump() for m in ds.messages])
    return table


def _url(model_type: str) -> str:
    return "http://127.0.0.1:8000" + BACKENDS[model_type].api_path


def _progress(entry: Entry) -> Any:
    def report(done: int, total: int) -> None:
        print(f"evaltui benchmarks: {entry.name}: downloading {entry.hub.repo} from the Hub: {done / 1e6:.1f} of {total / 1e6:.1f} MB", file=sys.stderr)

    return report
