"""The package's import graph: every module imports only its own layer and those below
(type-only imports included), the storage layer sits below the task API, and nothing
imports in a circle (function-level imports included; type-only ones too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "django_jobqueue"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (type-only imports run never)."""
    nodes: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            todo.extend(node.orelse)
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _imports(path: Path, *, type_only_too: bool = False) -> set[str]:
    """Every django_jobqueue module ``path`` imports at run time, anywhere in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if type_only_too else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # "from . import store" imports the module store, not its package's names
            submodules = {f"{module}.{a.name}" for a in node.names} & MODULES
            found.update(submodules or {module})
    return {m for m in found if m.startswith("django_jobqueue")}


SOURCES = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts}
MODULES = set(SOURCES)


def _graph(*, type_only_too: bool = False) -> dict[str, set[str]]:
    return {
        name: {m for m in _imports(path, type_only_too=type_only_too) if m in MODULES and m != name}
        for name, path in SOURCES.items()
    }


def test_the_storage_package_imports_nothing_from_the_layers_above_it() -> None:
    above = {
        "django_jobqueue.task.functions",
        "django_jobqueue.task.classes",
        "django_jobqueue.task.handle",
        "django_jobqueue.run.executor",
        "django_jobqueue.worker.loop",
        "django_jobqueue.rules.control",
        "django_jobqueue.run.context",
    }
    graph = _graph(type_only_too=True)
    store = {m: deps for m, deps in graph.items() if m.startswith("django_jobqueue.store")}
    assert len(store) > 5
    for module, deps in store.items():
        assert not deps & above, f"{module} imports {sorted(deps & above)}"


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` (its modules in order, the first repeated at the
    end), or None. The package's __init__ re-exports the public API: an edge into it is
    not a layer, so it is left out."""
    graph = {m: {d for d in deps if d != "django_jobqueue"} for m, deps in graph.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = _first_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_package_has_no_import_cycle_counting_type_only_imports() -> None:
    """A circle closed only by an ``if TYPE_CHECKING:`` import is still two modules that
    each need the other to be understood: the lower one types against a Protocol of its
    own (``task.merge.Mergeable``, ``task.registry.Schedule``, ``admin.common.JobPages``)."""
    cycle = _first_cycle(_graph(type_only_too=True))
    assert cycle is None, "import cycle (type-only imports included): " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_circle_and_ignores_edges_into_the_package() -> None:
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _first_cycle(circle) == ["a", "b", "c", "a"]
    assert _first_cycle({"a": {"django_jobqueue"}, "django_jobqueue": {"a"}}) is None
    assert _first_cycle({"a": {"b"}, "b": set()}) is None


# ARCHITECTURE.md's dependency direction, lowest layer first. A module may import its
# own layer and the layers below it, never one above. A name covers a package's
# submodules; the longest name that matches a module places it (``rules.lifecycle`` sits
# below ``run``). A module in no layer fails the test until it is given one.
LAYERS: list[set[str]] = [
    # the vocabulary and pure helpers: no Django settings, no database
    {
        "states",
        "errors",
        "validation",
        "jsontext",
        "ids",
        "allocations",
        "formatting",
        "rules.backoff",
        "rules.control",
        "run.context",
        "loops",
        "rules.cron",
        "progress",
        "frames",
        "tracing",
        "sentry",
        "observers",
        "signals",
    },
    # the rules of how a run ends: still pure
    {"rules"},
    # settings, and what they say to hide
    {"conf", "clock", "periodic_setting", "databases_setting", "routing", "redaction"},
    # the tables
    {"models"},
    # every read and write the queue makes, and the databases' dialects
    {"store"},
    # defining and submitting work (and sending the signals of a job's life)
    {"task", "workflows"},
    # what happens to one claimed job
    {"run"},
    # the process that claims, runs and settles
    {"worker"},
    # what users and operators touch: the public API, the app, the test kit, the
    # commands, the admin, the Django Tasks backend and the system checks (which look
    # at the registered kinds as well as the settings)
    # and the Celery-compatible surface (contrib.celery, over task/ and workflows/)
    {
        "",
        "apps",
        "operations",
        "testing",
        "management",
        "admin",
        "backend",
        "checks",
        "metrics",
        "streams",
        "contrib",
    },
]


def _layer(module: str) -> int:
    name = module.removeprefix("django_jobqueue").removeprefix(".")
    best: tuple[int, int] | None = None
    for index, members in enumerate(LAYERS):
        for member in members:
            if name == member or (member and name.startswith(member + ".")) or not member:
                if not member and name:
                    continue
                if best is None or len(member) > best[0]:
                    best = (len(member), index)
    if best is None:
        raise AssertionError(f"{module} is in no layer of LAYERS: place it")
    return best[1]


def test_no_module_imports_a_layer_above_its_own() -> None:
    graph = _graph(type_only_too=True)
    upward = [
        f"{module} (layer {_layer(module)}) imports {dep} (layer {_layer(dep)})"
        for module, deps in sorted(graph.items())
        for dep in sorted(deps)
        if _layer(dep) > _layer(module)
    ]
    assert not upward, "\n".join(upward)


# The packages' order, lowest first: the structure drawing's floors. A module's package
# is its first name under django_jobqueue (a top-level module is its own). LAYERS
# places modules, a dotted name placing one module below its package's floor; its
# undotted names place whole packages, so that no arrow between two packages runs back
# up, except the type-only ones named in TYPE_ONLY_UP.
PACKAGES: list[set[str]] = [{name for name in layer if "." not in name} for layer in LAYERS]

# Imports from a lower package to a higher one, each type-only (under TYPE_CHECKING)
# and each with its reason.
TYPE_ONLY_UP: dict[tuple[str, str], str] = {
    # A task is defined with the Context it receives; the run, above, builds it.
    ("django_jobqueue.task.functions", "django_jobqueue.run.context"): "a task's ctx type",
    ("django_jobqueue.task.classes", "django_jobqueue.run.context"): "a task's ctx type",
    ("django_jobqueue.task.registry", "django_jobqueue.run.context"): "a task's ctx type",
}


def _package_floor(module: str) -> int:
    name = module.removeprefix("django_jobqueue").removeprefix(".").split(".")[0]
    for index, members in enumerate(PACKAGES):
        if name in members:
            return index
    raise AssertionError(f"{module}'s package is in no floor of PACKAGES: place it")


def test_no_import_runs_back_up_a_package_but_the_named_type_only_ones() -> None:
    typed, runtime = _graph(type_only_too=True), _graph()
    upward = {
        (module, dep)
        for module, deps in typed.items()
        for dep in deps
        if _package_floor(dep) > _package_floor(module)
    }
    unnamed = sorted(upward - set(TYPE_ONLY_UP))
    assert not unnamed, "imports back up a package, not named in TYPE_ONLY_UP: " + str(unnamed)
    at_run_time = sorted((m, d) for m, d in upward if d in runtime[m])
    assert not at_run_time, f"imports back up that are not type-only: {at_run_time}"
    stale = sorted(set(TYPE_ONLY_UP) - upward)
    assert not stale, f"TYPE_ONLY_UP names imports that are gone: {stale}"


def test_the_architecture_doc_lists_the_packages_floors_as_this_test_holds_them() -> None:
    """docs/explanation/architecture.md's numbered list under "The dependency direction"
    names each floor's packages in backticks, lowest first: the same as PACKAGES."""
    doc = (PACKAGE.parent / "docs" / "explanation" / "architecture.md").read_text()
    section = doc.split("## The dependency direction", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"\n\d+\. ", "\n1. " + section.split("\n1. ", 1)[1])[1:]
    floors = [
        {
            "" if name == "__init__" else name
            for name in re.findall(r"`([\w.]+)`", item.split(":")[0])
        }
        for item in items
    ]
    assert floors == PACKAGES
