"""Schema migrations: an ordered list whose position is the version.

Each migration is written against the schema as it stood when it shipped, never against the
current tables in ``schema.py``: migration 1 creates the tables of the first release exactly
as they were (frozen below), and every later one changes what the one before left. A fresh
database runs them all in order, so it ends in the same shape as an upgraded one (the schema
tests compare both with ``schema.py``). Migrations run in one transaction under the store's
set-up lock (see ``SQLCheckpointer.setup``); raw DDL names tables through ``ctx.table`` so a
PostgreSQL schema (``?schema=``) is honoured.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

from tether.stores.sql_text import SCHEMA_VERSION as SQL_TEXT_SCHEMA_VERSION


@dataclass(frozen=True)
class MigrationContext:
    """What a migration works with: the connection (inside the set-up transaction), the
    dialect's name, and ``table(name)``, the quoted (schema-qualified) name for raw SQL."""

    connection: Connection
    dialect: str
    table: Callable[[str], str]
    can_drop_columns: bool = True

    def run(self, sql: str, **params: object) -> None:
        self.connection.execute(text(sql), params)


# -- version 1, as released (frozen: never edit) --------------------------------------------
_V1 = MetaData()
Table("plans", _V1,
      Column("fingerprint", String(64), primary_key=True),
      Column("plan", Text, nullable=False),
      Column("created_at", Float, nullable=False))
Table("runs", _V1,
      Column("execution_id", String(200), primary_key=True),
      Column("workflow", Text, nullable=False),
      Column("plan_fingerprint", String(64), nullable=False),
      Column("status", String(16), nullable=False),
      Column("inputs", Text, nullable=False),
      Column("created_at", Float, nullable=False),
      Column("updated_at", Float, nullable=False),
      Column("parent_execution_id", String(200)),
      Column("parent_checkpoint_id", String(64)),
      Column("error", Text),
      Column("owner", Text),
      Column("lease_until", Float),
      Column("decision", Text),
      Index("runs_status_updated", "status", "updated_at"))
Table("checkpoints", _V1,
      Column("execution_id", String(200), primary_key=True),
      Column("checkpoint_id", String(64), primary_key=True),
      Column("parent_checkpoint_id", String(64)),
      Column("node_id", Text, nullable=False),
      Column("node_index", Integer, nullable=False),
      Column("step_type", String(16), nullable=False),
      Column("status", String(16), nullable=False),
      Column("base_id", String(64), nullable=False),
      Column("is_full", Boolean, nullable=False),
      Column("state", Text, nullable=False),
      Column("node_input", Text),
      Column("node_output", Text),
      Column("iteration_counters", Text, nullable=False),
      Column("interrupt_reason", Text),
      Column("interrupt_context", Text),
      Column("agent_path", Text, nullable=False),
      Column("created_at", Float, nullable=False),
      sqlite_with_rowid=False)
Table("pending_interrupts", _V1,
      Column("execution_id", String(200), primary_key=True),
      Column("checkpoint_id", String(64), nullable=False),
      Column("node_id", Text, nullable=False),
      Column("agent_path", Text, nullable=False),
      Column("reason", Text, nullable=False),
      Column("context", Text, nullable=False),
      Column("created_at", Float, nullable=False))
Table("idempotency_cache", _V1,
      Column("execution_id", String(200), primary_key=True),
      Column("key", String(64), primary_key=True),
      Column("value", Text, nullable=False),
      Column("created_at", Float, nullable=False))
V1_METADATA = _V1


def _v1(ctx: MigrationContext) -> None:
    """Version 1: the tables of the first release."""
    _V1.create_all(ctx.connection, checkfirst=True)


