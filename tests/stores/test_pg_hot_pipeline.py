"""Statements sent together on libpq directly (``pg_hot.HotStatements.pipelined``, used by a
worker slot's run end with its next claim, ``pg_end_claim.py``): one transaction committed
at one Sync, rolled back whole when a statement fails (the error psycopg's cursor raises),
prepared with the types psycopg sends the same values with, rows loaded as the cursor loads
them, a statement the session forgot prepared again without running anything twice, and
nothing sent when psycopg's own state must not be bypassed. PostgreSQL only."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import psycopg
import pytest
from helpers import new_run, row, run_end
from psycopg.adapt import PyFormat, Transformer

from tether.stores.pg_hot import HotStatements, oids_of
from tether.stores.postgres import PostgresCheckpointer
from tether.stores.queueing import NextClaim

OWNER = "slot-1"
INSERT = "INSERT INTO hot_pipe (n, note) VALUES ($1, $2) RETURNING n"
DIVIDE = "SELECT 1 / $1::int"


def _table(store: PostgresCheckpointer) -> HotStatements:
    with store.sql_cursor("a table for the test", write=True) as cursor:
        cursor.execute("CREATE TABLE hot_pipe (n bigint PRIMARY KEY, note text)")
    store._hot()
    return store._hot_set()


def _count(store: PostgresCheckpointer) -> int:
    with store.sql_cursor("counting") as cursor:
        cursor.execute("SELECT count(*) FROM hot_pipe")
        found = cursor.fetchone()
    assert found is not None
    return int(found[0])


def _pipelined(statements: HotStatements, *calls: tuple[str, tuple[Any, ...]]) -> Any:
    return statements.pipelined([(statements.typed(sql, params), params)
                                 for sql, params in calls])


def test_the_statements_commit_together_at_one_sync(pg_store: PostgresCheckpointer) -> None:
    statements = _table(pg_store)
    with pg_store._lock:
        results = _pipelined(statements, (INSERT, (1, "a")), (INSERT, (2, None)))
    assert [statements.rows(result) for result in results] == [[(1,)], [(2,)]]
    assert _count(pg_store) == 2
    assert statements.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_failing_statement_rolls_back_those_before_it_and_skips_those_after(
        pg_store: PostgresCheckpointer) -> None:
    statements = _table(pg_store)
    with pg_store._lock:
        with pytest.raises(psycopg.errors.DivisionByZero):
            _pipelined(statements, (INSERT, (1, "a")), (DIVIDE, (0,)), (INSERT, (2, "b")))
        with pytest.raises(psycopg.errors.UniqueViolation):  # the cursor's error class
            _pipelined(statements, (INSERT, (3, "c")), (INSERT, (3, "c")))
    assert _count(pg_store) == 0
    with pg_store._lock:  # the session goes on: nothing left open
        results = _pipelined(statements, (INSERT, (4, "d")), (DIVIDE, (2,)))
    assert statements.rows(results[1]) == [(0,)]
    assert _count(pg_store) == 1


def test_a_statement_the_session_forgot_is_prepared_again_and_runs_once(
        pg_store: PostgresCheckpointer) -> None:
    statements = _table(pg_store)
    with pg_store._lock:
        _pipelined(statements, (INSERT, (1, "a")), (DIVIDE, (1,)))
        statements.connection.execute("DEALLOCATE ALL")
        _pipelined(statements, (INSERT, (2, "b")), (DIVIDE, (1,)))
    assert _count(pg_store) == 2  # the failed attempt wrote nothing


def test_nothing_is_sent_in_a_block_or_with_a_value_it_does_not_encode(
        pg_store: PostgresCheckpointer) -> None:
    statements = _table(pg_store)
    with pg_store._lock:
        with statements.connection.transaction():
            assert _pipelined(statements, (INSERT, (1, "a"))) is None
        assert _pipelined(statements, (INSERT, (2, "a\x00b"))) is None
        assert _pipelined(statements, (INSERT, (3, b"bytes"))) is None
    assert _count(pg_store) == 0


def test_a_terminated_backend_is_psycopgs_disconnect(pg_store: PostgresCheckpointer,
                                                     pg_url: str) -> None:
    statements = _table(pg_store)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)",
                      (statements.connection.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError) as raised, pg_store._lock:
        _pipelined(statements, (INSERT, (1, "a")), (DIVIDE, (1,)))
    assert pg_store._is_disconnect(raised.value)
    assert statements.connection.closed


def test_parameters_are_typed_as_psycopg_types_them(pg_store: PostgresCheckpointer) -> None:
    values = [0, 1, -2**15, 2**15, -2**31, 2**31, -2**63, 2**63 - 1, 2**63, -2**63 - 1,
              0.5, math.inf, True, False, "text", None]
    loader = Transformer(pg_store._hot())
    loader.dump_sequence(values, [PyFormat.AUTO] * len(values))
    assert oids_of(values) == tuple(loader.types or ())


def test_rows_are_loaded_as_the_cursor_loads_them(pg_store: PostgresCheckpointer) -> None:
    statements = _table(pg_store)
    query = ("SELECT $1::float8, $2::int, $3::bigint, $4::text, $5::jsonb, $6::bool, "
             "NULL::text, 'NaN'::float8, $7::varchar, to_timestamp(0)")
    params = (1.25, 7, 2**40, "żółw", json.dumps({"a": [1, None]}), True, "v")
    with pg_store._lock:
        result = _pipelined(statements, (query, params))[0]
    with pg_store.sql_cursor("the same through the cursor") as cursor:
        cursor.execute(query, params)
        expected = cursor.fetchall()
    loaded = statements.rows(result)
    assert len(loaded) == 1 and len(loaded[0]) == len(expected[0])
    for mine, theirs in zip(loaded[0], expected[0], strict=True):
        assert type(mine) is type(theirs)
        assert mine == theirs or (mine != mine and theirs != theirs)  # NaN


def _armed(store: PostgresCheckpointer) -> tuple[str, str]:
    """A worker's store holding a run (``OWNER``) whose end is armed to claim the next run,
    and a queued run for it to claim."""
    store.use_for_worker()
    eid = new_run(store, owner=OWNER, lease_until=time.time() + 600)
    queued = new_run(store, status="queued")
    assert store.enqueue_run(queued, "default", 0, None)
    store.put(row(eid), OWNER)
    store.arm_end_claim(NextClaim(eid, "w1", ("default",), frozenset({"f" * 64}), 60.0))
    return eid, queued


def test_an_end_sent_with_its_claim_takes_the_next_run_in_its_transaction(
        pg_store: PostgresCheckpointer) -> None:
    eid, queued = _armed(pg_store)
    pg_store.finish_run(run_end(eid), "completed", None, OWNER)
    taken = pg_store.take_end_claim()
    assert taken is not None and taken.claimed is not None
    assert taken.claimed.run.execution_id == queued
    ended, claimed = pg_store.get_run(eid), pg_store.get_run(queued)
    assert ended is not None and (ended.status, ended.owner) == ("completed", None)
    assert claimed is not None and (claimed.status, claimed.owner) == (
        "running", taken.claimed.owner)
    with pg_store.sql_cursor("the transactions") as cursor:
        cursor.execute("SELECT (SELECT xmin::text FROM checkpoints WHERE execution_id = $1 "
                       "AND step_type = 'run_end'), (SELECT xmin::text FROM run_events "
                       "WHERE execution_id = $2 AND kind = 'claimed')", (eid, queued))
        end_xmin, claim_xmin = cursor.fetchone()
    assert end_xmin == claim_xmin
    [event] = [e for e in pg_store.events(queued) if e.kind.value == "claimed"]
    assert len(event.event_id) == 27 and event.event_id[:19].isdigit()  # time, then random
    assert abs(int(event.event_id[:19]) / 1e9 - event.created_at) < 1e-3


def test_an_end_not_sent_directly_is_written_alone_and_claims_nothing(
        pg_store: PostgresCheckpointer) -> None:
    """Inside a transaction block the hot connection cannot be used directly: the run's end
    is written alone (through the cursor) and nothing is claimed with it, so the chain
    claims alone."""
    eid, queued = _armed(pg_store)
    with pg_store._hot().transaction():
        pg_store.finish_run(run_end(eid), "completed", None, OWNER)
    assert pg_store.take_end_claim() is None
    ended, waiting = pg_store.get_run(eid), pg_store.get_run(queued)
    assert ended is not None and ended.status == "completed"
    assert waiting is not None and (waiting.status, waiting.owner) == ("queued", None)
