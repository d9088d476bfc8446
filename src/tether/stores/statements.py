"""SQLAlchemy Core statements compiled once per dialect, executed on a DBAPI cursor.

The schema and every statement are SQLAlchemy Core; executing them through a SQLAlchemy
``Connection`` costs tens of microseconds each (parameter processing, result wrapping),
which on the checkpoint path and on pause/resume is more than the database's own work. So
each statement is compiled once (``stmt.compile(dialect=...)``), and its SQL text runs on the
driver's cursor with the parameters in the order the compiled statement wants them, and
JSON payloads go in and come out as the text their columns hold (:func:`to_json`,
:func:`from_json`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from tether.stores.sql_text import from_json as from_json
from tether.stores.sql_text import to_json as to_json

_NAMED = re.compile(r"%\(([^)]+)\)s")


class Statement:
    """One compiled statement: its SQL text, and how to order its parameters."""

    __slots__ = ("_pick", "defaults", "names", "sql")

    def __init__(self, element: ClauseElement, dialect: Dialect) -> None:
        compiled = element.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.sql = str(compiled)
        self.names: tuple[str, ...] | None = (
            tuple(compiled.positiontup or ()) if compiled.positional else None)
        if self.names is None and (_NAMED.search(self.sql) or dialect.paramstyle == "pyformat"):
            self.names = tuple(_NAMED.findall(self.sql))  # pyformat: make it positional, so
            self.sql = _NAMED.sub("%s", self.sql)          # rows go in as tuples (even none)
        # literals written into the statement (LIMIT 1, status = 'running') become binds too
        self.defaults = {name: bind.effective_value for name, bind in compiled.binds.items()
                         if not bind.required}
        names = self.names
        # the values in the statement's order, picked in C (a claim has 49 of them)
        self._pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = (
            None if not names else _one(names[0]) if len(names) == 1
            else operator.itemgetter(*names))

    def params(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The parameters for the driver: a tuple (positional styles) or the mapping."""
        merged = {**self.defaults, **values} if self.defaults else values
        if self.names is None:
            return merged
        pick = self._pick
        return pick(merged) if pick is not None else ()


def _one(name: str) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    return lambda values: (values[name],)


class Statements:
    """A cache of compiled statements, by name."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._cache: dict[str, Statement] = {}

    def get(self, key: str, build: Callable[[], ClauseElement]) -> Statement:
        statement = self._cache.get(key)
        if statement is None:
            statement = Statement(build(), self._dialect)
            self._cache[key] = statement
        return statement
