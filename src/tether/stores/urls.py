"""Store URLs: parsed once, checked strictly, and never shown with their password.

``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``postgresql://user:pw@host/db``
(also ``postgres://`` and ``postgresql+psycopg://``) and ``memory://`` are parsed with
SQLAlchemy's :func:`~sqlalchemy.engine.make_url`; a plain SQLite URL (a path of letters,
digits and ``./_+-``, options of plain values) is read without it, as make_url reads it, so
that a command on a SQLite store need not import SQLAlchemy (issue 25, fast start). Every
query option is checked: tether's own (``durability``, ``busy_timeout``, ``schema``,
``retry_seconds``, ``connect_timeout``, ``idle_in_transaction_timeout``, ``lock_timeout``)
by value, the others against the connection parameters libpq knows. A URL that cannot be used raises
:class:`~tether.errors.StoreURLError` naming the part at fault, with the password masked as
``***``; so does every message the PostgreSQL store builds (see :func:`redact`).
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from tether.errors import StoreURLError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

Kind = Literal["sqlite", "postgresql", "memory"]

SCHEMES: dict[str, Kind] = {
    "sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql",
    "postgresql+psycopg": "postgresql", "memory": "memory",
}
SQLITE_OPTIONS = ("durability", "busy_timeout")
POSTGRES_OPTIONS = ("schema", "retry_seconds", "connect_timeout", "idle_in_transaction_timeout",
                    "lock_timeout")
DURABILITIES = ("normal", "full")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
MAX_RETRY_SECONDS = 3600.0
MAX_CONNECT_TIMEOUT = 3600
MAX_SESSION_TIMEOUT = 86400.0
MASK = "***"


@dataclass(frozen=True)
class StoreURL:
    """A checked store URL. ``str()`` and ``repr()`` show it with the password masked."""

    kind: Kind
    text: str = field(repr=False)
    """The URL as given, password included."""
    path: str = ""
    durability: Literal["normal", "full"] = "normal"
    busy_timeout: float = 30.0  # SQLite: how long a writer waits for another's write lock
    schema: str | None = None
    retry_seconds: float = 15.0
    connect_timeout: int = 10
    idle_in_transaction_timeout: float | None = None  # None: derived (stores/pg_sessions.py)
    lock_timeout: float | None = None
    parsed: URL | None = field(default=None, repr=False, compare=False)
    """SQLAlchemy's reading of the URL, as the store uses it (None: a plain SQLite URL, read
    by :attr:`url` when asked)."""

    @property
    def url(self) -> URL:
        """The URL as SQLAlchemy reads it (PostgreSQL: with psycopg's driver name and without
        tether's own options)."""
        if self.parsed is not None:
            return self.parsed
        from sqlalchemy.engine import make_url

        return make_url(self.text)

    def __str__(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"StoreURL({str(self)!r})"

    @property
    def password(self) -> str | None:
        return None if self.parsed is None else self.parsed.password


def mask_url(text: str) -> str:
    """``text`` with the password of a ``scheme://user:password@host`` URL replaced by ***.

    Works on text that is not a valid URL too (it is what error messages quote): everything
    between the user's ``:`` and the LAST ``@`` is masked, so a password holding ``@``, ``#``,
    ``?`` or ``/`` is never partly shown; a URL without its ``scheme://`` is masked alike."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    if "@" not in rest:
        return text
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{sep}{user}{colon}{MASK if colon else ''}@{host}"


def redact(text: str, password: str | None) -> str:
    """``text`` with ``password`` (as written, and percent-encoded) replaced by ***.

    Passwords of fewer than three characters are masked only inside URLs: replacing every
    occurrence of one letter would garble the message and hide nothing."""
    text = mask_url(text) if "://" in text else text
    if password and len(password) >= 3:
        for form in {password, quote(password, safe="")}:
            text = text.replace(form, MASK)
    return text


def check_identifier(name: str, what: str = "schema") -> str:
    """``name`` if it is a plain SQL identifier (``[A-Za-z_][A-Za-z0-9_]*``, at most 63
    characters, PostgreSQL's limit); else :class:`StoreURLError` naming ``what``."""
    if IDENTIFIER.fullmatch(name) is None:
        raise StoreURLError(
            f"{what} must be a plain identifier (letters, digits and _, not starting with a "
            f"digit, at most 63 characters), not {name!r}", parameter=what)
    return name


def parse_store_url(text: str | URL) -> StoreURL:
    """Parse and check a store URL; raise :class:`StoreURLError` (a usage error) if it is
    malformed, names an unknown scheme, or has an unknown or bad option."""
    if isinstance(text, str):
        plain = _plain_sqlite(text)
        if plain is not None:
            return plain
    url = _make_url(text) if isinstance(text, str) else text
    kind = SCHEMES.get(url.drivername)
    if kind is None:
        raise _unknown_scheme(url.drivername)
    options = _options(url)
    if kind == "memory":
        _no_options(options, ())
        return StoreURL("memory", _text(text), parsed=url)
    if kind == "sqlite":
        return _sqlite(url, options, _text(text))
    return _postgresql(url, options, _text(text))


_PLAIN_SQLITE = re.compile(r"sqlite:///([\w./+-]+)(\?[a-z_]+=[\w.-]+(?:&[a-z_]+=[\w.-]+)*)?",
                           re.ASCII)
_PLAIN_OPTION = re.compile(r"[?&]([a-z_]+)=([\w.-]+)", re.ASCII)


def _plain_sqlite(text: str) -> StoreURL | None:
    """A plain SQLite URL (``sqlite:///PATH?name=value&...``: nothing to unquote, no option
    twice), read and checked without SQLAlchemy (``test_store_urls.py`` compares); None for
    any other URL."""
    whole = _PLAIN_SQLITE.fullmatch(text)
    if whole is None:
        return None
    query = whole[2] or ""
    options = dict(_PLAIN_OPTION.findall(query))
    if len(options) != query.count("="):
        return None  # an option given twice: the full reading says so
    return _checked_sqlite(text, whole[1], options)


def _text(url: str | URL) -> str:
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


def _make_url(text: str) -> URL:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not text.isprintable():
        raise StoreURLError("a store URL must be printable text (no control characters or "
                            "undecodable bytes)", parameter="url")
    if "://" not in text:
        hint = f" (a SQLite file is written sqlite:///{text})" if text and mask_url(
            text) == text else " (write scheme://user:password@host/database)"
        raise StoreURLError(f"{mask_url(text)!r} is not a store URL{hint}", parameter="scheme")
    try:
        return make_url(text)
    except (ArgumentError, ValueError) as exc:
        detail = "the port must be a number" if "int()" in str(exc) else "it cannot be parsed"
        raise StoreURLError(f"bad store URL {mask_url(text)!r}: {detail}",
                            parameter="port" if "int()" in str(exc) else "url") from None


def _unknown_scheme(scheme: str) -> StoreURLError:
    close = difflib.get_close_matches(scheme.lower(), list(SCHEMES), n=1, cutoff=0.6)
    hint = f"; did you mean {SCHEMES[close[0]]}://?" if close else ""
    if scheme.startswith(("postgresql+", "postgres+")):
        hint = "; tether talks to PostgreSQL through psycopg 3: use postgresql://"
    return StoreURLError(f"unknown store URL scheme {scheme!r}{hint} "
                         "(use sqlite:///path, postgresql://... or memory://)",
                         parameter="scheme")


def _options(url: URL) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in url.query.items():
        if not isinstance(value, str):
            raise StoreURLError(f"the URL option {key!r} is given more than once",
                                parameter=key)
        options[key] = value
    return options


def _no_options(options: dict[str, str], known: tuple[str, ...],
                allowed: str | None = None) -> None:
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            allowed = allowed or ", ".join(known) or "none"
            raise StoreURLError(f"unknown URL option {key!r}{hint} (known: {allowed})",
                                parameter=key)


def _sqlite(url: URL, options: dict[str, str], text: str) -> StoreURL:
    if url.host or url.username or url.port:
        _no_options(options, SQLITE_OPTIONS)
        raise StoreURLError("a SQLite URL has no host: write sqlite:///relative/path.db or "
                            "sqlite:////absolute/path.db", parameter="host")
    return _checked_sqlite(text, url.database, options, url)


def _checked_sqlite(text: str, path: str | None, options: dict[str, str],
                    url: URL | None = None) -> StoreURL:
    _no_options(options, SQLITE_OPTIONS)
    if not path:
        raise StoreURLError("a SQLite URL needs a path: sqlite:///file.db", parameter="path")
    durability = options.get("durability", "normal")
    if durability not in DURABILITIES:
        raise StoreURLError(f"durability must be normal or full, not {durability!r}",
                            parameter="durability")
    busy = _number(options.get("busy_timeout", "30"), "busy_timeout", MAX_CONNECT_TIMEOUT)
    return StoreURL("sqlite", text, path=path, parsed=url,
                    durability="full" if durability == "full" else "normal", busy_timeout=busy)


def _postgresql(url: URL, options: dict[str, str], text: str) -> StoreURL:
    if "@" in (url.host or "") or "@" in (url.database or ""):
        # the password held a raw @: the parser split it there and the rest reads as the host,
        # which a driver's error ("failed to resolve host ...") would print
        raise StoreURLError("the URL's user part holds more than one '@': percent-encode "
                            "'@' in the password as %40 (and '#', '?', '/', '%' as %23, %3F, "
                            "%2F, %25), or use PGPASSWORD or ~/.pgpass", parameter="password")
    if "password" in options:
        raise StoreURLError("give the password in the URL's user part (postgresql://user:"
                            "password@host/db), PGPASSWORD or ~/.pgpass, not as ?password=",
                            parameter="password")
    _no_options(options, (*POSTGRES_OPTIONS, *libpq_options()),
                ", ".join(POSTGRES_OPTIONS) + " and libpq's connection parameters")
    if url.port is not None and not 0 < url.port < 65536:
        raise StoreURLError(f"the port must be between 1 and 65535, not {url.port}",
                            parameter="port")
    schema = options.get("schema")
    if schema is not None:
        check_identifier(schema)
    retry = _number(options.get("retry_seconds", "15"), "retry_seconds", MAX_RETRY_SECONDS)
    timeout = _number(options.get("connect_timeout", "10"), "connect_timeout",
                      MAX_CONNECT_TIMEOUT)
    if timeout != int(timeout) or timeout < 1:
        raise StoreURLError(f"connect_timeout must be a whole number of seconds from 1 to "
                            f"{MAX_CONNECT_TIMEOUT}", parameter="connect_timeout")
    idle, lock = (_number(options[name], name, MAX_SESSION_TIMEOUT) if name in options
                  else None for name in ("idle_in_transaction_timeout", "lock_timeout"))
    driver_url = url.set(drivername="postgresql+psycopg").difference_update_query(
        POSTGRES_OPTIONS)
    return StoreURL("postgresql", text, parsed=driver_url, schema=schema, retry_seconds=retry,
                    connect_timeout=int(timeout), idle_in_transaction_timeout=idle,
                    lock_timeout=lock)


def _number(text: str, name: str, limit: float) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= limit) or len(text) > 20:
        raise StoreURLError(f"{name} must be a number of seconds from 0 to {limit:g}, "
                            f"not {text[:40]!r}", parameter=name)
    return value


def libpq_options() -> tuple[str, ...]:
    """The connection parameters libpq accepts (``sslmode``, ``application_name``, ...)."""
    try:
        from psycopg import pq
    except ImportError:  # pragma: no cover - the store says psycopg is missing
        return ("sslmode", "application_name")
    names = (option.keyword.decode() for option in pq.Conninfo.get_defaults())
    return tuple(sorted(n for n in names if n != "password"))


def redact_exception(exc: BaseException, password: str | None) -> None:
    """Mask ``password`` in the messages of ``exc`` and of every exception chained to it
    (drivers may quote the connection string in theirs). A chained exception whose text
    still shows it after that (a custom ``__str__``) is cut from the chain."""
    if not password:
        return
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current.args = tuple(redact(a, password) if isinstance(a, str) else a
                             for a in current.args)
        current = current.__cause__ or current.__context__
    for parent, child in itertools.pairwise(chain):
        if _shows(child, password):
            parent.__cause__ = parent.__context__ = None
            parent.__suppress_context__ = True
            break


def _shows(exc: BaseException, password: str) -> bool:
    try:
        text = str(exc)
    except Exception:  # a broken __str__ shows nothing
        return False
    return redact(text, password) != text
