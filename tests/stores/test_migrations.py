"""Schema versions for real: a database created by the released v1 schema upgrades in order.

The v1 database is made the way the first release made it (only migration 1 applied) and
holds a run paused at an approval, written row for row as the runtime writes it. Opening it
with the migrations of today, plus one more that adds a column (defined in this test, as the
next migration someone writes would be), upgrades it: the version is recorded, the column is
there, the tables match a fresh database's, and the paused run resumes to the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import write_workflow
from sqlalchemy import inspect, select

import tether
from tether.stores import schema, sql
from tether.stores.base import Checkpointer
from tether.stores.events import RunEvent, RunEventKind
from tether.stores.migrations import MIGRATIONS, V1_METADATA, MigrationContext
from tether.stores.open import open_checkpointer

WORKFLOW = """
    tether: 1
    name: upgrade
    nodes:
      review:
        approval:
          reason: manager_approval
          context: {amount: 5}
      done:
        needs: [review]
        noop: true
    output:
      approved: "{{ nodes.review.output.approved }}"
"""


def _add_note(ctx: MigrationContext) -> None:
    """The next migration, as someone would write it: a nullable column on runs."""
    ctx.run(f"ALTER TABLE {ctx.table('runs')} ADD COLUMN note TEXT")


def _use_migrations(monkeypatch: pytest.MonkeyPatch, migrations: list[Callable[..., None]]) \
        -> None:
    """Make the stores know exactly ``migrations`` (as a tether of that version would)."""
    monkeypatch.setattr(schema, "MIGRATIONS", migrations)  # (sql.py imports it at set-up)
    monkeypatch.setattr(sql, "SCHEMA_VERSION", len(migrations))


def _columns(store: Checkpointer) -> dict[str, list[str]]:
    """The columns of each table of the schema the database has."""
    inspector = inspect(store.engine)  # type: ignore[attr-defined]
    where = getattr(store, "schema", None)
    present = set(inspector.get_table_names(schema=where))
    return {name: sorted(c["name"] for c in inspector.get_columns(name, schema=where))
            for name in sorted(schema.metadata.tables) if name in present}


def _indexes(store: Checkpointer) -> dict[str, set[tuple[str, tuple[str, ...]]]]:
    """The named indexes of each table (name, columns), primary keys and unique constraints
    aside."""
    inspector = inspect(store.engine)  # type: ignore[attr-defined]
    where = getattr(store, "schema", None)
    present = set(inspector.get_table_names(schema=where))
    return {name: {(i["name"], tuple(str(c) for c in i["column_names"]))
                   for i in inspector.get_indexes(name, schema=where)
                   if not i["name"].startswith("sqlite_autoindex")}
            for name in sorted(schema.metadata.tables) if name in present}


def _other_url(backend: str, tmp_path: Path, url: str) -> Iterator[str]:
    """A second, empty database of the same backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    base, _, name = url.partition("?schema=")
    fresh = f"{name}_fresh"
    try:
        yield f"{base}?schema={fresh}"
    finally:
        import psycopg

        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{fresh}" CASCADE')


