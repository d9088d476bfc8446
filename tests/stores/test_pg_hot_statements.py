"""The fenced checkpoint write on libpq directly (``stores/pg_hot.py``): the same rows as
psycopg's cursor stored, the same errors, a reconnect prepares again, and the cursor is used
whenever psycopg's own state must not be bypassed. PostgreSQL only (the ``pg_store``
fixture skips without ``TETHER_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import math
import time
from typing import Any

import psycopg
import pytest
from helpers import new_run, row, run_end

from tether.errors import LeaseLost, StoreError
from tether.runtime.ids import new_checkpoint_id
from tether.status import RunStatus, StepType
from tether.stores.pg_hot import HotStatement, encode
from tether.stores.postgres import PostgresCheckpointer
from tether.stores.records import CheckpointRow

OWNER = "slot-1"
TEXTS = ["żółw 🐢 日本語 \u00e9\u0301", "", "quote ' and \\ backslash; $1 %s", "x" * 20_000]
FLOATS = [0.1 + 0.2, -1.7976931348623157e308, 5e-324, -0.0, 1e300, -123456.789,
          1733433123.1234567, math.inf, -math.inf]
INTS = [0, -2**31, 2**31 - 1, -7]


def _worker_store(store: PostgresCheckpointer) -> str:
    """``store`` as a worker's (its fenced writes read the cancel request: ``_put_seen``)
    and a run ``OWNER`` holds."""
    store.use_for_worker()
    return new_run(store, owner=OWNER, lease_until=time.time() + 600)


def _variants(eid: str) -> list[CheckpointRow]:
    base = row(eid)
    rows = [base._replace(checkpoint_id=new_checkpoint_id(), state=text, node_id=text,
                          node_input=text, interrupt_reason=text or None)
            for text in TEXTS]
    rows += [base._replace(checkpoint_id=new_checkpoint_id(), created_at=value)
             for value in FLOATS]
    rows += [base._replace(checkpoint_id=new_checkpoint_id(), node_index=value,
                           is_full=value % 2 == 0) for value in INTS]
    rows.append(base._replace(checkpoint_id=new_checkpoint_id(), parent_checkpoint_id=None,
                              node_input=None, node_output=None, interrupt_reason=None,
                              interrupt_context=None, step_type=StepType.LLM_CALL))
    return rows


def _seen_statement(store: PostgresCheckpointer) -> HotStatement:
    """The worker's fenced write as prepared on the hot connection."""
    assert store._seen_sql is not None
    with store._lock:
        return store._hot_statement(store._seen_sql, ("eid", "owner", *CheckpointRow._fields))


def _stored(store: PostgresCheckpointer, eid: str, checkpoint_id: str) -> tuple[Any, ...]:
    """The row as the server holds it: each column's text (a float's is its shortest exact
    form) and ``created_at``'s binary form, the checkpoint id left out."""
    with store.sql_cursor("reading a row back") as cursor:
        cursor.execute(
            "SELECT execution_id, parent_checkpoint_id, node_id, node_index::text, step_type, "
            "status, base_id, is_full::text, state, node_input, node_output, "
            "iteration_counters, interrupt_reason, interrupt_context, agent_path, "
            "created_at::text, float8send(created_at) FROM checkpoints "
            "WHERE execution_id = $1 AND checkpoint_id = $2", (eid, checkpoint_id))
        found = cursor.fetchone()
    assert found is not None
    return tuple(found)


