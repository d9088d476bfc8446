"""How long a tether session may hold PostgreSQL locks it is not using, or wait for some.

A process stopped while its connection is *inside* a transaction (``SIGSTOP``, a frozen VM,
a debugger, a client partitioned away) keeps that transaction's locks: a claim's ``FOR
UPDATE`` on a limited queue's row, the ``FOR SHARE`` a fenced write takes on run rows, the
advisory lock of a concurrency key. Every claimer of that queue, every submission of that
key, then waits for it, and ``SKIP LOCKED`` claims skip its rows forever: the whole fleet
stalls on one frozen process. So every connection the PostgreSQL store opens (the engine's
pool, the hot connection, the pool of run creations) sets two session parameters in its
start-up packet (libpq ``options``):

- ``idle_in_transaction_session_timeout``: the server ends a session that sat idle inside a
  transaction this long, rolling it back and releasing its locks. tether's transactions
  last milliseconds, so the default is derived from the lease: a third of it (the renewal
  interval), at least 1 s, at most 60 s. A holder frozen inside a transaction therefore
  loses its locks no later than a third of a lease after it froze, before its lease (renewed
  every third) can expire and another worker needs to take its runs over.
- ``lock_timeout``: a statement waiting for a lock longer than this fails (the store reports
  it, names the lock wait and retries it like a lost connection) instead of waiting forever
  behind a holder that is not idle (another application's session, a long statement). By
  default the lease, at least twice the idle timeout (so a waiter outlasts a frozen tether
  holder being ended), at most 120 s. Schema set-up waits for another process's migration
  without it.

The lease is ``$TETHER_LEASE_SECONDS`` (default 30 s; ``tether worker --lease`` sets it for
its process). Both can be set per store URL: ``?idle_in_transaction_timeout=SECONDS`` and
``?lock_timeout=SECONDS`` (0: not set by tether, the server's or role's own setting
holds); a ``-c`` of either in the URL's own libpq ``options`` wins too. With both 0 and no
``options`` in the URL, no ``options`` parameter is sent at all: a connection pooler that
refuses start-up options (PgBouncer without ``ignore_startup_parameters = options``) then
works as before, and the timeouts can be set on the role instead (``ALTER ROLE ... SET``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tether.stores.lease_env import DEFAULT_LEASE_SECONDS, env_lease_seconds

__all__ = ["SessionTimeouts", "session_timeouts"]

IDLE_FLOOR, IDLE_CAP = 1.0, 60.0
LOCK_CAP = 120.0
IDLE_SETTING = "idle_in_transaction_session_timeout"
LOCK_SETTING = "lock_timeout"


@dataclass(frozen=True)
class SessionTimeouts:
    """The two session parameters, in seconds (0: not set; the server's own setting holds,
    by default no limit)."""

    idle_in_transaction: float
    lock: float

    def options(self, given: str = "") -> str:
        """libpq ``options`` setting both (in milliseconds) before ``given`` (the URL's own
        ``options``); a parameter ``given`` sets already is left to it."""
        mine = [f"-c {name}={round(seconds * 1000)}"
                for name, seconds in ((IDLE_SETTING, self.idle_in_transaction),
                                      (LOCK_SETTING, self.lock))
                if seconds > 0 and name not in given]
        return " ".join([*mine, given]).strip()


def session_timeouts(lease: float | None = None, *, idle: float | None = None,
                     lock: float | None = None) -> SessionTimeouts:
    """The timeouts for ``lease`` (default :func:`env_lease_seconds`); ``idle`` and
    ``lock`` given (a URL's options) win over the derived ones."""
    lease = (env_lease_seconds() or DEFAULT_LEASE_SECONDS) if lease is None else lease
    derived_idle = min(IDLE_CAP, max(IDLE_FLOOR, lease / 3))
    idle = derived_idle if idle is None else idle
    if lock is None:
        lock = min(LOCK_CAP, max(lease, 2 * idle))
    return SessionTimeouts(idle, lock)


def start_options(timeouts: SessionTimeouts, query: Mapping[str, object]) -> dict[str, str]:
    """libpq ``options`` with the session timeouts and the URL's own ``options``; nothing
    when neither sets anything (``pg_sessions.py``)."""
    given = query.get("options", "")
    options = timeouts.options(given if isinstance(given, str) else "")
    return {"options": options} if options else {}


def dead_peer_options(given: Mapping[str, object], seconds: int) -> dict[str, str]:
    """libpq options that bound how long a call can hang on a connection whose peer went
    silent (a partition: packets dropped, nothing reset): unacknowledged data or unanswered
    keepalives abort the connection after ``seconds`` (``tcp_user_timeout``; keepalives
    from ``seconds`` idle), so a lease renewal fails and the lease is lost by the local
    clock instead of the call waiting for the kernel's ~15 minutes of retransmissions.
    Options the URL sets itself win."""
    defaults = {"tcp_user_timeout": str(seconds * 1000), "keepalives": "1",
                "keepalives_idle": str(seconds), "keepalives_interval": str(max(1, seconds // 3))}
    return {key: value for key, value in defaults.items() if key not in given}
