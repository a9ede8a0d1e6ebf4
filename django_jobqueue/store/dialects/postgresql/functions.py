"""PostgreSQL's functions as source files, and the migration operation that runs them.

The queue's PL/pgSQL (the claim's counts, the turn's joins, the insert trigger's
NOTIFY) is source code, reviewed and tested as such: each function lives in
``sql/<function>.v<N>.sql`` beside this module, shipped in the package.

- ``<function>`` is the name PostgreSQL knows it by; ``N`` counts its versions from 1.
  A file is the script that brings a database to that version: ``CREATE OR REPLACE
  FUNCTION`` (a trigger function with its ``CREATE OR REPLACE TRIGGER``); a version
  that changes the arguments or the result type drops the version before first; a
  version that retires a function is its ``DROP FUNCTION`` alone.
- A file a migration runs is history, as the migration is: never edited. The migration
  names each file with the start of its SHA-256 (``<function>.v<N>@<digest>``), and
  refuses to run a file that is not the one it was written for (an edited file would
  reach new databases and never the ones already migrated). A change is the next
  version's file and a migration of one line::

      operations = [functions.install("django_jobqueue_count_down.v2@<digest>",
                                      undo="django_jobqueue_count_down.v1@<digest>")]

  (a name without its digest is refused with the digest to write).

- A function's highest version is its current definition: the migrated database holds
  exactly those, every ``django_jobqueue_*`` function and trigger of the database has
  one, and each function that restates a Python rule is fed the rule's inputs
  (tests/db/test_sql_functions.py, tests/db/test_join_function.py).

Version 1 of each function is the one its first migration made (0002, 0007, 0015,
0018, 0019): those migrations read their pinned file (``pinned(...).text()``) rather
than keep a copy of its text, so each definition is written once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import migrations

SOURCES = Path(__file__).with_name("sql")
DIGEST = 16  # hex digits of a file's SHA-256 a migration names it with
_FILE = re.compile(r"(?P<function>[a-z][a-z0-9_]*)\.v(?P<version>[1-9][0-9]*)\.sql")


@dataclass(frozen=True, order=True, slots=True)
class Source:
    """One version of one function: ``sql/<function>.v<version>.sql``."""

    function: str
    version: int

    @property
    def name(self) -> str:
        return f"{self.function}.v{self.version}"

    @property
    def path(self) -> Path:
        return SOURCES / f"{self.name}.sql"

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def digest(self) -> str:
        """The start of the file's SHA-256 (its text's, line endings as ``\\n``: a
        checkout's line endings change no digest)."""
        text = self.text().replace("\r\n", "\n")
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST]


def sources() -> list[Source]:
    """Every version of every function, in name and version order. A file in ``sql/``
    whose name breaks the convention is an error naming it (it would be run by nothing
    and checked by nothing)."""
    found = []
    for path in sorted(SOURCES.iterdir()):
        match = _FILE.fullmatch(path.name)
        if match is None:
            raise ValueError(
                f"{path.name} in {SOURCES.name}/ is not named <function>.v<N>.sql"
                " (the function's name, then its version from 1)"
            )
        found.append(Source(match["function"], int(match["version"])))
    return sorted(found)


def current() -> dict[str, Source]:
    """Each function's highest version: the definition a migrated database holds."""
    return {s.function: s for s in sources()}  # in version order: the last one wins


def source(name: str) -> Source:
    """The version named ``<function>.v<N>``; an unknown one is an error naming it and
    the versions there are."""
    known = {s.name: s for s in sources()}
    if name not in known:
        raise LookupError(
            f"no SQL source {name!r} in {SOURCES.name}/ (a name is <function>.v<N>);"
            f" there are: {', '.join(known)}"
        )
    return known[name]


def pinned(name: str) -> Source:
    """The version a migration names as ``<function>.v<N>@<digest>``, checked to be the
    file the migration was written for: a missing or different digest is an error
    saying so, with the file's digest."""
    version, _, digest = name.partition("@")
    found = source(version)
    if digest != found.digest:
        problem = f"names it with digest {digest!r}" if digest else "names no digest"
        raise ValueError(
            f"a migration {problem} for {found.path.name}, whose digest is {found.digest!r}:"
            " a file a migration ran is never edited (write the next version instead);"
            f" a new migration names it {found.name}@{found.digest}"
        )
    return found


def install(*names: str, undo: Sequence[str] | str = ()) -> migrations.RunPython:
    """A migration's operation that runs these versions' files (``pinned`` names) on
    PostgreSQL, in order (other databases: nothing), and reversed, the ``undo`` ones
    (none: reversing does nothing, for versions that leave the definitions the
    migrations before made). An unknown name or a file edited since fails when the
    migration is loaded, naming it."""
    forward = [pinned(n) for n in names]
    backward = [pinned(n) for n in ([undo] if isinstance(undo, str) else undo)]

    def run(todo: list[Source]) -> Any:
        def apply(apps: Any, schema_editor: Any) -> None:
            if schema_editor.connection.vendor != "postgresql":
                return
            for one in todo:
                schema_editor.execute(one.text())

        return apply

    return migrations.RunPython(
        run(forward), run(backward) if backward else migrations.RunPython.noop, elidable=False
    )
