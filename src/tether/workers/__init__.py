"""Workers: processes that share a store's runs (see ``docs/workers.md``)."""

from __future__ import annotations

from tether.workers.claims import LEASE_ENV, lease_seconds
from tether.workers.loop import Worker

__all__ = ["LEASE_ENV", "Worker", "lease_seconds"]
