"""The bad-plan corpus (RELIABILITY.md §5): every file in tests/bad_plans/ is a plan a user could
write, broken in one way. Its first line says what the user must read: `# expect: a | b`, each
`|`-separated fragment somewhere on stderr. Each must exit 2, print only lines naming the file,
no traceback, and start nothing (no work dir). Most run through `cli.main` in-process (fast); a
few through the real `evaltui` command in a subprocess.

To add a case: drop a `.toml` file in tests/bad_plans/ with its `# expect:` line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evaltui.cli import main

pytestmark = pytest.mark.reliability

CORPUS = Path(__file__).resolve().parent / "bad_plans"
PLANS = sorted(CORPUS.glob("*.toml"))
UNSET_VAR = "EVALTUI_BAD_PLAN_UNSET_KEY"
IN_SUBPROCESS = {"syntax_bad_escape", "abbr_climbs_out", "api_key_env_unset", "header_value_with_crlf", "url_port_out_of_range"}


def expected(plan: Path) -> list[str]:
    first = plan.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{plan.name}: the first line must be '# expect: <fragment> | …'"
    return [f.strip() for f in first.removeprefix("# expect: ").split(" | ") if f.strip()]


def check(plan: Path, code: int, out: str, err: str) -> None:
    assert code == 2, f"{plan.name}: exit {code}\n{err}"
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(f"{plan.name}: ") for line in lines), err
    for fragment in expected(plan):
        assert fragment in err, f"{plan.name}: {fragment!r} not in stderr:\n{err}"


def test_the_corpus_is_large_and_every_case_says_what_it_expects() -> None:
    assert len(PLANS) >= 25
    for plan in PLANS:
        assert expected(plan)


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that should have been rejected must not start a run."""

    def refuse(*a: Any, **kw: Any) -> Any:
        raise AssertionError("the plan was accepted and a run was started")

    import evaltui.engine.run.runner

    monkeypatch.setattr(evaltui.engine.run.runner, "Runner", refuse)
    monkeypatch.delenv(UNSET_VAR, raising=False)


@pytest.mark.parametrize("plan", [p for p in PLANS if p.stem not in IN_SUBPROCESS], ids=lambda p: p.stem)
def test_bad_plan_in_process(plan: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_run: None) -> None:
    code = main([str(plan), "--no-ui", "--work-dir", str(tmp_path / "wd")])
    out, err = capsys.readouterr()
    check(plan, code, out, err)
    assert not (tmp_path / "wd").exists() and not (CORPUS / "out").exists()


@pytest.mark.parametrize("plan", [p for p in PLANS if p.stem in IN_SUBPROCESS], ids=lambda p: p.stem)
def test_bad_plan_through_the_real_command(plan: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != UNSET_VAR}
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui", str(plan), "--no-ui", "--work-dir", str(tmp_path / "wd")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
    )
    check(plan, proc.returncode, proc.stdout, proc.stderr)
    assert not (tmp_path / "wd").exists() and not (CORPUS / "out").exists()
