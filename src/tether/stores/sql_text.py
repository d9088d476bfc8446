"""What the SQL stores and the SQLAlchemy-free writes on SQLite share: a run's column values,
the JSON text of JSON columns, the schema version, and the SQL text of the few statements
``tether submit`` and ``tether resume --enqueue --value`` run on SQLite.

``tether submit`` on a SQLite file whose schema is current inserts its run with the standard
library's ``sqlite3`` (``sqlite_submit.py``), without importing SQLAlchemy (issue 25, fast
start); ``tether resume --enqueue --value`` records its answer so (``sqlite_answer.py``).
The statements' text is the one SQLAlchemy compiles for the SQLite store
(``tests/stores/test_sqlite_submit.py`` and ``test_sqlite_answer.py`` compile them and
compare), and the values are :func:`run_values`, which the SQL stores use too: one
definition of each row.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.stores.run_record import RunRecord

__all__ = ["DECISION_COLUMNS", "EVENT_COLUMNS", "PENDING_COLUMNS", "PLAN_COLUMNS",
           "RUN_COLUMNS", "SCHEMA_VERSION", "SQLITE_ANSWER", "SQLITE_INSERT_PLAN",
           "SQLITE_INSERT_RUN", "SQLITE_RUN_KIND", "SQLITE_SCHEMA_VERSION", "WORKER_COLUMNS",
           "from_json", "run_values", "to_json"]

SCHEMA_VERSION = 11
"""The number of migrations of this release (``len(MIGRATIONS)``; ``migrations.py`` refuses
to import when they differ: a new migration updates this number too)."""

RUN_COLUMNS = (
    "execution_id", "workflow", "plan_fingerprint", "status", "inputs", "created_at",
    "updated_at", "parent_execution_id", "parent_checkpoint_id", "error", "owner",
    "lease_until", "attempt", "queue", "priority", "available_at", "cancel_requested_at",
    "started_at", "blocked_reason", "recovery_failures", "triggered_by", "concurrency_key",
    "concurrency_limit",
)
"""The columns of ``runs``, in the table's order (``schema.py``)."""

PLAN_COLUMNS = ("fingerprint", "plan", "created_at", "tasks")
"""The columns of ``plans``, in the table's order."""

SQLITE_SCHEMA_VERSION = "SELECT schema_version.version \nFROM schema_version"
SQLITE_INSERT_PLAN = (
    'INSERT INTO plans (fingerprint, "plan", created_at, tasks) VALUES (?, ?, ?, ?) '
    "ON CONFLICT DO NOTHING")
SQLITE_INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
    f"({', '.join('?' for _ in RUN_COLUMNS)}) ON CONFLICT DO NOTHING RETURNING execution_id")
SQLITE_RUN_KIND = ("SELECT runs.workflow, runs.status \nFROM runs \n"
                   "WHERE runs.execution_id = ?")
"""The workflow and status of the run an execution id names (a dedup key already taken)."""

# ``tether resume --enqueue --value`` (``sqlite_answer.py``): each is the text the SQLite
# store compiles for the statement of the same name (``SQLITE_ANSWER``'s keys), whose
# parameters are named in the tuple beside it.
_RUN_SELECT = ", ".join(f"runs.{c}" for c in RUN_COLUMNS)
PENDING_COLUMNS = ("execution_id", "checkpoint_id", "node_id", "agent_path", "reason",
                   "context", "created_at", "due_at")
"""The columns of ``pending_interrupts``, in the table's order."""
_PENDING_SELECT = ", ".join(f"pending_interrupts.{c}" for c in PENDING_COLUMNS)
WORKER_COLUMNS = ("worker_id", "host", "pid", "queues", "concurrency", "started_at",
                  "heartbeat_at", "held")
"""The columns of ``workers``, in the table's order."""
DECISION_COLUMNS = ("execution_id", "checkpoint_id", "node_id", "agent_path", "value",
                    "resolver", "comment", "created_at")
EVENT_COLUMNS = ("execution_id", "event_id", "kind", "created_at", "owner", "actor",
                 "channel", "data")
