"""`evaltui compare WORK_DIR_A WORK_DIR_B`: two runs' scores side by side, and the samples that flipped.

Per dataset scored in both (the same model in both, or — when each run took up one model —
the two models), the main metric of each, the delta, and the samples right in A and wrong in B and
the other way round. A sample counts as right when its score is at least 0.5 (one epoch:
correct; several: its reduced score). Datasets whose fingerprints differ (data, prompts,
evaluator, epochs or selection: versions.dataset_fingerprint) are not compared, with one line
naming them, unless --force: their scores would not mean the same thing.

Whether the difference is more than chance is tested on the samples scored in both, paired:
McNemar's exact test where every sample is right or wrong, a paired bootstrap of the mean
difference otherwise (scoring/stats/significance.py); the p-value and `significant` (p < 0.05).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

from evaltui.cliargs import OneLineParser
from evaltui.commands.common import WorkDirArgs, add_selection, count, read_work_dir, unknown_abbrs
from evaltui.engine.disk.records import PairView, WorkDirView, iter_result_details
from evaltui.engine.disk.versions import dataset_fingerprint
from evaltui.exitcode import ExitCode
from evaltui.scoring.score import sample_right, sample_value
from evaltui.scoring.stats import Significance, mcnemar_exact, paired_bootstrap


def build_parser() -> OneLineParser:
    p = OneLineParser(
        prog="evaltui compare",
        description="Compare two runs: per dataset the score of each, the delta, and the samples that flipped.",
        epilog="Datasets whose fingerprints differ (data, prompts, evaluator, epochs, selection) are refused unless --force. "
        "p: McNemar's exact test on the flipped samples (right/wrong scores), else a paired bootstrap of the mean difference; "
        "significant: p < 0.05. See README.md.",
    )
    p.add_argument("a", metavar="WORK_DIR_A", help="the first run's work dir")
    p.add_argument("b", metavar="WORK_DIR_B", help="the second run's work dir")
    add_selection(p)
    p.add_argument("--json", action="store_true", help="print the comparison as JSON (every flipped sample) instead of a table")
    p.add_argument("--force", action="store_true", help="compare datasets even when their fingerprints differ")
    p.add_argument("--list", type=count, default=20, metavar="N", help="table: at most N flipped sample indices per direction (default 20; 0: none)")
    return p


class Row(NamedTuple):
    dataset: str
    model_a: str
    model_b: str
    metric: str
    a: float | None
    b: float | None
    right_to_wrong: list[int]
    wrong_to_right: list[int]
    samples: int  # scored in both
    fingerprints: tuple[str, str]
    test: str = ""  # "mcnemar" (right/wrong scores) | "bootstrap" (others)
    p_value: float | None = None  # that the difference is chance, on the samples scored in both

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else Significance(self.test, self.p_value).significant

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else round(self.b - self.a, 2)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    view_a = read_work_dir(WorkDirArgs(args.a, None, None))
    view_b = read_work_dir(WorkDirArgs(args.b, None, None))
    if view_a is None or view_b is None:
        return ExitCode.USAGE
    problem = unknown_abbrs([view_a, view_b], [args.a, args.b], args.models, args.datasets)
    if problem:
        print(f"evaltui: compare: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    matched = _matched(view_a.pairs(args.models, args.datasets), view_b.pairs(args.models, args.datasets))
    if not matched:
        print(f"evaltui: compare: no model×dataset is scored in both {args.a} and {args.b}", file=sys.stderr)
        return ExitCode.FAILED
    prints = [(_fingerprint(view_a, a), _fingerprint(view_b, b)) for a, b in matched]
    differ = [(a, fa, fb) for (a, _), (fa, fb) in zip(matched, prints, strict=True) if fa != fb or not fa]
    if differ and not args.force:
        for pair, fa, fb in differ:
            print(f"evaltui: compare: {pair.dataset}: the datasets differ (fingerprint {fa or 'unknown'} in A, {fb or 'unknown'} in B: "
                  "their data, prompts, evaluator, epochs or selection); --force compares them anyway", file=sys.stderr)
        return ExitCode.USAGE
    rows = [_row(view_a, view_b, a, b, f) for (a, b), f in zip(matched, prints, strict=True)]
    if args.json:
        out = [{**r._asdict(), "delta": r.delta, "significant": r.significant} for r in rows]
        print(json.dumps({"a": str(view_a.workdir.root), "b": str(view_b.workdir.root), "rows": out}, indent=2))
    else:
        sys.stdout.write(render(rows, args.list))
    return ExitCode.OK


def _matched(pairs_a: list[PairView], pairs_b: list[PairView]) -> list[tuple[PairView, PairView]]:
    """The scored pairs of A and B to compare: the same model and dataset; or, when each run
    took up one model, the same dataset. What a run took up is what its files show (status
    files or results), not its plan.toml: a `--models` run snapshots the whole plan."""
    scored_a = [p for p in pairs_a if p.metrics]
    scored_b = {(p.model, p.dataset): p for p in pairs_b if p.metrics}
    same = [(a, scored_b[(a.model, a.dataset)]) for a in scored_a if (a.model, a.dataset) in scored_b]
    if same or len(_models_run(pairs_a)) != 1 or len(_models_run(pairs_b)) != 1:
        return same
    by_dataset = {p.dataset: p for p in scored_b.values()}
    return [(a, by_dataset[a.dataset]) for a in scored_a if a.dataset in by_dataset]


def _models_run(pairs: list[PairView]) -> set[str]:
    """The models with a trace in the work dir (a status or a result of some dataset)."""
    return {p.model for p in pairs if p.status}


def _fingerprint(view: WorkDirView, pair: PairView) -> str:
    """The result's record of it, or computed from the run's plan and data (an older result)."""
    return pair.dataset_version or dataset_fingerprint(view.plan, view.plan.dataset(pair.dataset))


def _row(view_a: WorkDirView, view_b: WorkDirView, a: PairView, b: PairView, prints: tuple[str, str]) -> Row:
    assert a.metrics is not None and b.metrics is not None
    metric = next(iter(a.metrics))
    seen_a = {index: (right, value) for index, right, value in _verdicts(view_a, a, metric)}
    to_wrong, to_right, values_a, values_b = [], [], [], []
    for index, right, value in _verdicts(view_b, b, metric):
        if index not in seen_a:
            continue
        right_a, value_a = seen_a[index]
        values_a.append(value_a)
        values_b.append(value)
        if right_a and not right:
            to_wrong.append(index)
        elif right and not right_a:
            to_right.append(index)
    test = _significance(values_a, values_b, len(to_wrong), len(to_right))
    return Row(a.dataset, a.model, b.model, metric, a.metrics.get(metric), b.metrics.get(metric), to_wrong, to_right, len(values_a), prints, *test)


def _significance(values_a: list[float], values_b: list[float], right_to_wrong: int, wrong_to_right: int) -> Significance:
    """McNemar's exact test when every sample is right or wrong (1 or 0) in both runs, else the
    paired bootstrap of the per-sample scores."""
    if all(v in (0.0, 1.0) for v in (*values_a, *values_b)):
        return mcnemar_exact(right_to_wrong, wrong_to_right)
    return paired_bootstrap(values_a, values_b)


def _verdicts(view: WorkDirView, pair: PairView, metric: str) -> Iterator[tuple[int, bool, float]]:
    """Each sample's index, whether it counts as right, and its score by `metric` (0–1)."""
    for detail in iter_result_details(view.workdir.result_file(pair.model, pair.dataset)):
        yield detail["index"], sample_right(detail, metric), sample_value(detail, metric)


def render(rows: list[Row], most: int) -> str:
    """The table, then the flipped samples of each row that has any."""
    header = ["dataset", "model", "metric", "A", "B", "delta", "right→wrong", "wrong→right", "samples", "p", "significant"]
    cells = [
        [r.dataset, r.model_a if r.model_a == r.model_b else f"{r.model_a} → {r.model_b}", r.metric, _score(r.a), _score(r.b),
         "-" if r.delta is None else f"{r.delta:+.2f}", str(len(r.right_to_wrong)), str(len(r.wrong_to_right)), str(r.samples),
         _p(r.p_value), "-" if r.significant is None else ("yes" if r.significant else "no")]
        for r in rows
    ]
    widths = [max(len(line[c]) for line in [header, *cells]) for c in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(cell.ljust(w) if c < 3 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths), *(line(c) for c in cells)]
    for r in rows:
        for label, indices in (("right→wrong", r.right_to_wrong), ("wrong→right", r.wrong_to_right)):
            if indices and most:
                shown = ", ".join(map(str, indices[:most])) + (f", … ({len(indices) - most} more)" if len(indices) > most else "")
                out.append(f"{r.dataset} {r.model_a}: {label}: {shown}")
    return "\n".join(out) + "\n"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _score(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"
