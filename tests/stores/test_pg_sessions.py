"""Every PostgreSQL session tether opens bounds how long it may sit idle inside a transaction
and how long a statement waits for a lock (``stores/pg_sessions.py``): derived from the
lease, overridable per URL, set on the engine's, the hot and the run-creation connections;
a session the server ended and a lock waited for too long are clear, retried errors."""

from __future__ import annotations

import time

import psycopg
import pytest
from helpers import new_run

from tether.errors import StoreUnavailable, StoreURLError
from tether.stores.open import open_checkpointer
from tether.stores.pg_sessions import SessionTimeouts, session_timeouts
from tether.stores.postgres import PostgresCheckpointer
from tether.stores.urls import parse_store_url


@pytest.mark.parametrize(("lease", "idle", "lock"), [
    (30.0, 10.0, 30.0),   # the default lease: a third of it, and the lease
    (2.0, 1.0, 2.0),      # a short lease: at least 1 s idle, a lock wait twice that
    (0.5, 1.0, 2.0),
    (3600.0, 60.0, 120.0),  # a long lease: capped
])
def test_the_timeouts_derive_from_the_lease(lease: float, idle: float, lock: float) -> None:
    assert session_timeouts(lease) == SessionTimeouts(idle, lock)


def test_a_urls_options_win_and_so_do_its_own_libpq_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_LEASE_SECONDS", "6")
    assert session_timeouts() == SessionTimeouts(2.0, 6.0)
    assert session_timeouts(idle=0, lock=5) == SessionTimeouts(0, 5)
    assert session_timeouts(idle=20) == SessionTimeouts(20, 40)
    assert SessionTimeouts(1.5, 3).options() == \
        "-c idle_in_transaction_session_timeout=1500 -c lock_timeout=3000"
    assert SessionTimeouts(1.5, 3).options("-c lock_timeout=9 -c work_mem=64MB") == \
        "-c idle_in_transaction_session_timeout=1500 -c lock_timeout=9 -c work_mem=64MB"
    assert SessionTimeouts(0, 3).options() == "-c lock_timeout=3000"
    assert SessionTimeouts(0, 0).options() == ""  # nothing sent: a pooler without options
    parsed = parse_store_url("postgresql://h/db?idle_in_transaction_timeout=4&lock_timeout=0")
    assert (parsed.idle_in_transaction_timeout, parsed.lock_timeout) == (4.0, 0.0)
    assert "idle_in_transaction_timeout" not in str(parsed)
    with pytest.raises(StoreURLError, match="lock_timeout must be a number of seconds"):
        parse_store_url("postgresql://h/db?lock_timeout=soon")


def _settings(connection: psycopg.Connection[tuple[str, ...]]) -> tuple[str, str]:
    row = connection.execute("SELECT current_setting('idle_in_transaction_session_timeout'), "
                             "current_setting('lock_timeout')").fetchone()
    assert row is not None
    return row[0], row[1]


def test_every_connection_of_the_store_carries_them(pg_schema: tuple[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    url, schema = pg_schema
    monkeypatch.setenv("TETHER_LEASE_SECONDS", "9")
    store = open_checkpointer(f"{url}?schema={schema}")
    assert isinstance(store, PostgresCheckpointer)
    try:
        with store._lock:
            assert _settings(store._hot()) == ("3s", "9s")
        with store.engine.connect() as connection:
            row = connection.exec_driver_sql(
                "SELECT current_setting('idle_in_transaction_session_timeout')").scalar()
            assert row == "3s"
        with store._starts.connection() as connection:
            assert _settings(connection) == ("3s", "9s")
    finally:
        store.close()
    store = open_checkpointer(f"{url}?schema={schema}&idle_in_transaction_timeout=0.25"
                              "&lock_timeout=0&options=-c%20statement_timeout%3D7000")
    assert isinstance(store, PostgresCheckpointer)
    try:
        with store._lock:
            assert _settings(store._hot())[0] == "250ms"  # lock_timeout: the server's
            row = store._hot().execute("SHOW statement_timeout").fetchone()
            assert row is not None and row[0] == "7s"
    finally:
        store.close()
    store = open_checkpointer(f"{url}?schema={schema}&idle_in_transaction_timeout=0"
                              "&lock_timeout=0")
    assert isinstance(store, PostgresCheckpointer)
    try:  # no start-up options at all (a pooler that refuses them still connects)
        assert "options" not in store._connect_args
        with store._lock:
            assert _settings(store._hot()) == ("0", "0")
    finally:
        store.close()


def test_a_session_ended_idle_in_a_transaction_is_a_clear_retried_error(
        pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """The hot connection left idle inside a transaction (as a stopped process leaves it)
    is ended by the server: its locks go, the store's next statement reconnects."""
    url, schema = pg_schema
    store = open_checkpointer(f"{url}?schema={schema}&idle_in_transaction_timeout=0.2")
    assert isinstance(store, PostgresCheckpointer)
    try:
        eid = new_run(store, owner="me", lease_until=time.time() + 60)
        with store._lock:  # a transaction holding the run row, then nothing
            hot = store._hot()
            hot.execute("BEGIN")
            hot.execute(f'SELECT 1 FROM "{schema}".runs WHERE execution_id = %s FOR UPDATE',
                        (eid,))
        with psycopg.connect(url, autocommit=True) as other:  # waits until it is ended
            other.execute("SET lock_timeout = '60s'")
            other.execute(f'UPDATE "{schema}".runs SET priority = 1 WHERE execution_id = %s',
                          (eid,))
        with pytest.raises(StoreUnavailable, match=r"inside a transaction for more "
                                                   r"than 0\.2 s"), store._cursor("probe") as cur:
            cur.execute("SELECT 1")
        assert "the database ended this process's session" in caplog.text
        assert "Traceback" not in caplog.text
        assert store.renew(eid, "me", time.time() + 60)  # a new connection
    finally:
        store.close()


def test_a_lock_held_past_lock_timeout_fails_the_wait_clearly(
        pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    store = open_checkpointer(f"{url}?schema={schema}&lock_timeout=0.3&retry_seconds=1")
    try:
        eid = new_run(store, owner="me", lease_until=time.time() + 60)
        with psycopg.connect(url) as holder:  # another application's session, not idle-bounded
            holder.execute(f'SELECT 1 FROM "{schema}".runs WHERE execution_id = %s '
                           "FOR UPDATE", (eid,))
            with pytest.raises(StoreUnavailable, match=r"held a lock it needs for more than "
                                                       r"lock_timeout \(0.3 s\)|stayed "
                                                       r"unreachable"):
                store.renew(eid, "me", time.time() + 60)
            holder.rollback()
        assert store.renew(eid, "me", time.time() + 60)
    finally:
        store.close()