SQLITE_ANSWER: dict[str, tuple[str, tuple[str, ...]]] = {
    "get_run": (f"SELECT {_RUN_SELECT} \nFROM runs \nWHERE runs.execution_id = ?", ("eid",)),
    "runs_prefix_True": (
        "SELECT runs.execution_id \nFROM runs \nWHERE runs.execution_id >= ? AND "
        "runs.execution_id < ? ORDER BY runs.execution_id\n LIMIT ? OFFSET ?",
        ("low", "high", "limit", "param_1")),
    "get_plan": ('SELECT plans."plan" \nFROM plans \nWHERE plans.fingerprint = ?', ("fp",)),
    "list_pending_of": (
        f"SELECT {_PENDING_SELECT} \nFROM pending_interrupts \nWHERE "
        "pending_interrupts.execution_id = ? ORDER BY pending_interrupts.created_at, "
        "pending_interrupts.execution_id, pending_interrupts.checkpoint_id", ("eid",)),
    "lock_run": ("SELECT runs.execution_id \nFROM runs \nWHERE runs.execution_id = ?",
                 ("eid",)),
    "claim": (
        "DELETE FROM pending_interrupts WHERE pending_interrupts.execution_id = ? AND "
        f"pending_interrupts.checkpoint_id = ? RETURNING {', '.join(PENDING_COLUMNS)}",
        ("eid", "cid")),
    "insert_decision": (
        f"INSERT INTO decisions ({', '.join(DECISION_COLUMNS)}) VALUES "
        f"({', '.join('?' for _ in DECISION_COLUMNS)})", DECISION_COLUMNS),
    "insert_event": (
        f"INSERT INTO run_events ({', '.join(EVENT_COLUMNS)}) VALUES "
        f"({', '.join('?' for _ in EVENT_COLUMNS)})", EVENT_COLUMNS),
    "enqueue_run": (
        "UPDATE runs SET status=CASE WHEN (runs.status = ?) THEN ? ELSE runs.status END, "
        "queue=?, priority=?, available_at=? WHERE runs.execution_id = ?",
        ("status_1", "param_1", "queue", "priority", "at", "eid")),
    "list_workers": (
        f"SELECT {', '.join(f'workers.{c}' for c in WORKER_COLUMNS)} \nFROM workers \n"
        "WHERE workers.heartbeat_at >= ? ORDER BY workers.started_at, workers.worker_id",
        ("since",)),
}
"""Name -> (SQL text, parameter names in order) of the statements an answer on SQLite runs
(the names are the SQLite store's, ``tests/stores/test_sqlite_answer.py`` compares)."""


def to_json(value: Any) -> str | None:
    """The text a JSON-holding TEXT column stores (see ``schema.py``): compact, non-ASCII as is."""
    return None if value is None else json.dumps(value, ensure_ascii=False,
                                                  separators=(",", ":"))


def from_json(text: str | None) -> Any:
    """The value a JSON-holding TEXT column stores, parsed (None stays None)."""
    return None if text is None else json.loads(text)


def run_values(run: RunRecord) -> dict[str, Any]:
    """The column values of ``run``'s row in ``runs``, by column name."""
    return {
        "execution_id": run.execution_id, "workflow": run.workflow,
        "plan_fingerprint": run.plan_fingerprint, "status": run.status,
        "inputs": to_json(run.inputs) or "null", "created_at": run.created_at.timestamp(),
        "updated_at": run.updated_at.timestamp(),
        "parent_execution_id": run.parent_execution_id,
        "parent_checkpoint_id": run.parent_checkpoint_id, "error": to_json(run.error),
        "owner": run.owner, "lease_until": run.lease_until, "attempt": run.attempt,
        "queue": run.queue, "priority": run.priority, "available_at": run.available_at,
        "cancel_requested_at": run.cancel_requested_at, "started_at": run.started_at,
        "blocked_reason": run.blocked_reason, "recovery_failures": run.recovery_failures,
        "triggered_by": to_json(run.trigger.as_dict()) if run.trigger else None,
        "concurrency_key": run.concurrency_key, "concurrency_limit": run.concurrency_limit,
    }