def test_the_rows_stored_are_those_the_cursor_stored(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    for fast in _variants(eid):
        pg_store.put(fast, OWNER)
        slow = fast._replace(checkpoint_id=new_checkpoint_id())
        with pg_store._lock:  # the previous path: the RawCursor, psycopg's dumpers
            assert pg_store._seen_sql is not None
            written, _ = pg_store._hot_cursor.execute(
                pg_store._seen_sql, (eid, OWNER, *slow), prepare=True).fetchone()
        assert written == 1
        assert _stored(pg_store, eid, fast.checkpoint_id) == \
            _stored(pg_store, eid, slow.checkpoint_id)
        back = pg_store._row(eid, fast.checkpoint_id)
        assert back == fast._replace(step_type=str(fast.step_type))
    assert _prepared(pg_store)[0][1] == len(_variants(eid))  # each went the fast way


def test_a_nan_is_stored_as_postgresqls_nan(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    written = row(eid)._replace(created_at=math.nan)
    pg_store.put(written, OWNER)
    back = pg_store._row(eid, written.checkpoint_id)
    assert back is not None and math.isnan(back.created_at)


def test_the_cancel_request_is_read_with_the_write(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    seen = pg_store.take_cancel_seen(eid, 60)
    assert seen is not None and seen.requested_at is None
    at = 1733433123.1234567
    with pg_store.sql_cursor("requesting a cancel") as cursor:
        cursor.execute("UPDATE runs SET cancel_requested_at = $1 WHERE execution_id = $2",
                       (at, eid))
    pg_store.put(row(eid), OWNER)
    seen = pg_store.take_cancel_seen(eid, 60)
    assert seen is not None and seen.requested_at == at


def test_a_duplicate_checkpoint_id_is_the_store_error_it_was(
        pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    first = row(eid)
    pg_store.put(first, OWNER)
    connection = pg_store._hot_connection
    with pytest.raises(StoreError) as raised:
        pg_store.put(first._replace(state="[1]"), OWNER)
    assert type(raised.value) is StoreError
    assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)
    assert pg_store._hot_connection is connection  # not taken for a lost connection
    pg_store.put(row(eid), OWNER)  # the connection goes on
    assert pg_store._row(eid, first.checkpoint_id) == first


def test_a_lost_fence_is_lease_lost_and_writes_nothing(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    stray = row(eid)
    with pytest.raises(LeaseLost):
        pg_store.put(stray, "another-attempt")
    assert pg_store._row(eid, stray.checkpoint_id) is None


def _prepared(store: PostgresCheckpointer) -> list[tuple[str, int, int]]:
    """The session's statements of ``pg_hot``: name, executions on the generic plan, on a
    custom plan."""
    with store.sql_cursor("reading the session's prepared statements") as cursor:
        cursor.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
                       "WHERE name LIKE 'tether_hot_%' ORDER BY name")
        return [(str(name), int(generic), int(custom))
                for name, generic, custom in cursor.fetchall()]


def test_a_statement_fails_as_the_cursors_did_and_the_session_goes_on(
        pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    with pg_store._lock:
        hot = pg_store._hot_statement("SELECT 1 / $1::int", ("divisor",))
        with pytest.raises(psycopg.errors.DivisionByZero):
            hot.first((0,))
        assert hot.first((1,)) == (b"1",)
        hot = pg_store._hot_statement("SELECT $1::int FROM no_such_table", ("x",))
        with pytest.raises(psycopg.errors.UndefinedTable):  # refused when prepared
            hot.first((1,))


def test_prepared_once_per_connection_on_generic_plans(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    for _ in range(8):
        pg_store.put(row(eid), OWNER)
    statements = _prepared(pg_store)
    assert len(statements) == 1
    assert statements[0][1:] == (8, 0)  # every write on it, never planned for its values
    with pg_store.sql_cursor("reading psycopg's prepared statements") as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements "
                       "WHERE statement LIKE '%FROM held) RETURNING 1%'")
        assert cursor.fetchone()[0] == 1  # psycopg never prepared it as well


def test_a_terminated_backend_is_a_disconnect_and_the_next_write_reconnects(
        pg_store: PostgresCheckpointer, pg_url: str) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    before = _prepared(pg_store)
    old = pg_store._hot_connection
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (old.info.backend_pid,))
    after_outage = row(eid)
    pg_store.put(after_outage, OWNER)  # retried on a new connection (transient)
    assert pg_store._hot_connection is not old
    assert pg_store._row(eid, after_outage.checkpoint_id) == after_outage
    again = _prepared(pg_store)  # the new session prepared it again, under a new name
    assert len(again) == 1 and again[0][0] != before[0][0]


def test_the_statement_itself_raises_psycopgs_disconnect(
        pg_store: PostgresCheckpointer, pg_url: str) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    hot = _seen_statement(pg_store)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)",
                      (hot.connection.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError) as raised, pg_store._lock:
        hot.first((eid, OWNER, *row(eid)))
    assert pg_store._is_disconnect(raised.value)
    assert hot.connection.closed  # psycopg sees the connection as lost too


def test_deallocated_by_the_session_it_is_prepared_again(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    with pg_store.sql_cursor("deallocating everything") as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert _prepared(pg_store) == []
    later = row(eid)
    pg_store.put(later, OWNER)
    assert pg_store._row(eid, later.checkpoint_id) == later
    assert len(_prepared(pg_store)) == 1


def test_inside_a_block_or_a_pipeline_the_cursor_is_used(
        pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    hot = _seen_statement(pg_store)
    connection = hot.connection
    with pg_store._lock:
        with connection.transaction():
            assert not hot.usable()
            assert hot.run((eid, OWNER, *row(eid))) is None
        with connection.pipeline():
            assert hot.run((eid, OWNER, *row(eid))) is None
        assert hot.usable()


def test_a_text_with_nul_is_refused_as_psycopg_refuses_it(
        pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    pg_store.put(row(eid), OWNER)
    bad = row(eid)._replace(state="a\x00b")
    with pytest.raises(StoreError) as raised:
        pg_store.put(bad, OWNER)
    assert isinstance(raised.value.__cause__, psycopg.DataError)
    assert pg_store._row(eid, bad.checkpoint_id) is None


def test_encode_writes_text_as_psycopgs_dumpers_read_it() -> None:
    assert encode(["é", True, False, None, 12, -3, 0.5, math.inf, -math.inf]) == [
        "é".encode(), b"t", b"f", None, b"12", b"-3", b"0.5", b"Infinity", b"-Infinity"]
    assert encode([math.nan]) == [b"NaN"]
    assert encode([StepType.NODE]) == [b"node"]
    assert encode(["a\x00b"]) is None and encode(["\ud800"]) is None  # the cursor's errors
    assert encode([RunStatus.COMPLETED, 1.5]) == [b"completed", b"1.5"]
    assert encode([object()]) is None


def test_tether_runs_fenced_write_stores_what_the_cursor_stored(
        pg_store: PostgresCheckpointer) -> None:
    """Not a worker's store (``tether run``): the plain fenced INSERT, by its row count."""
    eid = new_run(pg_store, owner=OWNER, lease_until=time.time() + 600)
    for fast in _variants(eid):
        pg_store.put(fast, OWNER)
        slow = fast._replace(checkpoint_id=new_checkpoint_id())
        statement = pg_store._sql.get("put_fenced", lambda: None)  # type: ignore[arg-type,return-value]
        with pg_store._lock:  # the previous path: the RawCursor, psycopg's dumpers
            assert pg_store._run(pg_store._hot(), statement.sql,
                                 (*slow, eid, OWNER)).rowcount == 1
        assert _stored(pg_store, eid, fast.checkpoint_id) == \
            _stored(pg_store, eid, slow.checkpoint_id)
    assert sum(_prepared(pg_store)[0][1:]) == len(_variants(eid))  # each went the fast way
    stray = row(eid)
    with pytest.raises(LeaseLost):
        pg_store.put(stray, "another-attempt")
    with pytest.raises(StoreError) as raised:
        pg_store.put(stray._replace(checkpoint_id=fast.checkpoint_id), OWNER)
    assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)
    assert pg_store._row(eid, stray.checkpoint_id) is None
    assert len(_prepared(pg_store)) == 1


def test_a_runs_end_alone_is_fenced_and_written_once(pg_store: PostgresCheckpointer) -> None:
    eid = _worker_store(pg_store)
    end = run_end(eid)
    with pytest.raises(LeaseLost):
        pg_store.finish_run(end, "completed", None, "another-attempt")
    assert pg_store._row(eid, end.checkpoint_id) is None
    pg_store.finish_run(end, "completed", None, OWNER)
    run = pg_store.get_run(eid)
    assert run is not None and run.status == RunStatus.COMPLETED and run.owner is None
    assert pg_store._row(eid, end.checkpoint_id) == end
    assert [executed for _, *executed in _prepared(pg_store)] == [[2, 0]]  # refused, then


def test_an_unfenced_write_goes_the_same_way(pg_store: PostgresCheckpointer) -> None:
    eid = new_run(pg_store)
    written = row(eid)._replace(state="ünïcode", created_at=-2.5e-310)
    pg_store.put(written)
    assert pg_store._row(eid, written.checkpoint_id) == written
    with pytest.raises(StoreError):
        pg_store.put(written)
    assert sum(_prepared(pg_store)[0][1:]) == 2  # both sent without the cursor
