"""The reference docs cover what the code has: every setting, every runworker flag and
jobqueue subcommand option, every system check id, every status and journal outcome,
every public name and its parameters; the index lists every page under its kind; and the
docs' relative links (and the docs paths the code names) lead somewhere. No database."""

from __future__ import annotations

import argparse
import ast
import enum
import functools
import importlib
import inspect
import re
from pathlib import Path

import pytest
from django.core.management.base import BaseCommand

import django_jobqueue
from django_jobqueue import Outcome, Priority, Status, conf
from django_jobqueue.management.commands import jobqueue, runworker

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "django_jobqueue"
# The pages whose ### entries together document every public name: the API reference,
# and the signals (public names too) on their own page.
API_PAGES = ("reference/api.md", "reference/signals.md")
# The four kinds of page: the index's level-2 heading for each, and its folder.
KINDS = {
    "Tutorial": "tutorial",
    "How-to guides": "howto",
    "Reference": "reference",
    "Explanation": "explanation",
}

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
    """Long options runworker adds to Django's standard ones (--settings, --verbosity...),
    but for those hidden from --help (``--supervised``: the supervisor's own use)."""
    parser = runworker.Command().create_parser("manage.py", "runworker")
    base = BaseCommand().create_parser("manage.py", "base")
    standard = {s for action in base._actions for s in action.option_strings}
    return {
        s
        for action in parser._actions
        for s in action.option_strings
        if s.startswith("--") and s not in standard and action.help != argparse.SUPPRESS
    }


def test_settings_reference_has_a_row_for_every_key_and_no_other() -> None:
    documented = table_names(read("reference/settings.md"))
    assert set(conf.DEFAULTS) - documented == set(), "settings missing from the reference"
    assert documented - set(conf.DEFAULTS) == set(), "the reference lists unknown settings"


def test_runworker_flag_table_has_every_runworker_option_and_no_other() -> None:
    own = own_runworker_options()
    assert {"--queue", "--kind", "--concurrency", "--burst"} <= own  # the parser was read
    documented = table_names(section(read("reference/commands.md"), "`runworker`"))
    assert own - documented == set(), "runworker options missing from the flags table"
    parser = runworker.Command().create_parser("manage.py", "runworker")
    known = {s for action in parser._actions for s in action.option_strings}
    assert documented - known == set(), "the flags table lists options runworker lacks"


def test_runworker_synopsis_names_every_runworker_option() -> None:
    text = section(read("reference/commands.md"), "`runworker`")
    for option in own_runworker_options():
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option


def jobqueue_subcommands() -> dict[str, set[str]]:
    """Each ``jobqueue`` subcommand and its own long options (``--help`` aside)."""
    parser = jobqueue.Command().create_parser("manage.py", "jobqueue")
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        name: {s for a in sub._actions for s in a.option_strings if s.startswith("--")} - {"--help"}
        for name, sub in subparsers.choices.items()
    }


def jobqueue_synopsis() -> dict[str, str]:
    """The reference's synopsis of ``jobqueue``: each subcommand's line, with the
    indented lines that continue it."""
    body = section(read("reference/commands.md"), "`jobqueue`")
    block = re.search(r"```console\n(.*?)```", body, re.S)
    assert block, "no synopsis block in the jobqueue section"
    lines: dict[str, str] = {}
    name = ""
    for line in block.group(1).splitlines():
        start = re.match(r"python manage\.py jobqueue ([\w-]+)", line)
        if start:
            name = start.group(1)
            assert name not in lines, f"the synopsis repeats {name}"
            lines[name] = line
        else:
            assert name, f"a synopsis line before any subcommand: {line}"
            assert line.startswith(" "), f"a synopsis line of no subcommand: {line}"
            lines[name] += " " + line.strip()
    return lines


def test_jobqueue_synopsis_has_every_subcommand_with_its_options_and_no_other() -> None:
    subcommands = jobqueue_subcommands()
    assert {"stats", "list", "cancel", "limit", "health"} <= set(subcommands)  # parsed
    synopsis = jobqueue_synopsis()
    assert set(synopsis) == set(subcommands)
    wrong = []
    for name, options in subcommands.items():
        named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", synopsis[name]))
        wrong += [f"{name}: {o} missing" for o in sorted(options - named)]
        wrong += [f"{name}: {o} unknown" for o in sorted(named - options)]
    assert wrong == []


