"""The house limits on size: no module of the package over 500 lines, no function over
60. A module or function that grows past them has more than one job; split it where
the seam is, rather than raising the limit. Migrations are generated history: exempt."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "django_jobqueue"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_the_scan_sees_the_package() -> None:
    assert len(SOURCES) > 50
    assert any(p.name == "loop.py" for p in SOURCES)


def test_no_module_is_over_500_lines() -> None:
    long = {
        _name(p): n
        for p in SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method, with its qualified name (nested ones included)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, child))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def test_no_function_is_over_60_lines() -> None:
    long = {}
    for path in SOURCES:
        for qualname, fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            first = fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno
            lines = (fn.end_lineno or fn.lineno) - first + 1
            if lines > MAX_FUNCTION_LINES:
                long[f"{_name(path)}:{qualname}"] = lines
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
