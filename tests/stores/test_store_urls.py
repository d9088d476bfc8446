"""Store URLs (issue 8, item 12): strict parsing, usage errors that name the part at fault,
the password masked everywhere, and schema names that can never inject SQL.

The PostgreSQL cases run against the real server (``TETHER_TEST_POSTGRES_URL``); the command's
side is in ``tests/cli/test_store_options.py``.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tether.errors import StoreError, StoreURLError, TetherError
from tether.stores import urls
from tether.stores.open import open_checkpointer
from tether.stores.postgres import PostgresCheckpointer
from tether.stores.urls import StoreURL, mask_url, parse_store_url, redact, redact_exception

SECRET = "s3cr3t pw"  # a space: libpq's URI parser quotes such a password in its error
ENCODED = "s3cr3t%20pw"

BAD_URLS = [
    ("postgress://u:s3cr3t@h/db", "scheme", "did you mean postgresql://?"),
    ("postgres1://u:s3cr3t@h/db", "scheme", "did you mean postgresql://?"),
    ("sqlit:///x.db", "scheme", "did you mean sqlite://?"),
    ("mysql://u:s3cr3t@h/db", "scheme", "unknown store URL scheme 'mysql'"),
    ("postgresql+asyncpg://u:s3cr3t@h/db", "scheme", "through psycopg 3"),
    ("tether.db", "scheme", "a SQLite file is written sqlite:///tether.db"),
    ("postgresql://u:s3cr3t@h:99999/db", "port", "between 1 and 65535, not 99999"),
    ("postgresql://u:s3cr3t@h:0/db", "port", "between 1 and 65535, not 0"),
    ("postgresql://u:s3cr3t@h:5x/db", "port", "the port must be a number"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=abc", "retry_seconds", "not 'abc'"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=-1", "retry_seconds", "from 0 to 3600"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=99999999999", "retry_seconds", "from 0 to"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=nan", "retry_seconds", "not 'nan'"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=inf", "retry_seconds", "not 'inf'"),
    ("postgresql://u:s3cr3t@h/db?connect_timeout=0", "connect_timeout", "whole number"),
    ("postgresql://u:s3cr3t@h/db?sslmod=require", "sslmod", "did you mean 'sslmode'?"),
    ("postgresql://u:s3cr3t@h/db?schema=a&schema=b", "schema", "more than once"),
    ("postgresql://u:s3cr3t@h/db?password=s3cr3t", "password", "PGPASSWORD"),
    ("postgresql://u:s3cr3t@h/db?schema=1abc", "schema", "plain identifier"),
    ("postgresql://u:s3cr3t@h/db?schema=" + "a" * 64, "schema", "at most 63"),
    ('postgresql://u:s3cr3t@h/db?schema=x";COMMIT;CREATE TABLE pwned(i int);--', "schema",
     "not 'x\";COMMIT;CREATE TABLE pwned(i int);--'"),
    ("sqlite:///x.db?durability=fast", "durability", "normal or full, not 'fast'"),
    ("sqlite:///x.db?durabilty=full", "durabilty", "did you mean 'durability'?"),
    ("sqlite:///x.db?timeout=5", "timeout", "known: durability"),
    ("sqlite://", "path", "needs a path"),
    ("sqlite://host/x.db", "host", "has no host"),
    ("memory://?x=1", "x", "known: none"),
    ("postgresql://u:s3cr3t@h/db\n", "url", "printable"),
]


@pytest.mark.parametrize(("url", "parameter", "message"), BAD_URLS)
def test_bad_urls_are_store_url_errors_naming_the_part(url: str, parameter: str,
                                                       message: str) -> None:
    """Each raises StoreURLError (a TetherError and a ValueError) before anything is opened;
    the message says what is wrong and never shows the password."""
    with pytest.raises(StoreURLError) as caught:
        open_checkpointer(url)
    assert isinstance(caught.value, TetherError) and isinstance(caught.value, ValueError)
    assert caught.value.parameter == parameter
    assert message in str(caught.value)
    assert "s3cr3t" not in str(caught.value)


def test_good_urls_parse_to_their_parts() -> None:
    parsed = parse_store_url(f"postgres://me:{ENCODED}@db.internal:6543/app?schema=tether_1"
                             "&retry_seconds=2.5&connect_timeout=3&sslmode=prefer")
    assert (parsed.kind, parsed.schema, parsed.retry_seconds, parsed.connect_timeout) == (
        "postgresql", "tether_1", 2.5, 3)
    assert parsed.password == SECRET
    assert dict(parsed.url.query) == {"sslmode": "prefer"}
    assert str(parsed) == "postgresql+psycopg://me:***@db.internal:6543/app?sslmode=prefer"
    assert SECRET not in repr(parsed) and ENCODED not in repr(parsed)
    sqlite = parse_store_url("sqlite:////abs/t.db?durability=full")
    assert (sqlite.kind, sqlite.path, sqlite.durability) == ("sqlite", "/abs/t.db", "full")
    assert parse_store_url("postgresql:///db?host=/var/run/postgresql").kind == "postgresql"


def test_masking_helpers() -> None:
    assert mask_url("postgresql://u:pa ss@h/db") == "postgresql://u:***@h/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("not a url") == "not a url"
    assert redact(f"failed: {SECRET} and {ENCODED}", SECRET) == "failed: *** and ***"
    assert redact("ab", "a") == "ab"  # a one-letter password is masked only inside URLs


PUNCTUATED = ["pa#ss#S3cret", "p@ss#S3cret", "pa?ss/S3cret", "p@ss@S3cret", "pa%ss#S3cret",
              "a#b?c/d@S3cret"]


@pytest.mark.parametrize("password", PUNCTUATED)
def test_a_password_holding_url_punctuation_is_never_partly_printed(password: str) -> None:
    """Every store-URL error path, with a raw password holding # ? / @ %: the message (and
    the whole traceback) holds no part of it after its first character; an unreachable
    server's error neither."""
    secret = password[1:]
    urls = [f"postgresql://u:{password}@127.0.0.1:{port}/db{query}" for port, query in (
        ("99999", ""), ("5x", ""), ("1", "?retry_seconds=abc"), ("1", "?connect_timeout=0"),
        ("1", "?sslmod=require"), ("1", "?schema=1abc"), ("1", "?password=x"),
        ("1", "?schema=a&schema=b"))]
    urls += [f"postgress://u:{password}@h/db", f"u:{password}@h/db",
             f"postgresql:/u:{password}@h/db", f"sqlite://u:{password}@h/x.db",
             f"postgresql://u:{password}@h/db\n"]
    for url in urls:
        try:
            open_checkpointer(url)
        except TetherError as exc:
            printed = "".join(traceback.format_exception(exc))
            for cut in {secret, secret.split("#")[-1], secret.split("@")[-1],
                        secret.split("/")[-1], secret.split("?")[-1]}:
                assert cut not in printed, (url, printed)
        else:
            pytest.fail(f"{url} was accepted")
    unreachable = f"postgresql://u:{password}@127.0.0.1:1/db?retry_seconds=0&connect_timeout=1"
    try:
        open_checkpointer(unreachable)
    except TetherError as exc:
        printed = "".join(traceback.format_exception(exc))
        assert "S3cret" not in printed, printed


