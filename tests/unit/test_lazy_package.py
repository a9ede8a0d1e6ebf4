"""The package's ``__init__`` loads its API on first use (PEP 562): importing it reads
no model and imports no store, every public name still resolves, and ``task`` is the
decorator though a subpackage has its name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import django_jobqueue
from django_jobqueue.task import functions

INIT = Path(django_jobqueue.__file__)


def test_every_public_name_resolves_eagerly_or_through_the_lazy_table() -> None:
    for name in django_jobqueue.__all__:
        assert getattr(django_jobqueue, name) is not None, name
    assert set(django_jobqueue.__all__) >= set(django_jobqueue._LAZY)
    assert set(dir(django_jobqueue)) >= set(django_jobqueue.__all__)


def test_the_lazy_table_and_the_type_checkers_imports_name_the_same_things() -> None:
    tree = ast.parse(INIT.read_text())
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    typed.update({a.name: imp.module for a in imp.names})
    assert typed == django_jobqueue._LAZY


def test_task_is_the_decorator_after_its_subpackage_is_imported() -> None:
    assert django_jobqueue.task is functions.task
    from django_jobqueue import task

    assert task is functions.task


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        django_jobqueue.no_such_name  # noqa: B018


def test_importing_the_package_imports_no_store_and_no_model() -> None:
    """As Django's first phase does (the app's package, before any model), and as a
    settings file that names ``Priority`` does: in a fresh interpreter, no settings."""
    code = (
        "import sys, django_jobqueue\n"
        "from django_jobqueue import Priority, Status, JobQueueError\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('django_jobqueue.store',"
        " 'django_jobqueue.models', 'django_jobqueue.task.functions',"
        " 'django_jobqueue.task.classes')))\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=INIT.parents[1],
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