# -- version 2: several pending interrupts per run, decisions, attempts ----------------------
_V2 = MetaData()
_PENDING_V2 = Table(
    "pending_interrupts_v2", _V2,
    Column("execution_id", String(200), primary_key=True),
    Column("checkpoint_id", String(64), primary_key=True),
    Column("node_id", Text, nullable=False),
    Column("agent_path", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("context", Text, nullable=False),
    Column("created_at", Float, nullable=False))
_DECISIONS_V2 = Table(
    "decisions", _V2,
    Column("execution_id", String(200), primary_key=True),
    Column("checkpoint_id", String(64), primary_key=True),
    Column("node_id", Text, nullable=False),
    Column("agent_path", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("resolver", Text),
    Column("comment", Text),
    Column("created_at", Float, nullable=False))


def _v2(ctx: MigrationContext) -> None:
    """Version 2: pending interrupts keyed by (run, interrupted checkpoint), one per unit;
    claimed answers in a ``decisions`` table (moved from ``runs.decision``); ``runs.attempt``."""
    _PENDING_V2.create(ctx.connection)
    pending, fresh = ctx.table("pending_interrupts"), ctx.table("pending_interrupts_v2")
    columns = "execution_id, checkpoint_id, node_id, agent_path, reason, context, created_at"
    ctx.run(f"INSERT INTO {fresh} ({columns}) SELECT {columns} FROM {pending}")
    ctx.run(f"DROP TABLE {pending}")
    ctx.run(f"ALTER TABLE {fresh} RENAME TO pending_interrupts")
    ctx.run(f"CREATE UNIQUE INDEX pending_unit ON {pending} "
            "(execution_id, agent_path, node_id)")
    ctx.run(f"CREATE INDEX pending_created ON {pending} (created_at)")
    _DECISIONS_V2.create(ctx.connection)
    _move_decisions(ctx)
    runs = ctx.table("runs")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1")
    if ctx.can_drop_columns:
        ctx.run(f"ALTER TABLE {runs} DROP COLUMN decision")


def _move_decisions(ctx: MigrationContext) -> None:
    """Copy each run's claimed, uncommitted answer (``runs.decision``) into ``decisions``."""
    claimed = ctx.connection.execute(text(
        f"SELECT execution_id, decision, updated_at FROM {ctx.table('runs')} "
        "WHERE decision IS NOT NULL")).all()
    for execution_id, decision, updated_at in claimed:
        try:
            parsed = json.loads(decision)
            checkpoint_id = str(parsed["checkpoint_id"])
        except (ValueError, TypeError, KeyError):
            continue
        asked = ctx.connection.execute(text(
            f"SELECT node_id, agent_path FROM {ctx.table('checkpoints')} "
            "WHERE execution_id = :eid AND checkpoint_id = :cid"),
            {"eid": execution_id, "cid": checkpoint_id}).first()
        if asked is None:
            continue
        ctx.connection.execute(_DECISIONS_V2.insert().values(
            execution_id=execution_id, checkpoint_id=checkpoint_id, node_id=asked[0],
            agent_path=asked[1], value=json.dumps(parsed.get("value") or {}),
            created_at=updated_at))


def _v3_timers(ctx: MigrationContext) -> None:
    """Durable timers: ``pending_interrupts.due_at`` (when a sleep fires or an approval times
    out; null for a pause only an answer ends), indexed for the workers' ``due_pending``."""
    pending = ctx.table("pending_interrupts")
    ctx.run(f"ALTER TABLE {pending} ADD COLUMN due_at FLOAT")
    ctx.run(f"CREATE INDEX pending_due ON {pending} (due_at)")


_SCHEDULES_V3 = Table(
    "schedules", MetaData(),
    Column("name", String(200), primary_key=True),
    Column("plan_fingerprint", String(64), nullable=False),
    Column("cron", Text, nullable=False),
    Column("timezone", Text, nullable=False),
    Column("inputs", Text, nullable=False),
    Column("catchup", String(16), nullable=False),
    Column("queue", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("last_tick", Float),
    Column("next_tick", Float))


def _v4_schedules(ctx: MigrationContext) -> None:
    """Schedules: one row per workflow name (``tether schedules add``); its plan lives in
    ``plans``. ``last_tick`` moves by compare-and-set, so each tick is handled once."""
    _SCHEDULES_V3.create(ctx.connection)


# -- version 5: queued runs, cancel requests, workers and queues -----------------------------
_V3 = MetaData()
_WORKERS_V3 = Table(
    "workers", _V3,
    Column("worker_id", String(200), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("queues", Text, nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("held", Text, nullable=False))
_QUEUES_V3 = Table(
    "queues", _V3,
    Column("name", String(200), primary_key=True),
    Column("concurrency", Integer),
    Column("per_workflow", Integer),
    Column("rate_limit", Float),
    Column("start_timeout", Float),
    Column("created_at", Float, nullable=False))


def _v5_workers(ctx: MigrationContext) -> None:
    """Version 5: ``runs.queue``, ``priority``, ``available_at``, ``cancel_requested_at`` (a
    claim index on them); the ``workers`` and ``queues`` tables."""
    runs = ctx.table("runs")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN queue VARCHAR(200)")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN available_at FLOAT")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN cancel_requested_at FLOAT")
    ctx.run(f"CREATE INDEX runs_claim ON {runs} (queue, status, priority)")
    _WORKERS_V3.create(ctx.connection)
    _QUEUES_V3.create(ctx.connection)


Migration = Callable[[MigrationContext], None]

def _v6_queue_limits(ctx: MigrationContext) -> None:
    """Version 6: queue limits enforced and stuck runs explained: ``runs.started_at`` (the
    first claim of a queued run: the rate limit counts these), ``runs.blocked_reason`` (why a
    claimable run is not taken: no worker with its tasks, a recovery that keeps failing),
    ``runs.recovery_failures`` (the backoff's count), an index on (queue, started_at), and
    ``queues.rate_window`` (the rate limit's window in seconds)."""
    runs = ctx.table("runs")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN started_at FLOAT")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN blocked_reason TEXT")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN recovery_failures INTEGER NOT NULL DEFAULT 0")
    ctx.run(f"CREATE INDEX runs_started ON {runs} (queue, started_at)")
    ctx.run(f"ALTER TABLE {ctx.table('queues')} ADD COLUMN rate_window FLOAT")


def _v7_claim_order(ctx: MigrationContext) -> None:
    """Version 7: the claim index in claim order, ``runs_claim_order`` on (queue, status,
    priority DESC, created_at, execution_id), replacing ``runs_claim`` (queue, status,
    priority): a claim reads the first runs of its queue in index order instead of sorting
    the whole backlog on every claim. Built in the migration's transaction (it blocks writes
    to ``runs`` while it builds: seconds for a million runs)."""
    runs = ctx.table("runs")
    ctx.run(f"DROP INDEX {ctx.table('runs_claim')}" if ctx.dialect == "postgresql"
            else "DROP INDEX runs_claim")
    ctx.run(f"CREATE INDEX runs_claim_order ON {runs} "
            "(queue, status, priority DESC, created_at, execution_id)")


_RUN_EVENTS_V8 = Table(
    "run_events", MetaData(),
    Column("execution_id", String(200), primary_key=True),
    Column("event_id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("owner", Text),
    Column("actor", Text),
    Column("channel", String(16)),
    Column("data", Text, nullable=False),
    sqlite_with_rowid=False)


def _v8_run_events(ctx: MigrationContext) -> None:
    """Version 8: ``run_events``, what happened to a run besides its checkpoints (claims,
    releases, lost leases, answers with their channel, cancel requests, forks), for the run's
    history. Only creates a table: older runs simply have no events."""
    _RUN_EVENTS_V8.create(ctx.connection)


def _v9_run_triggers(ctx: MigrationContext) -> None:
    """Version 9: ``runs.triggered_by``, what started each run (JSON: kind, actor, a
    webhook's payload and headers, a schedule's tick), read by its templates as
    ``trigger.*``. Older runs keep NULL (they read as kind ``unknown``)."""
    ctx.run(f"ALTER TABLE {ctx.table('runs')} ADD COLUMN triggered_by TEXT")


def _v10_plan_tasks(ctx: MigrationContext) -> None:
    """Version 10: ``plans.tasks``, the signatures of the tasks a plan calls, recorded by the
    first submitter that could import them (issue 24: a worker whose task no longer fits
    them leaves the plan's runs queued). Older plans have none: only their call templates
    are checked."""
    ctx.run(f"ALTER TABLE {ctx.table('plans')} ADD COLUMN tasks TEXT")


def _v11_concurrency_keys(ctx: MigrationContext) -> None:
    """Version 11: concurrency keys: ``runs.concurrency_key`` (the rendered key) and
    ``runs.concurrency_limit``, and the index ``runs_concurrency`` on (concurrency_key,
    status, created_at, execution_id), which reads a key's window in the claim. Older runs
    have no key."""
    runs = ctx.table("runs")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN concurrency_key TEXT")
    ctx.run(f"ALTER TABLE {runs} ADD COLUMN concurrency_limit INTEGER")
    ctx.run(f"CREATE INDEX runs_concurrency ON {runs} "
            "(concurrency_key, status, created_at, execution_id)")


MIGRATIONS: list[Migration] = [_v1, _v2, _v3_timers, _v4_schedules, _v5_workers,
                               _v6_queue_limits, _v7_claim_order, _v8_run_events,
                               _v9_run_triggers, _v10_plan_tasks, _v11_concurrency_keys]

SCHEMA_VERSION = len(MIGRATIONS)
if SCHEMA_VERSION != SQL_TEXT_SCHEMA_VERSION:  # the SQLAlchemy-free submit reads that one
    raise AssertionError(f"{len(MIGRATIONS)} migrations, but sql_text.SCHEMA_VERSION is "
                         f"{SQL_TEXT_SCHEMA_VERSION}: update it")