def test_mask_url_masks_up_to_the_last_at_sign() -> None:
    assert mask_url("postgresql://u:p@ss#S3cret@127.0.0.1/db") == \
        "postgresql://u:***@127.0.0.1/db"
    assert mask_url("u:pa#S3cret@h/db") == "u:***@h/db"
    assert mask_url("failed to resolve 'x@y'") == "failed to resolve 'x@y'"  # no user:


def test_a_real_driver_error_quoting_the_password_is_masked_through_its_chain() -> None:
    """libpq echoes a password with a space when it cannot parse the URI; after redaction
    neither the error nor its printed traceback shows it."""
    try:
        try:
            psycopg.connect(f"postgresql://u:{SECRET}@127.0.0.1:1/db", connect_timeout=1)
        except psycopg.Error as driver:
            assert "s3cr3t" in str(driver)  # the driver really does quote it
            raise StoreError(f"cannot connect: {driver}") from driver
    except StoreError as exc:
        redact_exception(exc, SECRET)
        printed = "".join(traceback.format_exception(exc))
    assert "s3cr3t" not in printed
    assert "***" in printed


# --------------------------------------------------------------------------- PostgreSQL


def _pg_url(server: str, password: str | None = None, **query: str) -> str:
    url = make_url(server)
    if password is not None:
        url = url.set(password=password)
    return url.update_query_dict(query).render_as_string(hide_password=False)


