"""The SQLAlchemy-free submit on SQLite (``stores/sqlite_submit.py``, issue 25): its statements
are the ones SQLAlchemy compiles for the SQLite store, its URL reading agrees with
``parse_store_url``, and it steps aside (None) whenever the full store must act.

That both paths write the same rows, through the real command, is in
``tests/cli/test_submit_paths.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import select

from tether.stores import sql_text
from tether.stores.migrations import MIGRATIONS, SCHEMA_VERSION
from tether.stores.schema import plans, runs, schema_version
from tether.stores.sqlite import SQLiteCheckpointer
from tether.stores.sqlite_submit import open_current, plain_sqlite_path
from tether.stores.urls import parse_store_url


def test_the_statements_are_the_ones_the_sqlite_store_compiles(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "s.db")
    compiled = {
        "plan": store._sql.get("t_plan", lambda: store._insert_or_ignore(plans)),
        "run": store._sql.get("t_run", lambda: store._insert_or_ignore(runs).returning(
            runs.c.execution_id)),
        "version": store._sql.get("t_version", lambda: select(schema_version.c.version)),
    }
    assert compiled["plan"].sql == sql_text.SQLITE_INSERT_PLAN
    assert compiled["plan"].names == sql_text.PLAN_COLUMNS
    assert compiled["run"].sql == sql_text.SQLITE_INSERT_RUN
    assert compiled["run"].names == sql_text.RUN_COLUMNS
    assert compiled["version"].sql == sql_text.SQLITE_SCHEMA_VERSION
    assert tuple(c.name for c in runs.columns) == sql_text.RUN_COLUMNS
    assert tuple(c.name for c in plans.columns) == sql_text.PLAN_COLUMNS
    kind = select(runs.c.workflow, runs.c.status).where(runs.c.execution_id == "x")
    assert str(kind.compile(dialect=store.engine.dialect)) == sql_text.SQLITE_RUN_KIND
    store.close()


def test_the_schema_version_is_the_number_of_migrations() -> None:
    assert sql_text.SCHEMA_VERSION == SCHEMA_VERSION == len(MIGRATIONS)


@pytest.mark.parametrize("url", [
    "sqlite:///x.db", "sqlite:////tmp/a/b.db", "sqlite:///.tether/tether.db",
    "sqlite:///dir/sub-dir/x_1.sqlite3", "sqlite:///./x.db", "sqlite:///../x+y.db",
])
def test_a_plain_url_names_the_file_the_store_would_open(url: str) -> None:
    assert plain_sqlite_path(url) == parse_store_url(url).path


@pytest.mark.parametrize("url", [
    "sqlite:///x.db?durability=full", "sqlite:///x%20y.db", "sqlite:///:memory:",
    "sqlite://", "sqlite:///", "memory://", "postgresql://u@h/db", "sqlite:///a b.db",
    "sqlite:///x.db#f", "sqlite:///caf\u00e9.db", "SQLITE:///x.db",
])
def test_any_other_url_goes_to_the_full_store(url: str) -> None:
    assert plain_sqlite_path(url) is None


def test_only_an_existing_current_database_is_opened(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    assert open_current(url) is None and not db.exists()  # nothing is created
    SQLiteCheckpointer(db).close()  # created and migrated by the full store
    connection = open_current(url)
    assert connection is not None
    connection.close()
    with sqlite3.connect(db) as raw:  # an older schema: the full store migrates it
        raw.execute("UPDATE schema_version SET version = version - 1")
    assert open_current(url) is None
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # a SQLite file without tether's tables
    assert open_current(f"sqlite:///{empty}") is None
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    assert open_current(f"sqlite:///{tmp_path / 'junk.db'}") is None
