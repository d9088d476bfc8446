"""The ``protocol`` marker: which store protocols (``tether.stores.contracts``) a
conformance file checks; ``pg_store``, a PostgreSQL store on a fresh schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tether.stores.postgres import PostgresCheckpointer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "protocol(*names): the store protocols a conformance file checks")


@pytest.fixture
def pg_store(pg_schema: tuple[str, str]) -> Iterator[PostgresCheckpointer]:
    url, schema = pg_schema
    store = PostgresCheckpointer(url, schema=schema)
    yield store
    store.close()