def _relations(server: str, name: str) -> list[str]:
    with psycopg.connect(server, autocommit=True) as connection:
        rows = connection.execute("SELECT relname FROM pg_class WHERE relname = %s",
                                  (name,)).fetchall()
    return [r[0] for r in rows]


def test_a_schema_that_is_not_an_identifier_never_reaches_the_server(
        pg_schema: tuple[str, str]) -> None:
    """The injection from the issue is refused, by the URL and by the constructor; the
    table it tries to create does not exist afterwards."""
    server, _ = pg_schema
    table = f"pwned_{uuid.uuid4().hex[:8]}"
    evil = f'x";COMMIT;CREATE TABLE {table}(i int);--'
    with pytest.raises(StoreURLError):
        open_checkpointer(_pg_url(server, schema=evil))
    with pytest.raises(StoreURLError):
        PostgresCheckpointer(server, schema=evil)
    assert _relations(server, table) == []


def test_schema_is_quoted_by_the_dialect(pg_schema: tuple[str, str]) -> None:
    """A valid schema name in mixed case is created and used exactly as written."""
    url, schema = pg_schema
    store = open_checkpointer(_pg_url(url, schema=schema))
    store.close()
    with psycopg.connect(url, autocommit=True) as connection:
        found = connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                   (schema,)).fetchone()
    assert found is not None


def test_a_password_with_a_space_connects_or_fails_without_showing_it(
        pg_schema: tuple[str, str]) -> None:
    """The hot connection gets the password as a keyword (not a URI libpq would echo):
    against the real server it works (trust auth) or fails without the password."""
    server, schema = pg_schema
    try:
        store = open_checkpointer(_pg_url(server, password=SECRET, schema=schema))
    except TetherError as exc:
        assert "s3cr3t" not in "".join(traceback.format_exception(exc))
    else:
        assert store.get_run("nope") is None
        assert "s3cr3t" not in repr(store)
        store.close()


def test_an_unreachable_server_error_never_shows_the_password() -> None:
    url = f"postgresql://tether:{ENCODED}@127.0.0.1:1/db?retry_seconds=0&connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        open_checkpointer(url)
    printed = "".join(traceback.format_exception(caught.value))
    assert "s3cr3t" not in printed and "unreachable" in str(caught.value)


def test_read_only_open_does_not_create_a_missing_schema(pg_schema: tuple[str, str]) -> None:
    server, schema = pg_schema
    with pytest.raises(StoreError, match=f"the database has no schema '{schema}'"):
        open_checkpointer(_pg_url(server, schema=schema), create=False)
    with psycopg.connect(server, autocommit=True) as connection:
        assert connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                  (schema,)).fetchone() is None


PLAIN_SQLITE_URLS = [
    "sqlite:///t.db", "sqlite:////abs/dir/t.db", "sqlite:///rel/a+b-c_d.v2.db",
    "sqlite:///t.db?durability=full", "sqlite:///t.db?busy_timeout=2.5&durability=normal",
    "sqlite:///t.db?durability=fast", "sqlite:///t.db?durabilty=full",
    "sqlite:///t.db?timeout=5", "sqlite:///t.db?busy_timeout=99999",
]


@pytest.mark.parametrize("text", PLAIN_SQLITE_URLS)
def test_a_plain_sqlite_url_reads_as_sqlalchemy_reads_it(text: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading without SQLAlchemy (issue 25, fast start) against the full one: the same
    parts, the same URL, the same error."""
    def outcome(parse: Callable[[], StoreURL]) -> object:
        try:
            found = parse()
        except StoreURLError as exc:
            return (exc.parameter, str(exc))
        return (found.kind, found.path, found.durability, found.busy_timeout, str(found),
                found.password, found.url)

    url = make_url(text)
    full = outcome(lambda: urls._sqlite(url, urls._options(url), text))
    monkeypatch.setattr(urls, "_make_url", None)  # (the fast reading never calls it)
    assert outcome(lambda: parse_store_url(text)) == full


@pytest.mark.parametrize("text", [
    "sqlite:///a%20b.db", "sqlite:///:memory:", "sqlite:///t.db?durability=full&durability=full",
    "sqlite:///t.db?busy_timeout=1+2", "sqlite://host/t.db", "sqlite:///t.db?",
])
def test_other_sqlite_urls_are_read_by_sqlalchemy(text: str) -> None:
    assert urls._plain_sqlite(text) is None
