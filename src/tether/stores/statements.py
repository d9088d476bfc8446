"""SQLAlchemy Core statements compiled once per dialect, executed on a DBAPI cursor.

The schema and every statement are SQLAlchemy Core; executing them through a SQLAlchemy
``Connection`` costs tens of microseconds each (parameter processing, result wrapping),
which on the checkpoint path and on pause/resume is more than the database's own work. So
each statement is compiled once (``stmt.compile(dialect=...)``), and its SQL text runs on the
driver's cursor with the parameters in the order the compiled statement wants them, and
JSON payloads go in and come out as the text their columns hold (:func:`to_json`,
:func:`from_json`).

A store may hand :class:`Statements` the compiled form of statements ahead of time (name ->
SQL text, parameter names, defaults): the SQLite store does, from the generated
``sqlite_statements.py``, so a command whose statements are all there never imports
SQLAlchemy (issue 25, fast start). A statement not there is built and compiled as before,
SQLAlchemy imported then.
"""

from __future__ import annotations

import operator
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.stores.sql_text import from_json as from_json
from tether.stores.sql_text import to_json as to_json

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect
    from sqlalchemy.sql import ClauseElement

_NAMED = re.compile(r"%\(([^)]+)\)s")

Compiled = tuple[str, tuple[str, ...] | None, Mapping[str, Any]]
"""A compiled statement as data: its SQL text, its parameter names in order (None: the driver
takes a mapping), the values of the parameters the statement itself fixes."""


class Statement:
    """One compiled statement: its SQL text, and how to order its parameters."""

    __slots__ = ("_pick", "defaults", "names", "sql")

    def __init__(self, sql: str, names: tuple[str, ...] | None,
                 defaults: Mapping[str, Any]) -> None:
        self.sql = sql
        self.names = names
        self.defaults = dict(defaults)
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


def compile_statement(element: ClauseElement, dialect: Dialect) -> Compiled:
    """``element`` compiled for ``dialect``, as data."""
    from sqlalchemy.sql.compiler import SQLCompiler

    compiled = element.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    sql = str(compiled)
    names: tuple[str, ...] | None = (
        tuple(compiled.positiontup or ()) if compiled.positional else None)
    if names is None and (_NAMED.search(sql) or dialect.paramstyle == "pyformat"):
        names = tuple(_NAMED.findall(sql))  # pyformat: make it positional, so
        sql = _NAMED.sub("%s", sql)          # rows go in as tuples (even none)
    # literals written into the statement (LIMIT 1, status = 'running') become binds too
    defaults = {name: bind.effective_value for name, bind in compiled.binds.items()
                if not bind.required}
    return sql, names, defaults


def _one(name: str) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    return lambda values: (values[name],)


class Statements:
    """A cache of compiled statements, by name.

    ``dialect`` gives the dialect to compile for (called at the first statement compiled,
    so a store whose statements are all in ``ready`` never makes one); ``ready`` holds
    statements compiled ahead of time, by name."""

    def __init__(self, dialect: Callable[[], Dialect],
                 ready: Mapping[str, Compiled] | None = None) -> None:
        self._dialect = dialect
        self._ready = ready or {}
        self._cache: dict[str, Statement] = {}
        self._compiling = threading.RLock()  # one thread compiles a missing statement

    def get(self, key: str, build: Callable[[], ClauseElement]) -> Statement:
        statement = self._cache.get(key)
        if statement is None:  # rare: the stores sharing this cache (a worker's slots,
            with self._compiling:  # Checkpointer.share_statements) wait for one compile
                statement = self._cache.get(key)
                if statement is None:
                    compiled = self._ready.get(key)
                    if compiled is None:
                        compiled = compile_statement(build(), self._dialect())
                    statement = Statement(*compiled)
                    self._cache[key] = statement
        return statement
