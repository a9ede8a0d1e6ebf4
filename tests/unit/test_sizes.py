"""The house signs on size: a module over 500 lines or a function over 60 is a sign to
look. Most often it has more than one job: split it where the concept splits, never
where the line count says (a split that only makes this test pass is worse than the
long module). When the look says it is one concept, name it below with the reason,
and the test holds the list short and true: an exception that is no longer over its
limit is removed. Migrations are generated history: exempt."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "django_jobqueue"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

# "path" or "path:qualified.function" -> why it is one piece.
MODULE_EXCEPTIONS: dict[str, str] = {}
FUNCTION_EXCEPTIONS: dict[str, str] = {}

SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_the_scan_sees_the_package() -> None:
    assert len(SOURCES) > 50
    assert any(p.name == "loop.py" for p in SOURCES)


def _long_modules() -> dict[str, int]:
    return {
        _name(p): n
        for p in SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }


def test_no_module_is_over_500_lines_unless_named_with_its_reason() -> None:
    long = {name: n for name, n in _long_modules().items() if name not in MODULE_EXCEPTIONS}
    assert not long, (
        f"modules over {MAX_MODULE_LINES} lines: {long}: split along a concept, or name "
        "the module in MODULE_EXCEPTIONS with the reason it is one"
    )


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


def _long_functions() -> dict[str, int]:
    long = {}
    for path in SOURCES:
        for qualname, fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            first = fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno
            lines = (fn.end_lineno or fn.lineno) - first + 1
            if lines > MAX_FUNCTION_LINES:
                long[f"{_name(path)}:{qualname}"] = lines
    return long


def test_no_function_is_over_60_lines_unless_named_with_its_reason() -> None:
    long = {name: n for name, n in _long_functions().items() if name not in FUNCTION_EXCEPTIONS}
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines: {long}: split along a concept, or "
        "name the function in FUNCTION_EXCEPTIONS with the reason it is one"
    )


def test_every_named_exception_is_still_over_its_limit_and_says_why() -> None:
    stale = (set(MODULE_EXCEPTIONS) - set(_long_modules())) | (
        set(FUNCTION_EXCEPTIONS) - set(_long_functions())
    )
    assert not stale, f"no longer over the limit, remove from the exceptions: {sorted(stale)}"
    unexplained = [n for n, why in {**MODULE_EXCEPTIONS, **FUNCTION_EXCEPTIONS}.items() if not why]
    assert not unexplained, f"exceptions without a reason: {unexplained}"
