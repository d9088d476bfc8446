"""PostgreSQL runs its compiled statements with server-side placeholders (``$1``, ...) on
psycopg's ``RawCursor``, converted once per statement (``postgres.server_placeholders``), so
psycopg does not parse a long statement's text again at every execution."""

from __future__ import annotations

from sqlalchemy import String, bindparam, func, literal_column, select

from tether.stores.postgres import PostgresCheckpointer, server_placeholders


def test_placeholders_are_numbered_in_order_and_a_doubled_percent_is_a_literal_one() -> None:
    assert server_placeholders("SELECT %s, %s") == "SELECT $1, $2"
    assert server_placeholders("SELECT '50%%' || %s, %%s, %s") == "SELECT '50%' || $1, %s, $2"
    assert server_placeholders("SELECT 1") == "SELECT 1"



def test_a_statement_with_a_literal_percent_and_parameters_runs_as_written(
        pg_store: PostgresCheckpointer) -> None:
    def build() -> object:
        return select(func.concat(literal_column("'50%'"), bindparam("a", type_=String)),
                      func.concat(bindparam("b", type_=String), bindparam("a", type_=String)))

    with pg_store.sql_cursor("a test") as cursor:
        row = pg_store.sql_execute(cursor, "test_percent", build,  # type: ignore[arg-type]
                                   a="x", b="y").fetchone()
    assert tuple(row) == ("50%x", "yx")
    with pg_store.sql_cursor("a test") as cursor:  # compiled once, run again
        row = pg_store.sql_execute(cursor, "test_percent", build,  # type: ignore[arg-type]
                                   a="1", b="2").fetchone()
    assert tuple(row) == ("50%1", "21")


def test_a_statement_without_parameters_runs_on_the_raw_cursor(
        pg_store: PostgresCheckpointer) -> None:
    with pg_store.sql_cursor("a test") as cursor:
        row = pg_store.sql_execute(cursor, "test_none",
                                   lambda: select(literal_column("'100%'"))).fetchone()
    assert tuple(row) == ("100%",)
