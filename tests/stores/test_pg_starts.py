"""Creating runs on PostgreSQL in one statement on the start pool (``stores/pg_starts.py``),
against the real server: the NOTIFY goes out exactly for an inserted queued run, racing
creates of one id leave one run and one plan, and a pool connection killed by the server is
replaced without losing or doubling the run."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from helpers import new_run

from tether.errors import ExecutionExists
from tether.runtime.ids import new_execution_id
from tether.stores.postgres import PostgresCheckpointer


@pytest.fixture
def pg(pg_schema: tuple[str, str]) -> Iterator[PostgresCheckpointer]:
    url, schema = pg_schema
    app = f"tether-starts-{uuid.uuid4().hex[:8]}"
    store = PostgresCheckpointer(f"{url}?application_name={app}", schema=schema, pool_size=3)
    store.application_name = app  # type: ignore[attr-defined]
    yield store
    store.close()


def notifications(url: str, channel: str, action: object) -> list[str]:
    """The payloads sent on ``channel`` while ``action()`` ran (and committed)."""
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')
        action()  # type: ignore[operator]
        return [n.payload for n in listener.notifies(timeout=0.5)]


def count(url: str, schema: str, sql: str) -> int:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'SET search_path TO "{schema}"')
        row = connection.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


def test_a_queued_run_wakes_the_workers_once_a_running_or_refused_one_not_at_all(
        pg: PostgresCheckpointer, pg_schema: tuple[str, str]) -> None:
    url, _ = pg_schema
    queued = new_execution_id()
    assert notifications(url, pg.notify_channel,
                         lambda: new_run(pg, queued, status="queued")) == [""]
    assert notifications(url, pg.notify_channel,
                         lambda: new_run(pg, status="running")) == []

    def refused() -> None:
        with pytest.raises(ExecutionExists):
            new_run(pg, queued, status="queued")

    assert notifications(url, pg.notify_channel, refused) == []


def test_sixteen_racing_creates_of_one_id_make_one_run_and_store_its_plan_once(
        pg: PostgresCheckpointer, pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    execution_id = new_execution_id()
    barrier = threading.Barrier(16)
    outcomes: list[str] = []

    def create(n: int) -> None:
        barrier.wait()
        try:
            new_run(pg, execution_id, status="queued", inputs={"n": n})
            outcomes.append("created")
        except ExecutionExists:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["created"] + ["exists"] * 15
    assert count(url, schema, "SELECT count(*) FROM runs") == 1
    assert count(url, schema, "SELECT count(*) FROM plans") == 1
    # the pool never holds more connections than pool_size (plus the hot one and set-up's)
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                 "application_name = %s", (pg.application_name,)).fetchone()
    assert row is not None and row[0] <= 3 + 2


def test_a_pool_connection_the_server_killed_is_replaced_and_the_run_created_once(
        pg: PostgresCheckpointer, pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    new_run(pg, status="queued")  # the pool now holds a connection
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                      "application_name = %s", (pg.application_name,))
    execution_id = new_run(pg, status="queued")
    assert pg.get_run(execution_id) is not None
    assert count(url, schema, "SELECT count(*) FROM runs") == 2
    with pytest.raises(ExecutionExists):  # and the id stays taken
        new_run(pg, execution_id, status="queued")
