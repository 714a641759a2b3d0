"""An OpenCompass work dir (`outputs/<name>/<timestamp>/`) as `evaltui watch` reads it.

What is read (all of it only read, never locked: OpenCompass's own `.locks/` are left alone):

- `infer_status/<model>/<dataset>[_<i>].json`: `{"status", "total", "completed", "updated_at"}`
  of the concurrent-infer task; written in place, so a torn read is ignored until the next one
  (a dataset known only from a torn one is none until it can be read).
  A pair without one is `running` while a `tmp_` file exists, `done` once its predictions do.
- `predictions/<model>/<dataset>[_<i>].json` (final) and `tmp_<dataset>[_<i>].json` (rewritten
  whole as samples finish) or `tmp_<dataset>[_<i>].jsonl` (one line a sample): samples counted
  by their keys or lines (opencompass_tally.py). `<dataset>_<i>` are the parts of a dataset
  split by the partitioner (`_0` exists, the bare name does not).
- `results/<model>/<dataset>.json`: the score is the summary's metric for the dataset, else the
  first number in the file; `{"error": …}` is a scoring error.
- `summary/summary_<timestamp>.csv`: the leaderboard's rows (dataset, version, metric, mode)
  and scores, once OpenCompass has written it (it does so last: the run is then over, and its
  datasets are the run's: the files of any other are left out).
- `infer_heartbeat`: `datetime.now().isoformat()`, naive local time (WorkDir.heartbeat_age).

Not read: `configs/` (Python), `logs/` (free text), per-sample errors (OpenCompass keeps none in
its predictions: a failed request is an empty prediction), in-flight counts, the OpenCompass
`heartbeat_timeout` setting (60 s, its default, is assumed).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.engine.disk.details import PairDetails, PredictionSample
from evaltui.engine.disk.heartbeat import last_beat
from evaltui.engine.disk.workdir import RESULT_BYTES, STATUS_BYTES, WorkDir
from evaltui.engine.follow.evaltui_view import newest_summary
from evaltui.engine.follow.opencompass_samples import part_files, read_entries
from evaltui.engine.follow.opencompass_tally import PredictionCount
from evaltui.engine.follow.view import JudgeSpec, PairSpec, Score, ShardStatus, stat_key
from evaltui.engine.stream.events import Pair, PairStatus
from evaltui.fsutil import Unreadable, read_json, read_regular

if TYPE_CHECKING:
    from evaltui.plan import ModelConfig
    from evaltui.scoring.leaderboard import Leaderboard
    from evaltui.scoring.stats import Interval

HEARTBEAT_TIMEOUT = 60.0  # OpenCompass's default for its eval-watch task
FOLDERS = ("infer_status", "predictions", "results")
MARKERS = (*FOLDERS, "summary", "configs")  # what makes a folder an OpenCompass work dir
_STATUSES = {s.value: s for s in (PairStatus.PENDING, PairStatus.RUNNING, PairStatus.DONE, PairStatus.FAIL)}
_PART = re.compile(r"^(.+)_(\d+)$")


def is_opencompass_dir(root: Path) -> bool:
    return not (root / "plan.toml").exists() and any((root / name).is_dir() for name in MARKERS)


def _json_names(folder: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(folder) if e.is_file() and (e.name.endswith(".json") or e.name.endswith(".jsonl")))
    except OSError:
        return []


def _subfolders(folder: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []


def _shards_of(names: set[str]) -> dict[str, int]:
    """Dataset -> its number of parts, from the stems found (`x`, or `x_0`, `x_1`, …)."""
    found: dict[str, int] = {}
    for name in sorted(names):
        m = _PART.match(name)
        if m and f"{m.group(1)}_0" in names and m.group(1) not in names:
            found[m.group(1)] = max(found.get(m.group(1), 1), int(m.group(2)) + 1)
        else:
            found.setdefault(name, 1)
    return found


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class OpenCompassView:
    kind = "OpenCompass"
    heartbeat_timeout = HEARTBEAT_TIMEOUT
    log_interval = 30.0  # as OpenCompass's own tasks log
    problem = ""
    expects = "no infer_status/, predictions/ or results/ files (its tasks write them as they begin)"

    def __init__(self, root: Path):
        self.root = root
        self.title = f"OpenCompass {root.name}"
        self.models: dict[str, ModelConfig] = {}  # OpenCompass's model configs are Python: not read
        self.epochs: dict[str, int] = {}  # nor its datasets'
        self._heartbeat = WorkDir(root)
        self._folder_keys: dict[Path, object] = {}
        self._names: dict[tuple[str, str], set[str]] = {}  # (folder, model) -> stems found there
        self._specs: list[PairSpec] = []
        self._unread: set[tuple[str, str]] = set()  # (model, stem) known only from a status file not readable yet
        self._summary_key: object = None
        self._summary: tuple[list[tuple[str, str, str, str]], list[str], dict[Pair, float | None]] | None = None
        self._newest = 0.0  # the newest mtime seen among the files looked at

    # -- what defines the pairs: the folders' listings
    def refresh(self) -> bool:
        """List again the folders whose mtime moved. Pairs only ever appear (the follower adds
        them as they do), so this never says a new run began."""
        moved = False
        for folder in FOLDERS:
            for model in _subfolders(self.root / folder):
                path = self.root / folder / model
                key = stat_key(path)
                if key != self._folder_keys.get(path):
                    self._folder_keys[path] = key
                    self._names[(folder, model)] = self._stems(folder, path)
                    moved = True
                    self._saw(key)
        summary = self.summary_files().get("csv")
        key = stat_key(Path(summary)) if summary else None
        if key != self._summary_key:
            self._summary_key, self._summary = key, self._read_summary(summary)
            moved = True
        if moved or any(self._status_of(m, stem) is not None for m, stem in self._unread):
            self._specs = self._compute_specs()
        return False

    @staticmethod
    def _stems(folder: str, path: Path) -> set[str]:
        stems = set()
        for name in _json_names(path):
            stem = name.rpartition(".")[0]
            if folder == "predictions" and stem.startswith("tmp_"):
                stem = stem[len("tmp_") :]
            stems.add(stem)
        return stems

    def _compute_specs(self) -> list[PairSpec]:
        """Each model's datasets from the folders' names; with a summary (the run's last word),
        only the datasets it lists. A name known only from a status file that cannot be read
        (torn as it is written in place) is no dataset until it can be."""
        models = list(self._summary[1]) if self._summary else []
        models += sorted({m for _, m in self._names} - set(models))
        order = [row[0] for row in self._summary[0]] if self._summary else []
        self._unread = set()
        specs = []
        for model in models:
            named = self._names.get(("predictions", model), set()) | self._names.get(("results", model), set())
            statuses = self._names.get(("infer_status", model), set())
            unread = {stem for stem in statuses - named if self._status_of(model, stem) is None}
            self._unread |= {(model, stem) for stem in unread}
            shards = _shards_of((statuses - unread) | self._names.get(("predictions", model), set()))
            for dataset in self._names.get(("results", model), set()) | set(order):
                shards.setdefault(dataset, 1)
            for dataset in sorted(shards, key=lambda d: (order.index(d) if d in order else len(order), d)):
                if not order or dataset in order:
                    specs.append(PairSpec(model, dataset, shards[dataset]))
        return specs

    def pairs(self) -> list[PairSpec]:
        return self._specs

    # -- a pair's files
    def _part(self, dataset: str, shard: int, shards: int) -> str:
        return f"{dataset}_{shard}" if shards > 1 else dataset

    def status_key(self, model: str, dataset: str, shard: int, shards: int) -> object:
        part = self._part(dataset, shard, shards)
        folder = self.root / "predictions" / model
        keys = (
            stat_key(self.root / "infer_status" / model / f"{part}.json"),
            stat_key(folder / f"tmp_{part}.json"),
            stat_key(folder / f"tmp_{part}.jsonl"),
            stat_key(folder / f"{part}.json"),
        )
        for key in keys:
            self._saw(key)
        return keys

    def _status_of(self, model: str, part: str) -> ShardStatus | None:
        """What `infer_status/<model>/<part>.json` says; None when it is missing, torn or no status."""
        try:
            data = read_json(self.root / "infer_status" / model / f"{part}.json", STATUS_BYTES)
        except Unreadable:
            raise
        except OSError:
            return None
        if isinstance(data, dict) and data.get("status") in _STATUSES:
            counts = _int_or_none(data.get("total")), _int_or_none(data.get("completed"))
            return ShardStatus(_STATUSES[data["status"]], *counts, None, str(data.get("error") or ""))
        return None

    def read_status(self, model: str, dataset: str, shard: int, shards: int) -> ShardStatus | None:
        part = self._part(dataset, shard, shards)
        status = self._status_of(model, part)
        if status is not None:
            return status
        if (self.root / "infer_status" / model / f"{part}.json").exists():
            return None  # being written (OpenCompass writes it in place): the last good one stands
        folder = self.root / "predictions" / model
        if (folder / f"{part}.json").exists():
            return ShardStatus(PairStatus.DONE)
        if (folder / f"tmp_{part}.json").exists() or (folder / f"tmp_{part}.jsonl").exists():
            return ShardStatus(PairStatus.RUNNING)
        return None

    def tally(self, model: str, dataset: str, shard: int, shards: int) -> PredictionCount:
        part = self._part(dataset, shard, shards)
        folder = self.root / "predictions" / model
        return PredictionCount(folder / f"{part}.json", folder / f"tmp_{part}.json", folder / f"tmp_{part}.jsonl")

    def predictions_file(self, model: str, dataset: str) -> Path:
        return self.root / "predictions" / model / f"{dataset}.json"

    def result_file(self, model: str, dataset: str) -> Path:
        return self.root / "results" / model / f"{dataset}.json"

    def judging(self, model: str, dataset: str) -> JudgeSpec | None:
        """OpenCompass's judged datasets write no verdicts file evaltui knows: not counted."""
        return None

    def score(self, model: str, dataset: str) -> Score | None:
        path = self.result_file(model, dataset)
        try:
            data = read_json(path, RESULT_BYTES)
        except Unreadable:
            raise
        except OSError:
            return None
        self._saw(stat_key(path))
        if not isinstance(data, dict):
            return None
        wanted = self._metric_of(dataset)
        if "error" in data:
            return Score(wanted or "score", None, str(data["error"]))
        if wanted and _number(data.get(wanted)) is not None:
            return Score(wanted, _number(data[wanted]))
        for key, value in data.items():
            if _number(value) is not None:
                return Score(str(key), _number(value))
        return Score(wanted or "score", None, f"no score in {path.name}")

    def _metric_of(self, dataset: str) -> str:
        rows = self._summary[0] if self._summary else []
        return next((metric for abbr, _, metric, _ in rows if abbr == dataset), "")

    # -- the run
    def holder(self) -> int | None:
        return None  # OpenCompass holds no lock evaltui could see: its files tell

    def heartbeat_key(self) -> object:
        key = stat_key(self._heartbeat.heartbeat_file)
        self._saw(key)
        return key

    def heartbeat_at(self) -> float | None:
        return last_beat(self._heartbeat)

    def activity_at(self) -> float | None:
        beat = self.heartbeat_at()
        newest = max(self._newest, beat or 0.0)
        return newest or None

    def _saw(self, key: object) -> None:
        if isinstance(key, tuple) and len(key) == 3:
            self._newest = max(self._newest, key[2] / 1e9)

    def ended_at(self) -> float | None:
        """Its last heartbeat (OpenCompass beats until the end); else the newest file seen."""
        return self.heartbeat_at() or self.activity_at()

    def began_at(self) -> float | None:
        """OpenCompass names the run's folder after the time it began."""
        try:
            return datetime.strptime(self.root.name, "%Y%m%d_%H%M%S").timestamp()
        except ValueError:
            return None

    def ended(self) -> bool:
        """OpenCompass writes its summary last: one written after everything else ends the run."""
        at = self.activity_at()
        written = [_mtime(path) for path in self.summary_files().values()]
        return at is not None and any(t is not None and t >= at for t in written)

    def summary_files(self) -> dict[str, str]:
        return newest_summary(self.root / "summary")

    @staticmethod
    def _read_summary(path: str | None) -> tuple[list[tuple[str, str, str, str]], list[str], dict[Pair, float | None]] | None:
        """(rows, models, scores) of a summary CSV (`dataset,version,metric,mode,<models…>`);
        section lines (`----- Exam -----`) are left out."""
        if path is None:
            return None
        try:
            text = read_regular(path, RESULT_BYTES).decode("utf-8", "replace")
        except Unreadable:
            raise
        except OSError:
            return None
        lines = list(csv.reader(io.StringIO(text)))
        if not lines or [c.strip() for c in lines[0][:4]] != ["dataset", "version", "metric", "mode"]:
            return None
        models = [c.strip() for c in lines[0][4:]]
        rows: list[tuple[str, str, str, str]] = []
        scores: dict[Pair, float | None] = {}
        for line in lines[1:]:
            if len(line) < 4 or not line[0].strip() or line[0].startswith("-"):
                continue
            abbr = line[0].strip()
            rows.append((abbr, line[1].strip(), line[2].strip(), line[3].strip()))
            for model, cell in zip(models, line[4:], strict=False):
                try:
                    scores[(model, abbr)] = float(cell)
                except ValueError:
                    scores[(model, abbr)] = None
        return rows, models, scores

    def leaderboard(
        self,
        scores: Mapping[Pair, float | None],
        extra: Mapping[tuple[str, str, str], float | None] | None = None,
        intervals: Mapping[tuple[str, str, str], Interval] | None = None,
    ) -> Leaderboard:
        """(OpenCompass names one metric per row of its summary: no `extra`.)"""
        from evaltui.scoring.leaderboard import MISSING, build_leaderboard

        rows, models, known = self._summary if self._summary else ([], [], {})
        rows = list(rows)
        seen_rows = {r[0] for r in rows}
        for spec in self._specs:
            if spec.dataset not in seen_rows:
                seen_rows.add(spec.dataset)
                rows.append((spec.dataset, MISSING, self._metric_of(spec.dataset) or MISSING, MISSING))
        models = list(dict.fromkeys([*models, *(s.model for s in self._specs)]))
        merged = {**{k: v for k, v in known.items() if v is not None}, **{k: v for k, v in scores.items() if v is not None}}
        return build_leaderboard(rows, models, merged)

    def details(self, model: str, dataset: str, status: PairStatus, predictions: int = 5) -> PairDetails:
        """A few predictions next to their gold (OpenCompass keeps no per-sample errors)."""
        files = part_files(self.root / "predictions" / model, dataset)  # (of a split dataset, its first part's)
        entries = read_entries(files[0])[:predictions] if files else []
        shown = [PredictionSample(i, _text(e.get("origin_prompt")), _text(e.get("prediction")), _text(e.get("gold")), None) for i, e in entries]
        return PairDetails(model, dataset, status, [], shown, {})  # OpenCompass keeps no per-sample log


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)
