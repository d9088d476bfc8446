"""Ids given by a unique prefix: the one resolution every command and route calls.

An execution id or a checkpoint id may be given in full or by a unique prefix of at least
:data:`MIN_PREFIX` characters (``0193b2c4-5d``). A checkpoint id may also be given by a
unique suffix of at least as many characters: checkpoint ids are UUIDv7, and those written
in the same few milliseconds share most of their leading characters but differ at the end,
which is why ``tether show`` prints their last twelve characters.

The rules, in order:

1. an exact id always wins (even a short one, and even if it is also a prefix of others);
2. text shorter than :data:`MIN_PREFIX` is a usage error (:class:`~tether.errors.IdTooShort`)
   when some id starts with it, else not found (``/runs/nope`` is a 404, not a 422);
3. one match: that id; none: :class:`~tether.errors.RunNotFound` or
   :class:`~tether.errors.CheckpointNotFound` naming the text;
4. several: :class:`~tether.errors.AmbiguousId` listing the first :data:`SHOWN` in id order
   and the total.

Each backend answers the lookup with an index range, never a pattern: ``id >= prefix AND
id < next(prefix)``, where ``next`` raises the last character by one code point. A prefix's
characters are compared as they are, so ``%``, ``_`` and ``\\`` in it match only themselves.
The range is exact under a binary collation (SQLite always; PostgreSQL with the ``C`` or
``C.UTF-8`` collation); every backend then re-checks each candidate with ``str.startswith``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tether.errors import AmbiguousId, CheckpointNotFound, IdTooShort, RunNotFound

if TYPE_CHECKING:
    from typing import Protocol

    from tether.stores.contracts import IdLookup, RunStore

    class _Ids(IdLookup, RunStore, Protocol):
        """What resolving an id reads: the id lookups and the run or checkpoint itself."""

MIN_PREFIX = 8
SHOWN = 10

_SURROGATES = range(0xD800, 0xE000)


class IdMatches(NamedTuple):
    """The ids a prefix matched: the first ones in id order and how many there are."""

    ids: tuple[str, ...]
    total: int


def upper_bound(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: there is
    none, the prefix ends with the last code point)."""
    last = ord(prefix[-1]) + 1
    if last in _SURROGATES:  # not encodable in UTF-8: step over them
        last = _SURROGATES.stop
    return prefix[:-1] + chr(last) if last <= 0x10FFFF else None


def _matches(found: list[str], limit: int, total: int | None = None) -> IdMatches:
    return IdMatches(tuple(found[:limit]), len(found) if total is None else total)


def select_matches(ids: list[str], text: str, limit: int, *,
                   suffix: bool = False) -> IdMatches:
    """The ids (in id order) that start with ``text`` (or, with ``suffix``, also end with
    it): the in-memory answer, and the re-check of the SQL candidates."""
    found = [i for i in ids if i.startswith(text) or (suffix and i.endswith(text))]
    return _matches(sorted(found), limit)


def resolve_execution_id(store: _Ids, text: str) -> str:
    """The execution id ``text`` names, in full or by a unique prefix (see the module
    docstring). Raises :class:`~tether.errors.RunNotFound`, :class:`IdTooShort` or
    :class:`AmbiguousId`."""
    if "\x00" in text or not text:
        raise RunNotFound(text)
    if store.get_run(text) is not None:
        return text
    found = store.execution_ids_with_prefix(text, SHOWN)
    if len(text) < MIN_PREFIX and found.total:
        raise IdTooShort("execution id", text, MIN_PREFIX)
    return _one(found, text, "execution id", RunNotFound(text))


def resolve_checkpoint_id(store: _Ids, execution_id: str, text: str) -> str:
    """The checkpoint id of run ``execution_id`` that ``text`` names, in full or by a unique
    prefix or suffix. Raises :class:`~tether.errors.CheckpointNotFound`, :class:`IdTooShort`
    or :class:`AmbiguousId`."""
    missing = CheckpointNotFound(execution_id, text)
    if "\x00" in text or not text:
        raise missing
    if store.has_checkpoint(execution_id, text):
        return text
    found = store.checkpoint_ids_matching(execution_id, text, SHOWN)
    if len(text) < MIN_PREFIX and found.total:
        raise IdTooShort("checkpoint id", text, MIN_PREFIX)
    return _one(found, text, "checkpoint id", missing, execution_id=execution_id)


def _one(found: IdMatches, text: str, what: str, missing: Exception, *,
         execution_id: str | None = None) -> str:
    if found.total == 0:
        raise missing
    if found.total > 1:
        raise AmbiguousId(what, text, found.ids, found.total, execution_id=execution_id)
    return found.ids[0]
