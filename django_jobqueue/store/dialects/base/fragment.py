"""SQL text that carries its parameters.

A statement built from pieces (a claim's conditions, a capped kind's branch, a tier's
CTE) used to grow its text and its parameters in two parallel lists, kept in step by
hand. A ``Fragment`` holds both, so joining pieces keeps every parameter beside the
placeholder it fills: ``Fragment("j.priority >= %s", [floor]) + " AND " + other``.
Only names from the models and fixed SQL go into the text; every value is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Fragment:
    """A piece of SQL and the values of its ``%s`` placeholders, in order."""

    __slots__ = ("params", "sql")

    def __init__(self, sql: str = "", params: Iterable[Any] = ()) -> None:
        self.sql = sql
        self.params: tuple[Any, ...] = tuple(params)

    def __add__(self, other: Fragment | str) -> Fragment:
        if isinstance(other, str):
            return Fragment(self.sql + other, self.params)
        return Fragment(self.sql + other.sql, self.params + other.params)

    def __radd__(self, other: str) -> Fragment:
        return Fragment(other + self.sql, self.params)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fragment):
            return NotImplemented
        return (self.sql, self.params) == (other.sql, other.params)

    def __hash__(self) -> int:
        return hash((self.sql, self.params))

    def __repr__(self) -> str:
        return f"Fragment({self.sql!r}, {list(self.params)!r})"

    def __bool__(self) -> bool:
        return bool(self.sql)

    @staticmethod
    def concat(*parts: Fragment | str) -> Fragment:
        """The parts one after another (text as it is, fragments with their parameters):
        one new fragment for a whole statement's pieces, where ``+`` would make one per
        piece (the claim is built on every turn)."""
        texts: list[str] = []
        params: list[Any] = []
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            else:
                texts.append(part.sql)
                params.extend(part.params)
        return Fragment("".join(texts), params)

    @staticmethod
    def join(separator: str, parts: Iterable[Fragment]) -> Fragment:
        """The parts with ``separator`` between them, their parameters in the same order."""
        pieces = list(parts)
        return Fragment(
            separator.join(p.sql for p in pieces), [v for p in pieces for v in p.params]
        )

    def statement(self) -> tuple[str, list[Any]]:
        """As a cursor takes it (and as ``store.claim_statement`` hands it out)."""
        return self.sql, list(self.params)
