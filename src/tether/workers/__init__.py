"""Workers: processes that share a store's runs (see ``docs/workers.md``).

``Worker`` is imported on first use: ``tether resume`` and ``tether run`` read only the lease
length here (``claims.py``), not the worker's loop and schedules (issue 25, fast start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.workers.claims import LEASE_ENV, lease_seconds

if TYPE_CHECKING:
    from tether.workers.loop import Worker

__all__ = ["LEASE_ENV", "Worker", "lease_seconds"]


def __getattr__(name: str) -> Any:
    if name == "Worker":
        from tether.workers.loop import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
