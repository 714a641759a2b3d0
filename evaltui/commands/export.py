"""`evaltui show WORK_DIR --export json|jsonl`: a run as one file (schema: docs/export.md).

The file holds what a reader elsewhere needs to trust and reuse a run: the resolved plan, the
versions (evaltui's, each pair's fingerprint, each dataset's), every pair's state and metrics,
and its (sample, epoch) records. Written streaming — records are never all in memory — to a
temporary name and renamed into place (or to standard output).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from evaltui import __version__
from evaltui.engine.disk.records import PairView, WorkDirView
from evaltui.exitcode import ExitCode
from evaltui.fsutil import atomic_writer, json_bytes
from evaltui.scoring.summary import RunSummary

EXPORT_FORMATS = ("json", "jsonl", "inspect", "lm-eval")
FOLDER_FORMATS = ("inspect", "lm-eval")  # a folder of files, in another tool's layout (inspect_export.py, lmeval_export.py)
SCHEMA = "evaltui.export/1"

Records = Callable[[PairView], Iterator[dict[str, Any]]]


def output_problem(output: str, work_dir: Path, *, folder: bool = False) -> str:
    """Why `-o` may not be written ("" when it may): inside the work dir it exports (its own
    plan.toml or results would be overwritten, and the work dir is the run's record), or in a
    folder that does not exist (a typo must not create folders). `folder`: `-o` names a folder
    to write files into (made when missing), not a file."""
    path = Path(output).expanduser().resolve()
    if path.is_relative_to(work_dir.resolve()):
        return f"is inside the work dir being exported ({work_dir}); write it elsewhere"
    if not path.parent.is_dir():
        return f"no such folder: {path.parent}"
    if path.is_dir() and not folder:
        return "is a folder; name a file"
    if folder and path.exists() and not path.is_dir():
        return "is a file; name a folder (made when missing) for the logs"
    return ""


def export(view: WorkDirView, pairs: list[PairView], records: Records, fmt: str, output: str | None) -> int:
    if fmt in FOLDER_FORMATS:
        assert output is not None
        return _to_folder(view, pairs, records, fmt, Path(output))
    write = _jsonl if fmt == "jsonl" else _json
    if output is None:
        write(sys.stdout.buffer, view, pairs, records)
        sys.stdout.flush()
        return ExitCode.OK
    try:
        with atomic_writer(output) as f:
            write(f, view, pairs, records)
    except OSError as e:
        print(f"evaltui: -o {output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK


def _to_folder(view: WorkDirView, pairs: list[PairView], records: Records, fmt: str, folder: Path) -> int:
    """Inspect AI's eval logs or lm-eval's results and samples, in `folder`; a line saying what was written."""
    from evaltui.commands import inspect_export, lmeval_export

    try:
        if fmt == "inspect":
            written = inspect_export.export_inspect(view, pairs, records, folder)
        else:
            written = lmeval_export.export_lmeval(view, pairs, records, folder)
    except OSError as e:
        print(f"evaltui: -o {folder}: cannot write: {e.strerror or e}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"{folder}: {len(written)} file{'s' if len(written) != 1 else ''} in {'Inspect AI eval logs' if fmt == 'inspect' else 'lm-eval'}'s layout")
    return ExitCode.OK


def _run(view: WorkDirView) -> dict[str, Any]:
    plan = view.plan.snapshot()
    return {"schema": SCHEMA, "evaltui": __version__, "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "work_dir": str(view.workdir.root), "plan": plan}


def _pair(view: WorkDirView, pair: PairView, versions: dict[str, str]) -> dict[str, Any]:
    data = pair._asdict()
    data["leaderboard_version"] = versions.get(pair.dataset, "")
    return data


def _versions(view: WorkDirView) -> dict[str, str]:
    """Each dataset's version as the leaderboard shows it."""
    return {row.abbr: row.version for row in RunSummary(view.plan).rows() if row.main}


def _json(f: IO[bytes], view: WorkDirView, pairs: list[PairView], records: Records) -> None:
    head = json_bytes(_run(view))
    f.write(head[:-1] + b',\n"pairs": [')
    versions = _versions(view)
    for n, pair in enumerate(pairs):
        body = json_bytes(_pair(view, pair, versions))
        f.write(b"%s\n%s,\n \"records\": [" % (b"," if n else b"", body[:-1]))
        for k, record in enumerate(records(pair)):
            f.write(b"%s\n  %s" % (b"," if k else b"", json_bytes(record)))
        f.write(b"]}")
    f.write(b"\n]}\n")


def _jsonl(f: IO[bytes], view: WorkDirView, pairs: list[PairView], records: Records) -> None:
    f.write(json_bytes({"type": "run", **_run(view)}) + b"\n")
    versions = _versions(view)
    for pair in pairs:
        f.write(json_bytes({"type": "pair", **_pair(view, pair, versions)}) + b"\n")
        for record in records(pair):
            f.write(json_bytes({"type": "sample", "model": pair.model, "dataset": pair.dataset, **record}) + b"\n")