def test_jobqueue_subcommand_table_has_a_row_for_each_naming_exactly_its_options() -> None:
    subcommands = jobqueue_subcommands()
    body = section(read("reference/commands.md"), "`jobqueue`")
    rows = {
        match.group(1): match.group(0)
        for match in re.finditer(r"^\|\s*`([\w-]+)[^`]*`\s*\|.*$", body, re.M)
    }
    assert set(rows) == set(subcommands)
    named = {name: set(re.findall(r"(?<![\w-])--[a-z][\w-]*", row)) for name, row in rows.items()}
    wrong = [
        f"{name}: {o} missing" for name, opts in subcommands.items() for o in opts - named[name]
    ]
    wrong += [
        f"{name}: {o} unknown" for name, opts in named.items() for o in opts - subcommands[name]
    ]
    assert sorted(wrong) == []


def test_states_reference_has_a_row_for_every_status_and_every_journal_outcome() -> None:
    text = read("reference/states.md")
    statuses = table_names(section(text, "Statuses"))
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
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
                continue
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
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


def api_text() -> str:
    return "\n".join(read(page) for page in API_PAGES)


def test_api_reference_has_an_entry_for_every_public_name_and_no_other() -> None:
    for page in API_PAGES:
        level3 = re.findall(r"^### .*$", read(page), re.M)
        assert [h for h in level3 if not ENTRY.fullmatch(h)] == [], (
            f"docs/{page}: level-3 headings must be exactly ### `name`"
        )
    documented = ENTRY.findall(api_text())
    assert len(documented) == len(set(documented)), "the API reference repeats an entry"
    public = set(django_jobqueue.__all__)
    missing = sorted(public - set(documented))
    unknown = sorted(set(documented) - public)
    assert missing == [], f"public names missing from the API reference: {missing}"
    assert unknown == [], f"the API reference documents names not in __all__: {unknown}"


def test_api_reference_names_every_parameter_of_every_public_callable() -> None:
    text = api_text()
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
    assert undocumented == [], f"parameters missing from the API reference: {undocumented}"


@pytest.mark.parametrize("choices", [Status, Outcome, Priority], ids=lambda c: c.__name__)
def test_api_reference_shows_every_member_of_each_choices_class(choices: type) -> None:
    block = re.search(
        rf"^```python\nclass {choices.__name__}\(.*?^```",
        entry(api_text(), choices.__name__),
        re.M | re.S,
    )
    assert block, f"no class block under {choices.__name__}"
    shown = dict(re.findall(r"^    ([A-Z_]+) = ([^\n]+)$", block.group(0), re.M))
    assert set(shown) == set(choices.__members__), f"{choices.__name__}'s members"


CHECK_ID = re.compile(r"django_jobqueue\.[A-Z]\d{3}")


@functools.cache
def registered_check_ids() -> frozenset[str]:
    """Every system check id the package gives a message (``id=`` of a call), wherever
    it is: checks.py, and the Django Tasks backend's own check."""
    ids = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "id"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and CHECK_ID.fullmatch(node.value.value)
            ):
                ids.add(node.value.value)
    return frozenset(ids)


def test_checks_reference_has_a_row_for_every_system_check_id_and_no_other() -> None:
    registered = registered_check_ids()
    assert {"django_jobqueue.E001", "django_jobqueue.W001", "django_jobqueue.E101"} <= registered
    rows = re.findall(
        r"^\|\s*`([^`]+)`\s*\|\s*(\w+)\s*\|", section(read("reference/checks.md"), "Checks"), re.M
    )
    documented = [check_id for check_id, _ in rows]
    assert len(documented) == len(set(documented)), "docs/reference/checks.md repeats an id"
    assert sorted(registered - set(documented)) == [], "check ids missing from checks.md"
    assert sorted(set(documented) - registered) == [], "checks.md lists ids no check has"
    level = {"E": "error", "W": "warning"}
    assert [(i, lv) for i, lv in rows if level[i.split(".")[1][0]] != lv] == []


def test_every_check_id_the_docs_name_is_one_the_package_has() -> None:
    registered = registered_check_ids()
    named = {
        f"{page.relative_to(DOCS)}: {check_id}"
        for page in [ROOT / "README.md", *DOCS.rglob("*.md")]
        for check_id in CHECK_ID.findall(page.read_text(encoding="utf-8"))
        if check_id not in registered
    }
    assert named == set()


