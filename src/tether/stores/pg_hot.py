"""One prepared statement executed on a psycopg connection's libpq connection directly.

Every node step of a worker (and of ``tether run``) writes its checkpoint with one fenced
statement of 19 parameters (``postgres._put_seen``). Through psycopg's ``RawCursor`` about
30% of the worker's Python time went to psycopg's own Python around that call (the cursor's
state, the query object, dumping each parameter through the adapters' lookup, the prepared
statements' cache: issue 26). This module sends the same statement through the same libpq
connection with psycopg's own wait loop and error classes, without the cursor layer: the
parameters are encoded here from their known Python types in text format (psycopg sends
numbers in binary; the values stored are the same, to the bit: tested), and the server's
types come from the statement's casts or the OIDs given at prepare time (a parameter
without a cast must be given its OID: an unknown parameter in a select list would resolve
to ``text``). The store uses it for ``tether run``'s checkpoint INSERTs and a run's end
alone too. A worker slot's run end and its next claim go together
(:meth:`HotStatements.pipelined`): both prepared with the types psycopg's dumpers give
their values (:func:`oids_of`), sent in libpq's pipeline mode with one Sync (one implicit
transaction, one round trip), their rows loaded by psycopg's own ``Transformer`` with the
connection's loaders, as its cursor loads them.

What stays as psycopg's: the connection's lock; its ``wait`` (interrupts cancel the
statement); the generator that sends, flushes and reads the results (notices and
notifications are dispatched as on any statement); the exception built from a failed
result (``psycopg.errors.error_from_result``: the SQLSTATE's class, so a unique violation,
a lock timeout or a session the server ended are the errors the cursor raised). A lost
connection raises what the cursor's path raises (``OperationalError`` from libpq's calls).

Used only when psycopg's own state cannot be disturbed: the connection is open, idle
outside a transaction block (autocommit, no ``BEGIN`` open), not in pipeline mode, and
talks UTF-8; otherwise, and for a value of a type this module does not encode (or a text
holding a NUL, which psycopg refuses), :meth:`HotStatement.run` returns None and the caller
uses the cursor, which behaves as before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from psycopg import abc, errors
from psycopg.adapt import Transformer
from psycopg.generators import execute, fetch_many, send
from psycopg.pq import ConnStatus, ExecStatus, PipelineStatus, TransactionStatus
from sqlalchemy import Boolean, Float, Integer

from tether.stores.schema import checkpoints

__all__ = ["BOOL", "FLOAT8", "INT4", "UNKNOWN", "HotStatement", "HotStatements", "encode",
           "oid_of", "oids_of"]

UNKNOWN, BOOL, INT2, INT4, INT8, FLOAT8, NUMERIC = 0, 16, 21, 23, 20, 701, 1700
"""PostgreSQL type OIDs for :class:`HotStatement`'s parameters (``UNKNOWN``: the server
takes the type from the statement, e.g. its ``$1::VARCHAR``, as it does for psycopg's
``str``)."""

_OK = ConnStatus.OK
_IDLE = TransactionStatus.IDLE
_NO_PIPELINE = PipelineStatus.OFF
_TUPLES_OK = ExecStatus.TUPLES_OK
_COMMAND_OK = ExecStatus.COMMAND_OK
_FATAL = ExecStatus.FATAL_ERROR
_SYNC = ExecStatus.PIPELINE_SYNC
_NAMES = itertools.count(1)
_SPECIAL = {math.inf: b"Infinity", -math.inf: b"-Infinity"}


def encode(params: Sequence[Any]) -> list[bytes | None] | None:
    """``params`` in PostgreSQL's text format, as psycopg's dumpers write the same values
    (``str`` as UTF-8, ``bool`` as ``t``/``f``, ``int`` in decimal, ``float`` as its
    shortest exact ``repr``, ``NaN`` and ``Infinity`` as PostgreSQL spells them, None as
    NULL); None (use the cursor) for any other type and for a text with a NUL."""
    out: list[bytes | None] = []
    append = out.append
    for value in params:
        if value is None:
            append(None)
        elif isinstance(value, str):  # a StrEnum too: psycopg writes its value
            if "\x00" in value:  # psycopg refuses it (DataError); libpq would cut it short
                return None
            try:
                append(value.encode())
            except UnicodeEncodeError:  # a lone surrogate: psycopg's own error, via the cursor
                return None
        elif value is True:
            append(b"t")
        elif value is False:
            append(b"f")
        elif type(value) is float:
            if value != value:
                append(b"NaN")
            else:
                append(_SPECIAL.get(value) or repr(value).encode())
        elif type(value) is int:
            append(str(value).encode())
        else:
            return None
    return out


def oids_of(params: Sequence[Any]) -> tuple[int, ...]:
    """The types psycopg's default dumpers send ``params`` with (:func:`encode`'s values):
    an ``int`` as ``int2``, ``int4``, ``int8`` or ``numeric`` by its magnitude, a ``float``
    as ``float8``, a ``bool`` as ``bool``, a text and None as unknown (the server takes the
    statement's cast, or the type the context gives). A statement prepared with these
    resolves its parameters as the cursor's did."""
    oids: list[int] = []
    for value in params:
        kind = type(value)
        if kind is float:
            oids.append(FLOAT8)
        elif kind is bool:
            oids.append(BOOL)
        elif kind is int:
            oids.append(INT2 if -2**15 <= value < 2**15 else INT4 if -2**31 <= value < 2**31
                        else INT8 if -2**63 <= value < 2**63 else NUMERIC)
        else:
            oids.append(UNKNOWN)
    return tuple(oids)


class HotStatement:
    """One statement prepared once on one psycopg connection (its own name, never psycopg's
    ``_pg3_*``), and executed there with text parameters and text results.

    Made per connection: a new connection (a reconnect after an outage) gets a new object,
    which prepares again. If the server no longer knows the statement (psycopg sends
    ``DEALLOCATE ALL`` after a ``DROP``, ``ALTER``, ``ROLLBACK`` or ``DISCARD ALL`` on the
    connection), it is prepared again and executed once more: the failed execution did
    nothing."""

    __slots__ = ("_connection", "_name", "_oids", "_pgconn", "_prepared", "_sql")

    def __init__(self, connection: Any, sql: str, oids: Sequence[int]) -> None:
        """``sql`` with server placeholders (``$1``...); ``oids`` one per parameter."""
        self._connection = connection
        self._pgconn = connection.pgconn
        self._sql = sql.encode()
        self._oids = tuple(oids)
        self._name = f"tether_hot_{next(_NAMES)}".encode()
        self._prepared = False

    @property
    def connection(self) -> Any:
        """The psycopg connection this statement runs on."""
        return self._connection

    def usable(self) -> bool:
        """Whether the fast path may run now: open, idle outside a transaction block, not
        in pipeline mode, UTF-8."""
        pgconn = self._pgconn
        return bool(pgconn.status == _OK and pgconn.transaction_status == _IDLE
                    and pgconn.pipeline_status == _NO_PIPELINE
                    and pgconn._encoding == "utf-8")

    def run(self, params: Sequence[Any]) -> Any:
        """The statement's result (libpq's, text format), or None without executing
        anything when the cursor must be used instead (see the module's docstring). Raises
        the exceptions psycopg's cursor raises for the same failure."""
        if not self.usable():
            return None
        encoded = encode(params)
        if encoded is None:
            return None
        connection = self._connection
        with connection.lock:
            if not self._prepared:
                self._prepare()
            try:
                return self._execute(encoded)
            except errors.InvalidSqlStatementName:  # deallocated by psycopg or the session
                self._prepared = False
                self._prepare()
                return self._execute(encoded)

    def first(self, params: Sequence[Any]) -> tuple[bytes | None, ...] | None:
        """The first row's values as text (None for NULL), or None: use the cursor."""
        result = self.run(params)
        if result is None:
            return None
        if result.ntuples < 1:
            raise errors.InternalError("a hot statement returned no row")
        return tuple(result.get_value(0, column) for column in range(result.nfields))

    def count(self, params: Sequence[Any]) -> int | None:
        """The rows the statement wrote (the cursor's ``rowcount``), or None: use the
        cursor."""
        result = self.run(params)
        if result is None:
            return None
        return int(result.command_tuples or 0)

    def prepared(self) -> bytes:
        """The statement's name on the server, preparing it first if it is not (the caller
        holds the connection's lock)."""
        if not self._prepared:
            self._prepare()
        return self._name

    def forget(self) -> None:
        """The server no longer knows the statement: prepare it again at next use."""
        self._prepared = False

    def _prepare(self) -> None:
        pgconn = self._pgconn
        pgconn.send_prepare(self._name, self._sql, param_types=self._oids)
        self._check(self._connection.wait(execute(pgconn)))
        self._prepared = True

    def _execute(self, encoded: list[bytes | None]) -> Any:
        pgconn = self._pgconn
        pgconn.send_query_prepared(self._name, encoded)
        result = self._check(self._connection.wait(execute(pgconn)))
        if result.status != _TUPLES_OK and result.status != _COMMAND_OK:
            raise errors.InternalError(f"unexpected result of a hot statement: "
                                       f"{ExecStatus(result.status).name}")
        return result

    def _check(self, results: list[Any]) -> Any:
        """The one result, or the error psycopg's cursor raises for it."""
        if not results:
            raise errors.InternalError("got no result from the query")
        for result in results:
            if result.status == _FATAL:
                raise errors.error_from_result(result, encoding=self._pgconn._encoding)
        return results[0]


class HotStatements:
    """The statements of one psycopg connection prepared here, by their text (a store keeps
    one with its hot connection, and a new one with a new connection)."""

    __slots__ = ("_loader", "_statements", "_typed", "connection")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self._statements: dict[str, HotStatement] = {}
        self._typed: dict[tuple[str, tuple[int, ...]], HotStatement] = {}
        self._loader: abc.Transformer | None = None

    def typed(self, sql: str, params: Sequence[Any]) -> HotStatement:
        """``sql`` (server placeholders) prepared with the types psycopg sends ``params``
        with (:func:`oids_of`), one statement per text and types, as psycopg's own
        prepared statements are kept."""
        oids = oids_of(params)
        statement = self._typed.get((sql, oids))
        if statement is None:
            statement = self._typed[sql, oids] = HotStatement(self.connection, sql, oids)
        return statement

    def pipelined(self, calls: Sequence[tuple[HotStatement, Sequence[Any]]],
                  ) -> list[Any] | None:
        """Execute ``calls`` (statements of this connection and their parameters) in
        libpq's pipeline mode, one round trip and one Sync: the server runs them in one
        implicit transaction, committed at the Sync, or rolled back whole if one fails
        (the rest are then not run). Each statement's result (text format), in order; the
        first failed statement's error raised as psycopg's cursor raises it (a statement
        the session no longer knows is prepared again and the whole pipeline sent once
        more: nothing of the failed one was committed). None without executing anything
        when psycopg's own state must not be bypassed or a parameter cannot be encoded
        (as :meth:`HotStatement.run`): the caller then does what it does without the
        pipeline."""
        encoded = [encode(params) for _, params in calls]
        if not calls or not calls[0][0].usable() or any(e is None for e in encoded):
            return None
        connection = self.connection
        with connection.lock:
            try:
                return self._pipeline(calls, encoded)
            except errors.InvalidSqlStatementName:  # deallocated by psycopg or the session
                for statement, _ in calls:
                    statement.forget()
                return self._pipeline(calls, encoded)

    def rows(self, result: Any) -> list[tuple[Any, ...]]:
        """``result``'s rows as psycopg's cursor loads them (the connection's loaders)."""
        loader = self._loader
        if loader is None:
            loader = self._loader = Transformer(self.connection)
        loader.set_pgresult(result)
        return loader.load_rows(0, result.ntuples, tuple)

    def _pipeline(self, calls: Sequence[tuple[HotStatement, Sequence[Any]]],
                  encoded: Sequence[list[bytes | None] | None]) -> list[Any]:
        names = [statement.prepared() for statement, _ in calls]
        pgconn = self.connection.pgconn
        pgconn.enter_pipeline_mode()
        try:
            for name, values in zip(names, encoded, strict=True):
                pgconn.send_query_prepared(name, values)
            pgconn.pipeline_sync()
            groups = self.connection.wait(_exchange(pgconn, len(calls)))
        except BaseException:
            try:  # results still pending (an interrupt): the mode cannot be left
                pgconn.exit_pipeline_mode()
            except Exception:  # nor the connection used again: the store reconnects
                self.connection.close()
            raise
        pgconn.exit_pipeline_mode()
        results = []
        for group in groups[:-1]:
            for result in group:
                if result.status == _FATAL:
                    raise errors.error_from_result(result, encoding=pgconn._encoding)
            results.append(group[0] if group else None)
        return results

    def get(self, sql: str, names: Sequence[str]) -> HotStatement:
        """``sql`` (server placeholders) whose parameters are ``names`` in order: a
        checkpoint row's column typed as its column (:func:`oid_of`), others left to the
        server (``UNKNOWN``: a cast in the text, or the column they are assigned to)."""
        statement = self._statements.get(sql)
        if statement is None:
            columns = checkpoints.c
            oids = [oid_of(columns[name].type) if name in columns else UNKNOWN
                    for name in names]
            statement = self._statements[sql] = HotStatement(self.connection, sql, oids)
        return statement


def oid_of(column_type: Any) -> int:
    """The OID to prepare a parameter of a column of SQLAlchemy type ``column_type`` with:
    its own for the types a statement may leave without a cast (bool, float, integer), else
    ``UNKNOWN`` (text: the server takes the statement's cast or the column's type)."""
    if isinstance(column_type, Boolean):
        return BOOL
    if isinstance(column_type, Float):
        return FLOAT8
    if isinstance(column_type, Integer):
        return INT4
    return UNKNOWN


def _exchange(pgconn: Any, count: int) -> Any:
    """A generator for psycopg's ``wait``: flush what was queued, then read ``count``
    statements' results and the Sync's (a list of results per statement, then the Sync's)."""
    yield from send(pgconn)
    groups = []
    for _ in range(count):
        groups.append((yield from fetch_many(pgconn)))
    while True:  # up to the Sync's own result (nothing else should come before it)
        group = yield from fetch_many(pgconn)
        groups.append(group)
        if not group or group[-1].status == _SYNC:
            return groups
