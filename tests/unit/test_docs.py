"""The reference docs cover what the code has: every setting, every runworker flag, every
status and journal outcome, every public name and its parameters; and the docs' relative
links lead somewhere. No database."""

from __future__ import annotations

import enum
import inspect
import re
from pathlib import Path

from django.core.management.base import BaseCommand

import django_jobqueue
from django_jobqueue import Outcome, Status, conf
from django_jobqueue.management.commands import runworker

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# A reference-table row: "| `NAME ...` | ..." -> NAME
ROW = re.compile(r"^\|\s*`([^`\s]+)[^`]*`\s*\|", re.MULTILINE)
# An API reference entry: "### `name`", nothing else on the line.
ENTRY = re.compile(r"^### `([^`\s]+)`$", re.MULTILINE)


def read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section (up to the next level-2 heading)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def table_names(text: str) -> set[str]:
    return set(ROW.findall(text))


def own_runworker_options() -> set[str]:
    """Long options runworker adds to Django's standard ones (--settings, --verbosity...)."""
    parser = runworker.Command().create_parser("manage.py", "runworker")
    base = BaseCommand().create_parser("manage.py", "base")
    standard = {s for action in base._actions for s in action.option_strings}
    return {
        s
        for action in parser._actions
        for s in action.option_strings
        if s.startswith("--") and s not in standard
    }


def test_settings_reference_has_a_row_for_every_key_and_no_other() -> None:
    documented = table_names(read("reference/settings.md"))
    assert set(conf.DEFAULTS) - documented == set(), "settings missing from docs/settings.md"
    assert documented - set(conf.DEFAULTS) == set(), "docs/settings.md lists unknown settings"


def test_running_workers_flag_table_has_every_runworker_option_and_no_other() -> None:
    own = own_runworker_options()
    assert {"--queue", "--kind", "--concurrency", "--burst"} <= own  # the parser was read
    documented = table_names(section(read("howto/running-workers.md"), "Flags"))
    assert own - documented == set(), "runworker options missing from the flags table"
    parser = runworker.Command().create_parser("manage.py", "runworker")
    known = {s for action in parser._actions for s in action.option_strings}
    assert documented - known == set(), "the flags table lists options runworker lacks"


def test_running_workers_synopsis_names_every_runworker_option() -> None:
    text = read("howto/running-workers.md")
    for option in own_runworker_options():
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option


def test_concepts_has_a_row_for_every_status_and_every_journal_outcome() -> None:
    text = read("explanation/concepts.md")
    statuses = table_names(section(text, "Job states"))
    outcomes = table_names(section(text, "Journal outcomes"))
    assert set(Status.values) == statuses
    assert set(Outcome.values) == outcomes


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_in_docs_and_readme_lead_to_files_and_headings() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
                continue
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def entry(text: str, name: str) -> str:
    """The body of the ``### `name``` entry (up to the next level-2 or level-3 heading)."""
    match = re.search(rf"^### `{re.escape(name)}`\n(.*?)(?=^###? |\Z)", text, re.M | re.S)
    assert match, f"no '### `{name}`' entry"
    return match.group(1)


def documented_parameters(obj: object) -> list[str]:
    """The parameter names the reference must mention for a public callable: a function's,
    or the ``__init__`` a class defines itself (enums, and exceptions' ``**facts``, aside)."""
    if isinstance(obj, type):
        if issubclass(obj, enum.Enum) or "__init__" not in vars(obj):
            return []
        signature = inspect.signature(obj)
    elif callable(obj):
        signature = inspect.signature(obj)
    else:
        return []
    names = []
    for param in signature.parameters.values():
        if param.name in ("self", "cls"):
            continue
        if (
            isinstance(obj, type)
            and issubclass(obj, BaseException)
            and param.kind is inspect.Parameter.VAR_KEYWORD
        ):
            continue  # JobQueueError's generic **facts: each subclass lists its own
        names.append(param.name)
    return names


def test_api_reference_has_an_entry_for_every_public_name_and_no_other() -> None:
    text = read("reference/api.md")
    level3 = re.findall(r"^### .*$", text, re.M)
    assert [h for h in level3 if not ENTRY.fullmatch(h)] == [], (
        "docs/reference.md: level-3 headings must be exactly ### `name`"
    )
    documented = ENTRY.findall(text)
    assert len(documented) == len(set(documented)), "docs/reference.md repeats an entry"
    public = set(django_jobqueue.__all__)
    missing = sorted(public - set(documented))
    unknown = sorted(set(documented) - public)
    assert missing == [], f"public names missing from docs/reference.md: {missing}"
    assert unknown == [], f"docs/reference.md documents names not in __all__: {unknown}"


def test_api_reference_names_every_parameter_of_every_public_callable() -> None:
    text = read("reference/api.md")
    undocumented = []
    checked = 0
    for name in django_jobqueue.__all__:
        params = documented_parameters(getattr(django_jobqueue, name))
        body = entry(text, name)
        checked += len(params)
        undocumented += [
            f"{name}({param})"
            for param in params
            if not re.search(rf"(?<!\w){re.escape(param)}(?!\w)", body)
        ]
    assert checked > 30  # the signatures were read
    assert undocumented == [], f"parameters missing from docs/reference.md: {undocumented}"