def _paused_run_rows(tmp_path: Path, path: Path) -> tuple[str, dict[str, list[dict[str, object]]]]:
    """A run paused at ``review``, as the rows a run writes (read from a scratch store)."""
    scratch = open_checkpointer(f"sqlite:///{tmp_path / 'scratch.db'}")
    try:
        result = tether.Runner(path, scratch).run()
        assert result.status == "paused", result
        rows: dict[str, list[dict[str, object]]] = {}
        with scratch.engine.connect() as connection:  # type: ignore[attr-defined]
            for name, table in V1_METADATA.tables.items():
                current = schema.metadata.tables[name]
                keep = [current.c[c.name] for c in table.columns if c.name in current.c]
                rows[name] = [dict(r._mapping) for r in connection.execute(select(*keep))]
    finally:
        scratch.close()
    return result.execution_id, rows


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_released_v1_database_upgrades_through_a_column_adding_migration_and_resumes(
        backend: str, url_of: Callable[[str], str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """v1 -> today's migrations -> a test migration adding ``runs.note``: version 3, the
    column exists, the tables equal a fresh database's, and the paused run completes."""
    path = write_workflow(tmp_path, WORKFLOW)
    execution_id, rows = _paused_run_rows(tmp_path, path)
    url = url_of(backend)

    _use_migrations(monkeypatch, MIGRATIONS[:1])  # the first release
    released = open_checkpointer(url)
    assert "decision" in _columns(released)["runs"] and "attempt" not in _columns(released)["runs"]
    with released.engine.begin() as connection:  # type: ignore[attr-defined]
        for name, table_rows in rows.items():
            if table_rows:
                connection.execute(V1_METADATA.tables[name].insert(), table_rows)
    released.close()

    upgraded_migrations = [*MIGRATIONS, _add_note]
    _use_migrations(monkeypatch, upgraded_migrations)
    store = open_checkpointer(url)
    try:
        with store.engine.connect() as connection:  # type: ignore[attr-defined]
            version = connection.execute(select(schema.schema_version.c.version)).scalar()
        assert version == len(upgraded_migrations)
        upgraded = _columns(store)
        assert "note" in upgraded["runs"]
        for fresh_url in _other_url(backend, tmp_path, url):
            fresh = open_checkpointer(fresh_url)
            try:
                assert _columns(fresh) == upgraded
                assert _indexes(fresh) == _indexes(store)
            finally:
                fresh.close()
        expected = {name: sorted(c.name for c in table.columns)
                    for name, table in schema.metadata.tables.items()}
        expected["runs"] = sorted([*expected["runs"], "note"])
        if "decision" in upgraded["runs"]:  # SQLite before 3.35 cannot drop a column
            expected["runs"] = sorted([*expected["runs"], "decision"])
        assert upgraded == dict(sorted(expected.items()))
        declared = {name: {(i.name, tuple(c.name for c in i.columns)) for i in table.indexes}
                    for name, table in schema.metadata.tables.items()}
        assert {name: {i for i in found if not i[0].endswith("_key")}
                for name, found in _indexes(store).items()} == declared
        assert ("runs_claim_order", ("queue", "status", "priority", "created_at",
                                     "execution_id")) in declared["runs"]
        # migration 8: run_events, as schema.py declares it, usable by the upgraded run
        assert upgraded["run_events"] == sorted(c.name for c in schema.run_events.columns)
        store.add_event(RunEvent(execution_id, RunEventKind.CLAIMED, data={"attempt": 2}))
        assert [e.data for e in store.events(execution_id)] == [{"attempt": 2}]

        run = store.get_run(execution_id)
        assert run is not None and (run.status, run.attempt) == ("paused", 1)
        assert [p.node_id for p in store.list_pending(execution_id)] == ["review"]
        result = tether.Runner(path, store).resume(execution_id, {"approved": True})
        assert (result.status, result.output) == ("completed", {"approved": True})
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_database_at_the_current_version_runs_no_migration_again(
        backend: str, url_of: Callable[[str], str]) -> None:
    """Opening a database twice applies nothing the second time (the version is kept)."""
    url = url_of(backend)
    open_checkpointer(url).close()
    store = open_checkpointer(url)
    try:
        with store.engine.connect() as connection:  # type: ignore[attr-defined]
            rows = connection.execute(select(schema.schema_version)).all()
        assert [tuple(r) for r in rows] == [(1, len(MIGRATIONS))]
    finally:
        store.close()



def test_each_migration_is_named_by_its_schema_version() -> None:
    """``_vN_...`` is the migration that brings the schema to version N (its position), so a
    migration added by one branch and one added by another cannot share a name silently."""
    from tether.stores.migrations import MIGRATIONS

    for version, migration in enumerate(MIGRATIONS, start=1):
        assert migration.__name__.split("_")[1] == f"v{version}", migration.__name__
