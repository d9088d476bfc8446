"""Identifiers: execution ids and time-ordered, unique checkpoint ids.

Execution ids may also be chosen by the caller (``--execution-id``); :func:`check_execution_id`
says which ones a new run may have: 1 to 200 characters of ASCII letters, digits and
``-_.:@+=``, not starting with ``.`` and without ``..``, so an id is data that can be put in a
URL, a file name or a command and never reads as a path.

Both are UUIDv7 strings (RFC 9562): 48 bits of Unix milliseconds, then random bits, so they
sort by creation time as text. Checkpoint ids are also strictly increasing within a process
(the generator never hands out an id lower than one it handed out, or than the newest id of
the run it resumes), which makes ``ORDER BY checkpoint_id`` the order of writing. The first id
of a millisecond takes fresh random bits; the next ones in the same millisecond count on from
it (RFC 9562's monotonic random, method 2), which spares a random draw per checkpoint. Ids are
formatted by hand (not through :class:`uuid.UUID`): one is minted per checkpoint, on the hot
path.
"""

from __future__ import annotations

import os
import re
import threading
from time import time_ns

from tether.errors import InvalidId

MAX_EXECUTION_ID_LENGTH = 200

_MASK_62 = (1 << 62) - 1
_MASK_64 = (1 << 64) - 1
_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)


def _format(value: int) -> str:
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _parse(text: str) -> int:
    return int(text.replace("-", ""), 16)


def _uuid7_int(ms: int, rand_a: int, rand_b: int) -> int:
    return (ms << 80) | _VERSION_AND_VARIANT | (rand_a << 64) | rand_b


class IdGenerator:
    """Monotonic UUIDv7 generator (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._random = b""
        self._offset = 0
        self._high = -1  # the upper 64 bits of the last id, and their text with its dashes
        self._high_text = ""

    def next(self, after: str | None = None) -> str:
        """A new id, greater than every id this generator returned and than ``after``."""
        with self._lock:
            floor = self._last
            if after is not None and after != self._last_text:
                floor = max(floor, _parse(after))
            ms = time_ns() // 1_000_000
            if ms <= floor >> 80:  # within the floor's millisecond: count on from it
                candidate = floor + 1 if floor & _MASK_62 != _MASK_62 else _bump(floor)
            else:
                start = self._offset
                if start + 10 > len(self._random):
                    self._random, start = os.urandom(4096), 0
                self._offset = start + 10
                rand = int.from_bytes(self._random[start:start + 10], "big")
                candidate = _uuid7_int(ms, (rand >> 62) & 0xFFF, rand & _MASK_62)
            self._last = candidate
            high = candidate >> 64  # the same within a millisecond: its text is kept
            if high != self._high:
                text = f"{high:016x}"
                self._high, self._high_text = high, f"{text[:8]}-{text[8:12]}-{text[12:]}-"
            low = f"{candidate & _MASK_64:016x}"
            self._last_text = f"{self._high_text}{low[:4]}-{low[4:]}"
            return self._last_text

    _last_text: str = ""

    def forget(self) -> None:
        """Start afresh (in a forked child: parent and child must not draw the same random
        bits, nor count on from the same id)."""
        self._lock = threading.Lock()
        self._last, self._last_text = 0, ""
        self._random, self._offset = b"", 0
        self._high, self._high_text = -1, ""


def _bump(value: int) -> int:
    """The next valid UUIDv7 after ``value``: increment the random part, carrying upward."""
    rand_b = (value & _MASK_62) + 1
    rand_a = (value >> 64) & 0xFFF
    ms = value >> 80
    if rand_b > _MASK_62:
        rand_b = 0
        rand_a += 1
        if rand_a > 0xFFF:
            rand_a = 0
            ms += 1
    return _uuid7_int(ms, rand_a, rand_b)


IDS = IdGenerator()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=IDS.forget)


def new_execution_id() -> str:
    """A fresh execution id."""
    return IDS.next()


def new_checkpoint_id(after: str | None = None) -> str:
    """A fresh checkpoint id, greater than ``after`` when given."""
    return IDS.next(after)


ID_CHARACTERS = "ASCII letters, digits and - _ . : @ + ="
"""The characters a chosen id may hold (the documented set: docs/stores.md)."""

_ID = re.compile(r"[A-Za-z0-9\-_.:@+=]+")


def check_execution_id(text: str, what: str = "an execution id") -> None:
    """Refuse an id that a new run may not have: it must be 1 to 200 characters out of
    :data:`ID_CHARACTERS`, not start with ``.`` and not hold ``..``.

    An id is data, never a path: ``/``, ``\\``, ``..``, whitespace, control characters and
    non-ASCII look-alikes (U+FF0F, U+2215) are refused, so an id can be put in a URL, a file
    name or a shell command and mean one thing. Checked on creation only (``run``, ``submit``,
    a fork's branch); ids stored before this rule stay readable (:func:`check_id`).

    Raises:
        InvalidId: naming the id and saying what is wrong.
    """
    check_id(text, what)
    bad = next((c for c in text if not _ID.fullmatch(c)), None)
    if bad is not None:
        raise InvalidId(text, what, f"may hold only {ID_CHARACTERS}; this one holds {bad!a} "
                        f"at position {text.index(bad) + 1}")
    if text.startswith("."):
        raise InvalidId(text, what, "may not start with '.'")
    if ".." in text:
        raise InvalidId(text, what, "may not hold '..'")


def check_id(text: str, what: str) -> None:
    """Refuse an id no run can have, when reading (``show``, ``resume``): empty, longer than
    200 characters, or holding a character that is not printable (control characters, NUL,
    line breaks, format characters, lone surrogates); ``what`` names it in the message.
    Ids stored before :func:`check_execution_id`'s character set pass."""
    if not text:
        raise InvalidId(text, what, "cannot be empty")
    if len(text) > MAX_EXECUTION_ID_LENGTH:
        raise InvalidId(text, what, f"is at most {MAX_EXECUTION_ID_LENGTH} characters; "
                        f"this one has {len(text):,}")
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise InvalidId(text, what, f"must be printable text; this one holds {bad!a} at "
                        f"position {text.index(bad) + 1}")
