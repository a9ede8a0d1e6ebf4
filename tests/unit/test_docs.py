"""The reference docs cover what the code has: every setting, every runworker flag, every
status and journal outcome; and the docs' relative links lead somewhere. No database."""

from __future__ import annotations

import re
from pathlib import Path

from django.core.management.base import BaseCommand

from django_jobqueue import Outcome, Status, conf
from django_jobqueue.management.commands import runworker

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# A reference-table row: "| `NAME ...` | ..." -> NAME
ROW = re.compile(r"^\|\s*`([^`\s]+)[^`]*`\s*\|", re.MULTILINE)


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
    documented = table_names(read("settings.md"))
    assert set(conf.DEFAULTS) - documented == set(), "settings missing from docs/settings.md"
    assert documented - set(conf.DEFAULTS) == set(), "docs/settings.md lists unknown settings"


def test_running_workers_flag_table_has_every_runworker_option_and_no_other() -> None:
    own = own_runworker_options()
    assert {"--queue", "--kind", "--concurrency", "--burst"} <= own  # the parser was read
    documented = table_names(section(read("running-workers.md"), "Flags"))
    assert own - documented == set(), "runworker options missing from the flags table"
    parser = runworker.Command().create_parser("manage.py", "runworker")
    known = {s for action in parser._actions for s in action.option_strings}
    assert documented - known == set(), "the flags table lists options runworker lacks"


def test_running_workers_synopsis_names_every_runworker_option() -> None:
    text = read("running-workers.md")
    for option in own_runworker_options():
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option


def test_concepts_has_a_row_for_every_status_and_every_journal_outcome() -> None:
    text = read("concepts.md")
    statuses = table_names(section(text, "Job states"))
    outcomes = table_names(section(text, "Journal outcomes"))
    assert set(Status.values) == statuses
    assert set(Outcome.values) == outcomes


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_in_docs_and_readme_lead_to_files_and_headings() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
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
