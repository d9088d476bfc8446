"""Fixtures shared by every test package: the store backends, and PostgreSQL schemas.

PostgreSQL tests use the server named by ``TETHER_TEST_POSTGRES_URL`` (for example
``postgresql://postgres@127.0.0.1:5432/test``); each test gets a fresh schema, dropped after.
Without the variable they are skipped with a reason, unless ``TETHER_REQUIRE_POSTGRES=1``
(set by ``.ci/run``), which turns a missing or unreachable server into a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.stores.base import Checkpointer

PG_URL = os.environ.get("TETHER_TEST_POSTGRES_URL", "")
REQUIRE_PG = os.environ.get("TETHER_REQUIRE_POSTGRES", "") == "1"
BACKENDS = ("memory", "sqlite", "postgres")
SQL_BACKENDS = ("sqlite", "postgres")


def postgres_url() -> str:
    """The test server's URL, or skip (fail in CI) when there is none or it is down."""
    if not PG_URL:
        if REQUIRE_PG:
            pytest.fail("TETHER_REQUIRE_POSTGRES=1 but TETHER_TEST_POSTGRES_URL is not set")
        pytest.skip("no PostgreSQL server configured (set TETHER_TEST_POSTGRES_URL)")
    import psycopg

    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
    return PG_URL


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL schema: yields (server URL, schema name); dropped afterwards."""
    url = postgres_url()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield url, schema
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL for ``backend`` that a subprocess can open too (memory has none)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'tether.db'}"
    if backend == "postgres":
        url, schema = request.getfixturevalue("pg_schema")
        return f"{url}?schema={schema}"
    return "memory://"


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Checkpointer]:
    """Each backend in turn: in-memory, SQLite (a file in tmp_path), PostgreSQL (a schema)."""
    from tether.stores.open import open_checkpointer

    checkpointer = open_checkpointer(store_url(request.param, tmp_path, request))
    yield checkpointer
    checkpointer.close()


@pytest.fixture(params=SQL_BACKENDS)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL several processes can share: SQLite file, then a PostgreSQL schema."""
    return store_url(request.param, tmp_path, request)


@pytest.fixture
def url_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """A function giving a store URL for a backend name (see :func:`store_url`)."""
    return lambda backend: store_url(backend, tmp_path, request)


@pytest.fixture
def pg_url() -> str:
    """The PostgreSQL server's URL (skips, or fails in CI, without one)."""
    return postgres_url()
