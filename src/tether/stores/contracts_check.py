"""A check for mypy only: every backend implements every store protocol, signatures included.

``isinstance`` against a ``runtime_checkable`` protocol sees only that the methods exist;
these assignments make ``mypy --strict`` (which checks ``src/tether``) compare each backend's
method signatures with its protocols'. Nothing here runs: importing the module does nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer
    from tether.stores.contracts import (
        EventStore,
        IdempotencyStore,
        IdLookup,
        QueueStore,
        RunStore,
        ScheduleStore,
    )
    from tether.stores.memory import InMemoryCheckpointer
    from tether.stores.postgres import PostgresCheckpointer
    from tether.stores.sqlite import SQLiteCheckpointer

    def _implements_all(store: Checkpointer) -> None:
        _run: RunStore = store
        _queue: QueueStore = store
        _schedule: ScheduleStore = store
        _idempotency: IdempotencyStore = store
        _events: EventStore = store
        _ids: IdLookup = store

    def _backends(memory: InMemoryCheckpointer, sqlite: SQLiteCheckpointer,
                  postgres: PostgresCheckpointer) -> None:
        for store in (memory, sqlite, postgres):
            _run: RunStore = store
            _queue: QueueStore = store
            _schedule: ScheduleStore = store
            _idempotency: IdempotencyStore = store
            _events: EventStore = store
            _ids: IdLookup = store
