"""The lease length the environment sets, as the stores read it (``workers/claims.py`` reads
it for the runtime and checks it; stores do not import the workers)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_ENV", "env_lease_seconds"]

LEASE_ENV = "TETHER_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 30.0


def env_lease_seconds() -> float | None:
    """``$TETHER_LEASE_SECONDS``, else 30 s; None for a bad value (the CLI reports it)."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_LEASE_SECONDS
    except ValueError:
        return None
    return value if 0 < value <= 86400 else None
