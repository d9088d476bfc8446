"""Choosing a store from a URL: ``sqlite:///path``, ``postgresql+psycopg://...``, ``memory://``."""

from __future__ import annotations

from pathlib import Path

from tether.errors import TetherError
from tether.stores.base import Checkpointer

DEFAULT_URL = "sqlite:///.tether/tether.db"


def open_checkpointer(url: str | None = None) -> Checkpointer:
    """The checkpointer a URL names (default: ``sqlite:///.tether/tether.db``).

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (with
    ``?durability=full`` for fsync on every commit), ``postgresql://...`` /
    ``postgresql+psycopg://...`` (with ``?schema=name`` to use a schema and
    ``?retry_seconds=N`` for how long to wait out an unreachable server), ``memory://``.
    """
    url = url or DEFAULT_URL
    scheme, _, rest = url.partition("://")
    base, _, query = rest.partition("?")
    options = dict(part.partition("=")[::2] for part in query.split("&") if part)
    if scheme == "memory":
        from tether.stores.memory import InMemoryCheckpointer

        return InMemoryCheckpointer()
    if scheme == "sqlite":
        from tether.stores.sqlite import SQLiteCheckpointer

        path = base[1:] if base.startswith("/") else base
        if not path:
            raise TetherError(f"a SQLite URL needs a path: {url!r} (sqlite:///file.db)")
        durability = options.get("durability", "normal")
        if durability not in ("normal", "full"):
            raise TetherError(f"durability must be normal or full, not {durability!r}")
        return SQLiteCheckpointer(Path(path) if path != ":memory:" else path,
                                  durability=durability)  # type: ignore[arg-type]
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        from tether.stores.postgres import PostgresCheckpointer

        schema = options.pop("schema", None)
        retry = float(options.pop("retry_seconds", 15.0))
        remaining = "&".join(f"{k}={v}" for k, v in options.items())
        dsn = f"{scheme}://{base}" + (f"?{remaining}" if remaining else "")
        return PostgresCheckpointer(dsn, schema=schema, retry_seconds=retry)
    raise TetherError(f"unknown store URL {url!r}: use sqlite:///path, postgresql://..., "
                      "or memory://")
