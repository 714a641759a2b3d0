"""A damaged or hostile work dir (RELIABILITY.md §11, issue 23): a stop never exits 0 nor shows
an earlier subset's score as the whole dataset's; a file the run reads that is not a regular
file, or is huge, is one line naming it and exit 2; damaged checkpoint lines are set aside and
their samples sent again."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from planmaker import arithmetic, gsm_dataset, write_jsonl, write_plan

from evaltui.cli import main

pytestmark = pytest.mark.reliability


def sim_plan(tmp_path: Path, n: int = 40, **run: Any) -> Path:
    data = write_jsonl(tmp_path / "d.jsonl", arithmetic(n))
    models = [{"abbr": "m", "type": "lightllm", "url": "sim://?accuracy=1.0", "max_workers": 4}]
    return write_plan(tmp_path, models=models, datasets=[gsm_dataset("d1", data), gsm_dataset("d2", data)], run=run or None)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*argv, "--no-ui", "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_a_fatal_stop_exits_non_zero_and_never_shows_a_subsets_score_as_the_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A status file replaced by a folder stopped the run (`error: stopped: [Errno 21] Is a
    directory … fix this and run again`), then it exited 0, and `--json` showed d1 and d2 at
    100.0: an earlier 20-sample subset's score as the whole dataset's, without "(subset of 20)"."""
    plan = sim_plan(tmp_path)
    code, summary, _ = run_json(capsys, str(plan), "--samples", "0-19")
    assert code == 0 and summary is not None
    assert [d["note"] for d in summary["leaderboard"]["datasets"]] == ["subset of 20", "subset of 20"]
    status = tmp_path / "out" / "infer_status" / "m" / "d1.json"
    status.unlink()
    status.mkdir()  # damaged: a folder where the status file was
    code, summary, err = run_json(capsys, str(plan))
    assert code != 0, err
    board = summary["leaderboard"] if summary else None
    assert board is None or all(score is None for d in board["datasets"] for score in d["scores"].values()), board
    assert board is None or all(v is None for v in board["average"].values())