def test_index_lists_every_page_under_its_kind() -> None:
    index = read("index.md")
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} - {"index.md"}
    assert {p.split("/")[0] for p in pages} == set(KINDS.values()), "a page outside the kinds"
    listed = set()
    for heading, folder in KINDS.items():
        links = set(re.findall(r"\]\(([\w/-]+\.md)(?:#[^)]*)?\)", section(index, heading)))
        assert {link.split("/")[0] for link in links} <= {folder}, f"{heading} links elsewhere"
        listed |= links
    assert sorted(pages - listed) == [], "pages the index does not list"


# A docs page named in code, hints or scripts: "docs/howto/admin.md".
DOCS_PATH = re.compile(r"\bdocs/[\w/.-]+\.(?:md|png)\b")


def test_docs_paths_named_by_the_code_and_scripts_exist() -> None:
    sources = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "scripts").rglob("*.sh"),
        *(ROOT / "bench").rglob("*.md"),
    ]
    named = {
        (source.relative_to(ROOT).as_posix(), path)
        for source in sources
        for path in DOCS_PATH.findall(source.read_text(encoding="utf-8"))
    }
    assert (
        "django_jobqueue/checks.py",
        "docs/explanation/databases.md",
    ) in named  # read (a docstring)
    assert sorted(n for n in named if not (ROOT / n[1]).exists()) == []


# A dotted name the docs give (`django_jobqueue.rules.lifecycle.on_cancel_request`), and a
# source path (`django_jobqueue/worker/services/`); permissions (``app.codename``) aside.
DOTTED = re.compile(r"\bdjango_jobqueue(?:\.[A-Za-z_]\w*)+")
SOURCE_PATH = re.compile(r"`(django_jobqueue/[\w/.]*)`")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute of one, that exists now."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_module_paths_the_docs_name_exist() -> None:
    from django_jobqueue.models import Job

    permissions = {f"django_jobqueue.{codename}" for codename, _ in Job._meta.permissions}
    permissions |= {f"django_jobqueue.{verb}_job" for verb in ("add", "change", "delete", "view")}
    named = {
        (page.relative_to(ROOT).as_posix(), name)
        for page in [ROOT / "README.md", *DOCS.rglob("*.md")]
        for pattern in (DOTTED, SOURCE_PATH)
        for name in pattern.findall(page.read_text(encoding="utf-8"))
    }
    assert (
        "docs/howto/operations.md",
        "django_jobqueue.rules.lifecycle.on_cancel_request",
    ) in named
    missing = sorted(
        (page, name)
        for page, name in named
        if not (
            name in permissions
            or CHECK_ID.fullmatch(name)
            or ((ROOT / name).exists() if "/" in name else resolves(name))
        )
    )
    assert missing == [], "the docs name modules or files that no longer exist"


# A documentation page as a check's hint names it: "(explanation/databases)".
DOCS_PAGE = re.compile(r"\(((?:tutorial|howto|reference|explanation)/[\w-]+)\)")


def check_hints() -> list[tuple[str, str]]:
    """Every check hint's literal text in the package: (file, text)."""
    found = []
    for source in PACKAGE.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.keyword) or node.arg != "hint":
                continue
            parts = [
                n.value
                for n in ast.walk(node.value)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            found.append((source.relative_to(ROOT).as_posix(), "".join(parts)))
    return found


def test_check_hints_name_documentation_pages_not_repository_paths() -> None:
    """A user's project has no docs/ folder: a hint names the page as published."""
    hints = check_hints()
    assert any("(explanation/databases)" in text for _, text in hints)  # the test reads them
    assert [(f, t) for f, t in hints if DOCS_PATH.search(t) or "docs/" in t] == []
    pages = {(f, page) for f, text in hints for page in DOCS_PAGE.findall(text)}
    assert sorted((f, p) for f, p in pages if not (DOCS / f"{p}.md").exists()) == []


def test_the_readme_lists_every_optional_extra_a_user_installs() -> None:
    """Every extra but the project's own tooling (``dev``, ``bench``)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    readme = (ROOT / "README.md").read_text()
    listed = readme.split("The extras:", 1)[1].split("\n\n", 1)[0]
    missing = sorted(e for e in extras if e not in ("dev", "bench") and f"`{e}`" not in listed)
    assert not missing, f"README's extras leave out {missing}"


def test_the_docs_name_the_jobs_key_field_not_its_column() -> None:
    """The model's field is ``key``; ``job_key`` is only its column's name."""
    found = [
        str(path.relative_to(ROOT))
        for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
        if re.search(r"`job_key`", path.read_text())
    ]
    assert not found, found
