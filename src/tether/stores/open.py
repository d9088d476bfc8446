"""Choosing a store from a URL: ``sqlite:///path``, ``postgresql+psycopg://...``, ``memory://``."""

from __future__ import annotations

from tether.stores.base import Checkpointer
from tether.stores.urls import parse_store_url

DEFAULT_URL = "sqlite:///.tether/tether.db"


def open_checkpointer(url: str | None = None, *, create: bool = True) -> Checkpointer:
    """The checkpointer a URL names (default: ``sqlite:///.tether/tether.db``).

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (with
    ``?durability=full`` for fsync on every commit, ``?busy_timeout=N`` for how long a
    writer waits for another process's write lock, default 30), ``postgresql://...`` /
    ``postgresql+psycopg://...`` (with ``?schema=name`` to use a schema,
    ``?retry_seconds=N`` for how long to wait out an unreachable server,
    ``?connect_timeout=N``, ``?idle_in_transaction_timeout=N`` and ``?lock_timeout=N``
    (see ``pg_sessions.py``), and any libpq connection parameter), ``memory://``.

    With ``create=False`` nothing is created: a SQLite file (or a PostgreSQL schema) that does
    not exist is a :class:`~tether.errors.StoreError` naming it. A URL that cannot be used
    raises :class:`~tether.errors.StoreURLError` (a ``ValueError``) before anything is opened.
    """
    parsed = parse_store_url(url or DEFAULT_URL)
    if parsed.kind == "memory":
        from tether.stores.memory import InMemoryCheckpointer

        return InMemoryCheckpointer()
    if parsed.kind == "sqlite":
        from tether.stores.sqlite import SQLiteCheckpointer

        return SQLiteCheckpointer(parsed.path, durability=parsed.durability, create=create,
                                  timeout=parsed.busy_timeout)
    from tether.stores.pg_sessions import session_timeouts
    from tether.stores.postgres import PostgresCheckpointer

    return PostgresCheckpointer(parsed.url, schema=parsed.schema, create=create,
                                retry_seconds=parsed.retry_seconds,
                                connect_timeout=parsed.connect_timeout,
                                timeouts=session_timeouts(
                                    idle=parsed.idle_in_transaction_timeout,
                                    lock=parsed.lock_timeout))
