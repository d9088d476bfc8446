"""Identifiers: execution ids and time-ordered, unique checkpoint ids.

Both are UUIDv7 strings (RFC 9562): 48 bits of Unix milliseconds, then random bits, so they
sort by creation time as text. Checkpoint ids are also strictly increasing within a process
(the generator never hands out an id lower than one it handed out, or than the newest id of
the run it resumes), which makes ``ORDER BY checkpoint_id`` the order of writing.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_MASK_62 = (1 << 62) - 1


def _format(value: int) -> str:
    return str(uuid.UUID(int=value))


def _uuid7_int(ms: int, rand_a: int, rand_b: int) -> int:
    return (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b


class IdGenerator:
    """Monotonic UUIDv7 generator (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self, after: str | None = None) -> str:
        """A new id, greater than every id this generator returned and than ``after``."""
        with self._lock:
            floor = max(self._last, uuid.UUID(after).int if after else 0)
            ms = time.time_ns() // 1_000_000
            rand = int.from_bytes(os.urandom(10), "big")
            candidate = _uuid7_int(ms, (rand >> 62) & 0xFFF, rand & _MASK_62)
            if candidate <= floor:
                candidate = _bump(floor)
            self._last = candidate
            return _format(candidate)


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


def new_execution_id() -> str:
    """A fresh execution id."""
    return IDS.next()


def new_checkpoint_id(after: str | None = None) -> str:
    """A fresh checkpoint id, greater than ``after`` when given."""
    return IDS.next(after)
