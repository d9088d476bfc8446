"""Schema versioning: the version is recorded, and a newer schema is refused clearly."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select, update

import tether
from tether.errors import SchemaVersionError
from tether.stores.open import open_checkpointer
from tether.stores.schema import SCHEMA_VERSION, schema_version


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_setup_records_the_schema_version(backend: str,
                                          url_of: Callable[[str], str]) -> None:
    """After set-up the schema_version table holds the version this tether knows."""
    store = open_checkpointer(url_of(backend))
    with store.engine.connect() as connection:  # type: ignore[attr-defined]
        assert connection.execute(select(schema_version.c.version)).scalar() == SCHEMA_VERSION
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_database_with_a_newer_schema_is_refused(backend: str,
                                                   url_of: Callable[[str], str]) -> None:
    """Opening a database migrated by a newer tether raises SchemaVersionError naming both
    versions, and leaves the database as it was."""
    url = url_of(backend)
    store = open_checkpointer(url)
    with store.engine.begin() as connection:  # type: ignore[attr-defined]
        connection.execute(update(schema_version).values(version=SCHEMA_VERSION + 1))
    store.close()
    with pytest.raises(SchemaVersionError) as caught:
        open_checkpointer(url)
    assert caught.value.found == SCHEMA_VERSION + 1
    assert caught.value.known == SCHEMA_VERSION
    assert "upgrade tether" in str(caught.value)
    assert isinstance(caught.value, tether.StoreError)
