"""The report as one HTML file: the page's style and script inline (report.css, report.js beside
this module), the run's summary as one JSON block, each pair's samples as packed chunks.

Written in one pass, streamed: a pair's chunks go out as its records are read, so memory holds
a chunk, the verdict letters and the timing arrays, never the run's samples. The summary comes
after the chunks (it is known only once they are counted) and the script last, so it runs once
everything it reads is in the page. Nothing is fetched: no network, no other file.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from datetime import datetime, timezone
from importlib.resources import files
from typing import IO, Any

from evaltui import __version__, fastjson
from evaltui.commands.report.rows import CHUNK, PairRows
from evaltui.commands.report.source import ReportSource
from evaltui.commands.report.timing import Timing
from evaltui.plan import Price

SCHEMA = "evaltui.report/1"
SECTIONS = (
    ("leaderboard", "Leaderboard"),
    ("chart", "Models × datasets"),
    ("progress", "Datasets"),
    ("failures", "Failures by class"),
    ("latency", "Latency and throughput"),
    ("samples", "Samples"),
)


def _asset(name: str) -> bytes:
    return files("evaltui.commands.report").joinpath(name).read_bytes()


def _json(data: Any) -> bytes:
    """JSON that cannot end the <script> it sits in: `<` only occurs inside strings, as \\u003c."""
    return fastjson.dumps(data).replace(b"<", b"\\u003c")


def _head(title: str) -> bytes:
    nav = "".join(f'<a href="#{key}">{label}</a>' for key, label in SECTIONS)
    sections = "".join(f'<section id="{key}"><h2>{label}</h2><div class="body"></div></section>' for key, label in SECTIONS)
    text = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · evaltui report</title><style>"
    )
    body = (
        f'</style></head><body><header><h1>{html.escape(title)}</h1><p id="about"></p><nav>{nav}</nav></header>'
        f'<main>{sections}</main><noscript><p class="note">This report draws its tables and charts with JavaScript: allow it for this file.</p></noscript>\n'
    )
    return text.encode() + _asset("report.css") + body.encode()


def write_report(source: ReportSource, out: IO[bytes]) -> dict[str, Any]:
    """The page for `source`, written to `out`; returns its summary (what the page says of the run)."""
    out.write(_head(source.title))
    timing = Timing()
    pairs = []
    for n, pair in enumerate(source.pairs):
        rows = PairRows()
        for k, chunk in enumerate(rows.chunked(_timed(timing, pair.model, source.records(pair.model, pair.dataset)))):
            out.write(b'<script type="application/x-evaltui-chunk" id="c%d-%d">%s</script>\n' % (n, k, chunk))
        pairs.append({
            "model": pair.model, "dataset": pair.dataset, "status": pair.status.value, "total": pair.total, "completed": pair.completed,
            "failed": pair.failed, "metric": pair.metric, "score": pair.score, "extra": [list(x) for x in pair.extra], "error": pair.error,
            "verdicts": "".join(rows.verdicts), "counts": dict(rows.counts), "failures": dict(rows.failures), "chunks": rows.chunks,
            "tokens": rows.tokens, "cost": _cost(source.price(pair.model), rows.tokens),
        })
    summary = _summary(source, pairs, timing)
    out.write(b'<script type="application/json" id="report-data">%s</script>\n' % _json(summary))
    out.write(b"<script>%s</script></body></html>\n" % _asset("report.js"))
    return summary


def _cost(price: Price | None, tokens: list[int]) -> float | None:
    return None if price is None else price.of(tokens[0], tokens[1])


def _timed(timing: Timing, model: str, records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for record in records:
        timing.add(model, record)
        yield record


def _summary(source: ReportSource, pairs: list[dict[str, Any]], timing: Timing) -> dict[str, Any]:
    board = source.leaderboard()
    table = board.as_json()
    table["ranking"] = [r.model for r in board.ranking()]
    state = source.follower.state
    done, failed, total = state.totals()
    return {
        "schema": SCHEMA, "evaltui": __version__, "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "title": source.title, "work_dir": str(source.root), "kind": source.kind, "live": source.live, "said": source.said(),
        "totals": {"completed": done, "failed": failed, "total": total}, "chunk": CHUNK,
        "leaderboard": table, "pairs": pairs,
        "latency": {model: snap.as_json() for model, snap in timing.profiles().items()},
        "timeline": timing.timeline(),
    }
