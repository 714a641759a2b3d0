"""A benchmark's data from the Hub, as a user gets them: through huggingface_hub, its cache,
HF_HUB_OFFLINE, a mirror (HF_ENDPOINT) and HF_TOKEN for gated sets.

The Hub is a loopback stand-in (tests/hubkit.py) serving small parquet files in the real repo's
layout; HF_HOME is a temporary folder. evaltui runs as a user runs it, `evaltui PLAN --no-ui`
in a subprocess (huggingface_hub reads its environment when it is imported).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hubkit import fake_hub, parquet_bytes

pytestmark = pytest.mark.reliability

ROWS = [{"question": f"Tom has {n} apples and buys {n + 3} more. How many apples does he have?", "answer": f"He has {n} + {n + 3} = {2 * n + 3}.\n#### {2 * n + 3}"}
        for n in range(1, 13)]
REPOS = {"openai/gsm8k": {"main/test-00000-of-00001.parquet": parquet_bytes(ROWS), "main/train-00000-of-00001.parquet": parquet_bytes(ROWS[:8]),
                          "README.md": b"# gsm8k\n"}}
PLAN = """
[run]
heartbeat_interval = 0.2
poll_interval = 0.1
watch_interval = 0.2
[[models]]
abbr = "m"
type = "openai-chat"
url = "sim://?latency=0"
[[datasets]]
abbr = "g"
benchmark = "gsm8k_cot"
limit = 6
"""


def _run(tmp_path: Path, hub_env: dict[str, str], plan: str = PLAN, work: str = "out") -> subprocess.CompletedProcess[str]:
    path = tmp_path / "plan.toml"
    path.write_text(plan, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf"), **hub_env)
    cmd = [sys.executable, "-m", "evaltui", str(path), "--no-ui", "--work-dir", str(tmp_path / work)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _files_asked(hub: Any) -> list[str]:
    return [p.rsplit("/", 1)[-1] for p in hub.file_gets()]


def test_a_benchmark_without_a_path_downloads_its_files_once_with_progress_then_runs_offline(tmp_path: Path) -> None:
    with fake_hub(REPOS) as hub:
        first = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint})
        assert first.returncode == 0, first.stdout + first.stderr
        assert "g: downloaded openai/gsm8k from the Hub: " in first.stdout  # the progress, as the run's own line
        assert _files_asked(hub) == ["test-00000-of-00001.parquet"]  # gsm8k_cot's examples are fixed: no train split
        assert "exact_match,strict-match" in first.stdout and "100.00" in first.stdout
        second = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint}, work="out2")
        assert second.returncode == 0, second.stderr
        assert _files_asked(hub) == ["test-00000-of-00001.parquet"], "the cache was not used"
        assert "downloaded" not in second.stdout
    # the Hub is gone: offline, from the cache alone
    third = _run(tmp_path, {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}, work="out3")
    assert third.returncode == 0, third.stdout + third.stderr


def test_offline_and_not_cached_is_one_line_naming_the_benchmark_and_saying_to_pass_path(tmp_path: Path) -> None:
    r = _run(tmp_path, {"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.splitlines() == [
        "plan.toml: datasets[0].benchmark: gsm8k_cot: HF_HUB_OFFLINE is set and its files (openai/gsm8k) are not in the Hub cache (HF_HOME): "
        "pass `path` to a local copy"
    ]


def test_a_gated_set_needs_hf_token_and_the_token_is_sent(tmp_path: Path) -> None:
    with fake_hub(REPOS, gated={"openai/gsm8k": "hf_secret_token_123"}) as hub:
        refused = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint})
        assert refused.returncode == 1
        assert "g: gsm8k_cot: openai/gsm8k on the Hub" in refused.stdout and "gated" in refused.stdout and "set HF_TOKEN" in refused.stdout
        assert "Traceback" not in refused.stdout + refused.stderr
        ok = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_secret_token_123"}, work="out2")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert {auth for m, p, auth in hub.requests if "/resolve/" in p} == {"Bearer hf_secret_token_123"}
    assert "hf_secret_token_123" not in (tmp_path / "out2" / "plan.toml").read_text()


def test_a_hub_that_does_not_answer_fails_the_run_with_one_line_saying_to_pass_path(tmp_path: Path) -> None:
    r = _run(tmp_path, {"HF_ENDPOINT": "http://127.0.0.1:9"})  # nothing listens on port 9
    assert r.returncode == 1
    lines = [line for line in r.stdout.splitlines() if "g: gsm8k_cot:" in line]
    assert len(lines) == 1 and "pass `path` to a local copy" in lines[0], r.stdout


def test_gpqa_diamond_is_gated_and_read_from_the_hubs_parquet_export(tmp_path: Path) -> None:
    """GPQA is not to be put online in plain text: Hub only, gated, from its parquet export branch."""
    rows = [{"Question": f"What is {n} squared?", "Correct Answer": str(n * n), "Incorrect Answer 1": str(n * n + 1), "Incorrect Answer 2": str(2 * n),
             "Incorrect Answer 3": str(n + 2), "Record ID": f"rec{n}"} for n in range(3, 9)]
    repos = {"Idavidrein/gpqa": {"gpqa_diamond/train/0000.parquet": parquet_bytes(rows)}}
    plan = PLAN.replace('benchmark = "gsm8k_cot"\nlimit = 6', 'benchmark = "gpqa_diamond"').replace('type = "openai-chat"', 'type = "openai-completions"')
    with fake_hub(repos, gated={"Idavidrein/gpqa": "hf_gpqa_token"}) as hub:
        refused = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint}, plan)
        assert refused.returncode == 1 and "gated" in refused.stdout and "HF_TOKEN" in refused.stdout
        ok = _run(tmp_path, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_gpqa_token"}, plan, work="out2")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert any("/revision/refs%2Fconvert%2Fparquet" in p or "/revision/refs/convert/parquet" in p for _, p, _ in hub.requests)
    assert "g        lm-eval gpqa_diamond_zeroshot v2.2  acc " in ok.stdout and "acc_norm" in ok.stdout
