"""The checks CI runs on the code itself: mypy --strict on evaltui/, ruff on the whole tree, and
the import contracts that keep textual and rich out of the engine and every import pointing down
the layers (all configured in pyproject.toml)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors_in_the_package() -> None:
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_engine_never_imports_textual_or_rich() -> None:
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_logo=True, no_cache=True))"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 kept, 0 broken" in r.stdout


def test_ruff_finds_nothing() -> None:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "evaltui", "tests", "bench"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_function_is_more_complex_than_radon_grade_c() -> None:
    """Grade C ends at a cyclomatic complexity of 20; a function above it must say why in its docstring."""
    from radon.complexity import cc_visit

    over = []
    for path in sorted((REPO / "evaltui").rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > 20 and "complexity" not in _docstring_of(path, block.lineno):
                over.append(f"{path.relative_to(REPO)}:{block.lineno} {block.fullname} ({block.complexity})")
    assert not over, over


def _docstring_of(path: Path, lineno: int) -> str:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.lineno == lineno:
            return ast.get_docstring(node) or ""
    return ""
