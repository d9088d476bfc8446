"""The store schema: SQLAlchemy Core tables shared by SQLite and PostgreSQL.

JSON payloads are stored as TEXT holding canonical JSON written by tether: both backends keep
the exact bytes (PostgreSQL's JSONB would reorder keys and re-encode numbers), the hot path
serialises once, and nothing queries inside them. Times are Unix seconds (float).
These tables describe the database as the newest migration leaves it; the statements are built
from them. The migrations that produce it are in ``migrations.py`` (an ordered list; a
migration's position, 1-based, is the schema version).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from tether.stores.migrations import MIGRATIONS, SCHEMA_VERSION
from tether.stores.records import CheckpointRow
from tether.stores.sql_text import DECISION_COLUMNS, PENDING_COLUMNS, RUN_COLUMNS

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("id", Integer, primary_key=True, comment="always 1: a single row"),
    Column("version", Integer, nullable=False, comment="number of migrations applied"),
)

plans = Table(
    "plans",
    metadata,
    Column("fingerprint", String(64), primary_key=True, comment="sha256 of the plan"),
    Column("plan", Text, nullable=False, comment="the plan's JSON, so runs resume without "
           "their source file"),
    Column("created_at", Float, nullable=False, comment="when first stored"),
    Column("tasks", Text, comment="the signatures of the tasks it calls, as the first "
           "submitter that imported them found them (JSON); not part of the fingerprint"),
)

runs = Table(
    "runs",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("workflow", Text, nullable=False, comment="the workflow's name"),
    Column("plan_fingerprint", String(64), nullable=False, comment="plans.fingerprint"),
    Column("status", String(16), nullable=False,
           comment="queued, running, paused, completed, failed or cancelled"),
    Column("inputs", Text, nullable=False, comment="the run's inputs (JSON), stored once"),
    Column("created_at", Float, nullable=False, comment="when the run started"),
    Column("updated_at", Float, nullable=False, comment="last status change"),
    Column("parent_execution_id", String(200), comment="the run a fork branched from"),
    Column("parent_checkpoint_id", String(64), comment="the checkpoint a fork branched from"),
    Column("error", Text, comment="the error of a failed run (JSON: type, message, node_id)"),
    Column("owner", Text, comment="the token of the attempt holding the lease "
           "(random@host/pid/start/boot/pidns: see owners.py); every write is fenced on it"),
    Column("lease_until", Float, comment="the owner's lease expires at this time"),
    Column("attempt", Integer, nullable=False, server_default="1",
           comment="1 for the first execution, +1 each time another attempt takes the run"),
    Column("queue", String(200), comment="the workers' queue serving the run; NULL for a run "
           "executed in place (tether run)"),
    Column("priority", Integer, nullable=False, server_default="0",
           comment="claim order within a queue: higher first, then older first"),
    Column("available_at", Float, comment="a queued run may start from this time"),
    Column("cancel_requested_at", Float, comment="when tether cancel asked to stop the run"),
    Column("started_at", Float, comment="when a worker first claimed the queued run (the "
           "queue's rate limit counts these)"),
    Column("blocked_reason", Text, comment="why a claimable run is not taken (no worker has "
           "its tasks, its recovery keeps failing); cleared when a worker claims it"),
    Column("recovery_failures", Integer, nullable=False, server_default="0",
           comment="drives of the run that failed for a reason other than fencing (backoff)"),
    Column("triggered_by", Text, comment="what started the run (JSON: kind, actor, a webhook's "
           "payload and allowed headers, a schedule's tick; see tether/trigger.py); NULL "
           "for runs stored before migration 9"),
    Column("concurrency_key", Text, comment="the workflow's concurrency key as rendered for "
           "the run; NULL: no key (see stores/keys.py)"),
    Column("concurrency_limit", Integer, comment="at most this many runs of the key run at "
           "once (the plan's concurrency.limit when the run was submitted)"),
    Index("runs_status_updated", "status", "updated_at"),
    Index("runs_started", "queue", "started_at"),
    Index("runs_concurrency", "concurrency_key", "status", "created_at", "execution_id"),
)
# the claim reads each kind of claimable run in claim order (migration 7)
Index("runs_claim_order", runs.c.queue, runs.c.status, runs.c.priority.desc(), runs.c.created_at,
      runs.c.execution_id)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("checkpoint_id", String(64), primary_key=True,
           comment="unique, time-ordered (UUIDv7): the order of writing"),
    Column("parent_checkpoint_id", String(64), comment="for fork_origin rows: the source"),
    Column("node_id", Text, nullable=False, comment="the re-entry address, or run_end"),
    Column("node_index", Integer, nullable=False, comment="position in the plan's order"),
    Column("step_type", String(16), nullable=False,
           comment="node, hitl_pause, llm_call, tool_call, handoff, fork_origin, run_end"),
    Column("status", String(16), nullable=False, comment="completed, interrupted or failed"),
    Column("base_id", String(64), nullable=False,
           comment="the full-snapshot row this row's delta chain starts from"),
    Column("is_full", Boolean, nullable=False, comment="state holds a full snapshot"),
    Column("state", Text, nullable=False,
           comment="full snapshot, or delta since the previous row ([[path, value], ...])"),
    Column("node_input", Text, comment="the step's rendered input (JSON)"),
    Column("node_output", Text, comment="the step's result, or error (JSON)"),
    Column("iteration_counters", Text, nullable=False, comment="loop counters (JSON)"),
    Column("interrupt_reason", Text, comment="what the human approves"),
    Column("interrupt_context", Text, comment="frozen context of the pause (JSON)"),
    Column("agent_path", Text, nullable=False, comment="where in a nested run"),
    Column("created_at", Float, nullable=False, comment="when written"),
    sqlite_with_rowid=False,  # rows clustered by (execution_id, checkpoint_id): one B-tree
)

pending_interrupts = Table(
    "pending_interrupts",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("checkpoint_id", String(64), primary_key=True,
           comment="the interrupted checkpoint this pause is waiting at"),
    Column("node_id", Text, nullable=False, comment="the unit that asked"),
    Column("agent_path", Text, nullable=False, comment="where in a nested run"),
    Column("reason", Text, nullable=False, comment="what is being approved"),
    Column("context", Text, nullable=False, comment="frozen context (JSON)"),
    Column("created_at", Float, nullable=False, comment="when the unit paused"),
    Column("due_at", Float, comment="a timer's due time (sleep, approval timeout), else null"),
    Index("pending_unit", "execution_id", "agent_path", "node_id", unique=True),
    Index("pending_created", "created_at"),
    Index("pending_due", "due_at"),
)

decisions = Table(
    "decisions",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("checkpoint_id", String(64), primary_key=True,
           comment="the interrupted checkpoint this answers: it releases that pause only"),
    Column("node_id", Text, nullable=False, comment="the unit that asked"),
    Column("agent_path", Text, nullable=False, comment="where in a nested run"),
    Column("value", Text, nullable=False, comment="the answer (JSON object)"),
    Column("resolver", Text, comment="who answered (the console's signed-in user)"),
    Column("comment", Text, comment="why, as the resolver wrote it"),
    Column("created_at", Float, nullable=False, comment="when the answer was claimed"),
)

idempotency_cache = Table(
    "idempotency_cache",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("key", String(64), primary_key=True, comment="sha256 of function and arguments"),
    Column("value", Text, nullable=False, comment="the cached result (JSON)"),
    Column("created_at", Float, nullable=False, comment="when cached"),
)

schedules = Table(
    "schedules",
    metadata,
    Column("name", String(200), primary_key=True, comment="the workflow's name"),
    Column("plan_fingerprint", String(64), nullable=False, comment="plans.fingerprint"),
    Column("cron", Text, nullable=False, comment="five cron fields"),
    Column("timezone", Text, nullable=False, comment="the IANA zone the cron is read in"),
    Column("inputs", Text, nullable=False, comment="the inputs of each run (JSON)"),
    Column("catchup", String(16), nullable=False, comment="none, latest or all"),
    Column("queue", Text, comment="the queue its runs are submitted to"),
    Column("created_at", Float, nullable=False, comment="when first registered"),
    Column("updated_at", Float, nullable=False, comment="last change"),
    Column("last_tick", Float, comment="the newest tick handled (moved by compare-and-set)"),
    Column("next_tick", Float, comment="the next tick after last_tick, for listing"),
)

workers = Table(
    "workers",
    metadata,
    Column("worker_id", String(200), primary_key=True, comment="the worker's own token"),
    Column("host", Text, nullable=False, comment="where it runs"),
    Column("pid", Integer, nullable=False, comment="its process id"),
    Column("queues", Text, nullable=False, comment="the queues it serves (JSON list)"),
    Column("concurrency", Integer, nullable=False, comment="runs it executes at once"),
    Column("started_at", Float, nullable=False, comment="when it registered"),
    Column("heartbeat_at", Float, nullable=False, comment="its last heartbeat"),
    Column("held", Text, nullable=False,
           comment="execution ids of the runs it held at its last heartbeat (JSON list)"),
)

queues = Table(
    "queues",
    metadata,
    Column("name", String(200), primary_key=True, comment="the queue"),
    Column("concurrency", Integer, comment="runs of the queue executing at once, fleet-wide"),
    Column("per_workflow", Integer, comment="of those, at most this many of one workflow"),
    Column("rate_limit", Float, comment="runs started per second, fleet-wide"),
    Column("start_timeout", Float, comment="seconds a run may wait queued before it is "
           "reported stuck"),
    Column("created_at", Float, nullable=False, comment="when the queue was configured"),
    Column("rate_window", Float, comment="the rate limit's window (seconds): at most "
           "rate_limit * rate_window runs start in any window of that length"),
)

run_events = Table(
    "run_events",
    metadata,
    Column("execution_id", String(200), primary_key=True, comment="the run"),
    Column("event_id", String(64), primary_key=True,
           comment="time-ordered (nanoseconds, then random): the order of the events"),
    Column("kind", String(32), nullable=False, comment="claimed, released, lease_lost, "
           "answered, cancel_requested or forked (stores/events.py)"),
    Column("created_at", Float, nullable=False, comment="when it happened"),
    Column("owner", Text, comment="the owner token of the attempt concerned, if any"),
    Column("actor", Text, comment="who did it (an answer's resolver), if known"),
    Column("channel", String(16), comment="an answer's channel: cli, console, link, api, timer"),
    Column("data", Text, nullable=False, comment="the kind's details (JSON object)"),
    sqlite_with_rowid=False,  # rows clustered by (execution_id, event_id): one B-tree
)

# the column orders the stores read rows by without this module (sql_text.py, records.py)
assert tuple(c.name for c in runs.columns) == RUN_COLUMNS
assert tuple(c.name for c in pending_interrupts.columns) == PENDING_COLUMNS
assert tuple(c.name for c in decisions.columns) == DECISION_COLUMNS
assert tuple(c.name for c in checkpoints.columns) == CheckpointRow._fields, \
    "CheckpointRow must follow the columns"

__all__ = [
    "MIGRATIONS", "SCHEMA_VERSION", "checkpoints", "decisions", "idempotency_cache",
    "metadata", "pending_interrupts", "plans", "queues", "run_events", "runs", "schedules",
    "schema_version", "workers",
]
