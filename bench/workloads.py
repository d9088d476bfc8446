"""The tether side of the benchmark workloads (W1-W5). Each function returns seconds.

Plans are built directly as Plan objects (no compile cost in the measurement); tasks are
registered in a private mapping. Every store is a real one: a SQLite file in a temporary
directory, or a fresh schema on the PostgreSQL server named by TETHER_BENCH_POSTGRES_URL.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tether
from tether.compiler.plan import (
    ApprovalNode,
    Plan,
    PlanApproval,
    PlanInput,
    TaskNode,
    with_fingerprint,
)
from tether.stores.base import Checkpointer

PG_URL = os.environ.get("TETHER_BENCH_POSTGRES_URL",
                        os.environ.get("TETHER_TEST_POSTGRES_URL", ""))


async def noop() -> dict[str, int]:
    return {"ok": 1}


def noop_sync() -> dict[str, int]:
    return {"ok": 1}


async def make_blob() -> str:
    return "x" * 100_000


async def passthrough(v: Any = None) -> Any:
    return v


def echo(item: Any) -> Any:
    return item


TASKS: dict[str, Callable[..., Any]] = {"noop": noop, "noop_sync": noop_sync, "blob": make_blob,
                                        "pass": passthrough, "echo": echo}


def chain(n: int, *, blob_input: bool = False, blob_output: bool = False,
          sync: bool = False) -> Plan:
    """n trivial task nodes in a line (``sync``: `def` tasks, else `async def`); optionally a
    100 KB value that never changes."""
    nodes = []
    for i in range(n):
        task = "blob" if blob_output and i == 0 else "noop_sync" if sync else "noop"
        needs = (f"n{i - 1}",) if i else ()
        nodes.append(TaskNode(id=f"n{i}", index=i, task=task, needs=needs,
                              waits_for=needs, generation=i))
    inputs = (PlanInput(name="blob", type="string", required=True),) if blob_input else ()
    name = f"chain{n}-def" if sync else f"chain{n}"
    return with_fingerprint(Plan(name=name, nodes=tuple(nodes), inputs=inputs,
                                 generations=tuple((f"n{i}",) for i in range(n))))


def approval_plan() -> Plan:
    """W3: task, approval, task."""
    nodes = (
        TaskNode(id="a", index=0, task="noop"),
        ApprovalNode(id="review", index=1, needs=("a",), waits_for=("a",),
                 approval=PlanApproval(reason="approve", context={"k": 1}), generation=1),
        TaskNode(id="c", index=2, task="noop", needs=("review",),
                 waits_for=("review",), generation=2),
    )
    return with_fingerprint(Plan(name="approval3", nodes=nodes))


def fan_out(n: int, concurrency: int) -> Plan:
    """W5: one node producing n items, a for_each over them, one node after."""
    nodes = (
        TaskNode(id="items", index=0, task="pass",
                 args={"v": "{{ range(" + str(n) + ") | list }}"}),
        TaskNode(id="each", index=1, task="echo", needs=("items",),
                 waits_for=("items",), for_each="{{ nodes.items.output }}",
                 concurrency=concurrency, args={"item": "{{ item }}"}, generation=1),
        TaskNode(id="done", index=2, task="noop", needs=("each",),
                 waits_for=("each",), generation=2),
    )
    return with_fingerprint(Plan(name=f"fan{n}", nodes=nodes))


# -- stores -----------------------------------------------------------------------------------
def sqlite_store(directory: Path, durability: str = "normal") -> Checkpointer:
    from tether.stores.sqlite import SQLiteCheckpointer

    path = directory / f"bench-{durability}-{uuid.uuid4().hex[:8]}.db"
    return SQLiteCheckpointer(path, durability=durability)  # type: ignore[arg-type]


def postgres_store() -> tuple[Checkpointer, str] | None:
    if not PG_URL:
        return None
    from tether.stores.postgres import PostgresCheckpointer

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    return PostgresCheckpointer(PG_URL, schema=schema), schema


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- measurements -----------------------------------------------------------------------------
def run_once(plan: Plan, store: Checkpointer | None, inputs: dict[str, Any] | None = None,
             snapshot_every: int | None = None) -> tuple[float, str]:
    kwargs = {"snapshot_every": snapshot_every} if snapshot_every else {}
    runner = tether.Runner(plan, store, TASKS, **kwargs)
    start = time.perf_counter()
    result = runner.run(inputs or {})
    elapsed = time.perf_counter() - start
    assert result.status == "completed", result.error
    return elapsed, result.execution_id


def pause_resume(plan: Plan, store: Checkpointer) -> tuple[float, float]:
    runner = tether.Runner(plan, store, TASKS)
    start = time.perf_counter()
    paused = runner.run({})
    pause = time.perf_counter() - start
    assert paused.status == "paused"
    start = time.perf_counter()
    done = runner.resume(paused.execution_id, tether.Resume(ok=True))
    resume = time.perf_counter() - start
    assert done.status == "completed"
    return pause, resume


def runs_per_second(plan: Plan, store: Checkpointer, seconds: float = 2.0) -> float:
    runner = tether.Runner(plan, store, TASKS)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        assert runner.run({}).status == "completed"
        count += 1
    return count / (time.perf_counter() - start)


def stored_bytes(store: Checkpointer, execution_id: str) -> int:
    """Bytes of checkpoint payloads and run inputs stored for one run."""
    from sqlalchemy import func, select

    from tether.stores.schema import checkpoints, runs

    columns = [checkpoints.c.state, checkpoints.c.node_input, checkpoints.c.node_output,
               checkpoints.c.iteration_counters, checkpoints.c.interrupt_context]
    total = sum(func.coalesce(func.length(c), 0) for c in columns)
    with store.engine.connect() as connection:  # type: ignore[attr-defined]
        rows = connection.execute(select(func.sum(total)).where(
            checkpoints.c.execution_id == execution_id)).scalar() or 0
        inputs = connection.execute(select(func.length(runs.c.inputs)).where(
            runs.c.execution_id == execution_id)).scalar() or 0
    return int(rows) + int(inputs)


# -- floors -----------------------------------------------------------------------------------
def sqlite_floor(directory: Path, synchronous: str, count: int = 2000) -> float:
    """Median seconds of one small INSERT + COMMIT in WAL mode (raw sqlite3)."""
    connection = sqlite3.connect(directory / f"floor-{synchronous}-{uuid.uuid4().hex[:6]}.db",
                                 isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT)")
    times = []
    for i in range(count):
        start = time.perf_counter()
        connection.execute("INSERT INTO t VALUES (?, ?)", (f"{i:08d}", '{"ok":1}'))
        times.append(time.perf_counter() - start)
    connection.close()
    return statistics.median(times)


def postgres_floor(count: int = 1000) -> float | None:
    """Median seconds of one small INSERT (autocommit: one round trip and one commit)."""
    if not PG_URL:
        return None
    import psycopg

    schema = f"floor_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
        connection.execute(f'CREATE TABLE "{schema}".t (id text PRIMARY KEY, v text)')
        times = []
        for i in range(count):
            start = time.perf_counter()
            connection.execute(f'INSERT INTO "{schema}".t VALUES (%s, %s)',
                               (f"{i:08d}", '{"ok":1}'), prepare=True)
            times.append(time.perf_counter() - start)
        connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return statistics.median(times)


def fan_out_seconds(plan: Plan, store: Checkpointer | None) -> float:
    return run_once(plan, store)[0]
