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


MAX_MODULE_LINES = 400
MAX_MODULES_A_FOLDER = 14


def test_no_import_circle_among_the_packages_modules() -> None:
    """An import that runs (not one under `if TYPE_CHECKING:`) never leads back to where it
    started: each module can be read, loaded and tested below the ones that use it."""
    import grimp

    graph = grimp.build_graph("evaltui", exclude_type_checking_imports=True)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    circles = [" -> ".join([*c, c[0]]) for c in _circles(edges)]
    assert not circles, circles


def _circles(edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, []))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    """The check above would pass on any graph if `_circles` found nothing: it finds a → b → c → a."""
    assert _circles({"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": []}) == [["a", "b", "c"]]
    assert _circles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_no_module_is_longer_than_400_lines() -> None:
    """A module over 400 lines holds more than one job: split it where the jobs part."""
    long = {
        str(path.relative_to(REPO)): n
        for path in sorted((REPO / "evaltui").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_folder_holds_more_than_14_modules() -> None:
    """A folder of more than 14 modules (its __init__ counted) is several rooms in one: give them sub-packages."""
    crowded = {
        str(folder.relative_to(REPO)): n
        for folder in sorted({p.parent for p in (REPO / "evaltui").rglob("*.py")})
        if (n := len(list(folder.glob("*.py")))) > MAX_MODULES_A_FOLDER
    }
    assert not crowded, crowded


def test_no_engine_or_plan_module_names_a_backend_type() -> None:
    """What a protocol is (its url's form, simulator path, greedy rule, whether it needs `model`,
    ppl) is declared on its backend class: the plan and the engine ask `backend_class(cfg)`,
    never `if cfg.type == "lightllm"`. A string that is a backend's type name is such a test."""
    from evaltui.backends import BACKENDS

    named = []
    for folder in ("engine", "plan"):
        for path in sorted((REPO / "evaltui" / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in BACKENDS:
                    named.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert not named, named
