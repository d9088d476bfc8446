"""Run ownership: a fresh token per attempt, and when a holder is provably dead.

Every attempt to execute a run (``run``, ``resume``, ``fork``, a worker's claim) writes a new
owner token with its lease. The token is random, so two attempts never share an identity, not
even two threads of one process; it also names the process that holds it::

    <32 hex random>@<host>/<pid>/<start ticks>/<boot id>/<pid namespace>

so operators can see who holds a run, and so a crashed holder on this very machine can be
replaced before its lease runs out. That shortcut is taken only when the holder is *provably*
dead: same boot (``/proc/sys/kernel/random/boot_id``), same PID namespace (two containers
with one hostname share the boot id, not the namespace), and its pid is gone, is a zombie, or
belongs to a process with another start time (a recycled pid). Anything less certain waits for
the lease to expire: an owner on another host, in another container, or one we cannot inspect.
"""

from __future__ import annotations

import functools
import os
import secrets
import socket
from dataclasses import dataclass

_UNKNOWN = "-"


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip() or _UNKNOWN
    except OSError:
        return _UNKNOWN


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> str:
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else _UNKNOWN  # stat field 22


def _pid_namespace() -> str:
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return _UNKNOWN
    return link.partition("[")[2].rstrip("]") or _UNKNOWN


@functools.lru_cache(maxsize=1)
def _machine() -> tuple[str, str, str]:
    """(host, boot id, pid namespace) of this process: fixed for its lifetime."""
    host = socket.gethostname().replace("@", "_").replace("/", "_") or _UNKNOWN
    return host, _read("/proc/sys/kernel/random/boot_id"), _pid_namespace()


@functools.lru_cache(maxsize=8)
def _process(pid: int) -> str:
    return _start_ticks(pid)


@dataclass(frozen=True)
class Owner:
    """A parsed owner token."""

    token: str
    host: str
    pid: int
    start: str
    boot_id: str
    pid_namespace: str

    def describe(self) -> str:
        """``pid 4242 on host web-1``: who holds a run, for messages."""
        return f"pid {self.pid} on host {self.host}"


def new_owner() -> str:
    """A fresh owner token for one attempt, naming this process."""
    return f"{secrets.token_hex(16)}{owner_suffix()}"


def owner_suffix() -> str:
    """What follows the random part of this process's owner tokens: ``@host/pid/...``
    (a claim statement makes each token's random part itself)."""
    return _suffix(os.getpid())


@functools.lru_cache(maxsize=8)
def _suffix(pid: int) -> str:
    host, boot, namespace = _machine()
    return f"@{host}/{pid}/{_process(pid)}/{boot}/{namespace}"


def parse_owner(text: str | None) -> Owner | None:
    """The parts of an owner token, or None for anything else (tokens of older releases)."""
    if not text:
        return None
    token, at, rest = text.partition("@")
    parts = rest.split("/")
    if not at or len(parts) != 5 or not parts[1].isdigit():
        return None
    host, pid, start, boot, namespace = parts
    return Owner(token, host, int(pid), start, boot, namespace)


def describe_owner(text: str | None) -> str:
    """A readable name for the holder of a lease."""
    owner = parse_owner(text)
    if owner is not None:
        return owner.describe()
    return repr(text) if text else "nobody"


def provably_dead(text: str | None) -> bool:
    """Whether the process holding ``text`` certainly no longer exists.

    True only for a holder on this boot and in this PID namespace whose pid is gone, is a
    zombie, or now belongs to a process started at another time. A live process, even this
    one, is never dead: other attempts in it hold tokens of their own.
    """
    owner = parse_owner(text)
    if owner is None:
        return False
    _, boot, namespace = _machine()
    if _UNKNOWN in (boot, namespace) or (owner.boot_id, owner.pid_namespace) != (boot,
                                                                                namespace):
        return False
    if owner.pid == os.getpid():
        return owner.start != _process(owner.pid)
    fields = _stat(owner.pid)
    if fields is None:
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    if fields[0] in ("Z", "X"):  # killed, not yet reaped
        return True
    return owner.start not in (_UNKNOWN, fields[19])


def lease_free(holder: str | None, until: float | None, owner: str, now: float,
               steal_from: str | None) -> bool:
    """Whether the attempt ``owner`` may take a lease held by ``holder`` until ``until``."""
    return (
        holder is None
        or holder == owner
        or (until is not None and until < now)
        or (steal_from is not None and holder == steal_from)
    )
