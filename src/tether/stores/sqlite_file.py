"""Opening a SQLite database file: made private when created, WAL, a busy timeout.

Shared by the SQLAlchemy store (``sqlite.py``) and the SQLAlchemy-free submit of ``tether
submit`` (``sqlite_submit.py``), so both open the file alike. Imports only the standard
library.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Literal

from tether.errors import StoreError

__all__ = ["Durability", "connect", "existing", "identity", "is_locked", "locked_error",
           "locked_error_of", "make_private"]

Durability = Literal["normal", "full"]


def make_private(path: str) -> None:
    """Create the database file ``0600`` and its missing directories ``0700`` (exactly: the
    umask does not loosen them); leave whatever exists as it is."""
    target = Path(path).absolute()
    for directory in reversed([d for d in target.parents if not d.exists()]):
        with contextlib.suppress(FileExistsError):  # another process made it just now
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)
    try:
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.fchmod(descriptor, 0o600)
    os.close(descriptor)


def existing(path: str) -> str:
    """A URI that opens ``path`` read-write without creating it (``mode=rw``)."""
    if not Path(path).is_file():
        raise StoreError(f"no database at {path} (nothing was created; check --db or "
                         "TETHER_DB)")
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=rw"


def identity(path: str) -> tuple[int, int] | None:
    """The (device, inode) of the file at ``path``; None for ``:memory:`` or no file."""
    if path == ":memory:":
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (-1, -1)
    return (found.st_dev, found.st_ino)


def connect(path: str, timeout: float, durability: Durability,
             create: bool = True) -> sqlite3.Connection:
    if path == ":memory:" or create:
        connection = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                     check_same_thread=False)
    else:
        connection = sqlite3.connect(existing(path), timeout=timeout, isolation_level=None,
                                     check_same_thread=False, uri=True)
    connection.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            break
        except sqlite3.OperationalError as exc:  # another process is switching it right now
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    connection.execute(f"PRAGMA synchronous = {durability.upper()}")
    return connection


def is_locked(exc: BaseException) -> bool:
    """SQLite's "database is locked": another process held the write lock for the whole
    busy timeout."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def locked_error(what: str, path: str | os.PathLike[str], timeout: float) -> StoreError:
    """The error for a write lock held past the busy timeout, naming the file and the likely
    holder (SQLite itself says only "database is locked")."""
    return StoreError(
        f"{what}: the SQLite database {path} stayed locked for its busy timeout "
        f"({timeout:g} s): another process holds its write lock inside a transaction (a "
        "tether process stopped with SIGSTOP or in a debugger holds it until it continues or "
        "exits; reading still works). SQLite serves one machine; a fleet of workers needs "
        "PostgreSQL")


def locked_error_of(what: str, connection: sqlite3.Connection) -> StoreError:
    """:func:`locked_error` for an open ``connection``: its main file and its busy timeout."""
    path = next((str(row[2]) for row in connection.execute("PRAGMA database_list")
                 if row[1] == "main"), "")
    timeout_ms = connection.execute("PRAGMA busy_timeout").fetchone()[0]
    return locked_error(what, path, int(timeout_ms) / 1000)
