"""Run ownership: who executes a run now, and whether that owner is still alive.

An owner is ``host:pid:start`` where ``start`` is the process start time (from /proc when
available), so a recycled pid never passes for the original process. A lease is free when it
has no owner, has expired, is already ours, or belongs to an owner on this host whose process
is gone (a crashed worker is replaced at once, without waiting for the lease to run out).
Owners on other hosts are only replaced when their lease expires.
"""

from __future__ import annotations

import functools
import os
import socket


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else None  # stat field 22: start time


@functools.lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


def current_owner() -> str:
    """This process's owner identity."""
    pid = os.getpid()
    return f"{_host()}:{pid}:{_start_ticks(pid) or '0'}"


def owner_is_dead(owner: str) -> bool:
    """Whether ``owner`` is a process on this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != _host() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return start != (_start_ticks(pid) or "0")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    fields = _stat(pid)
    if fields is None:
        return False
    if fields[0] in ("Z", "X"):  # killed, not yet reaped
        return True
    return start not in ("0", fields[19])


def lease_free(holder: str | None, until: float | None, owner: str, now: float,
               steal_from: str | None) -> bool:
    """Whether ``owner`` may take a lease held by ``holder`` until ``until``."""
    return (
        holder is None
        or holder == owner
        or (until is not None and until < now)
        or (steal_from is not None and holder == steal_from)
    )
