"""W0: per-node total time of a 200-node chain, `def` and `async def` tasks, against the floor.

For each task style (`async def noop()` and `def noop_sync()`, both returning ``{"ok": 1}``)
and each store (none, SQLite WAL with synchronous=NORMAL, PostgreSQL when configured), the
median total time of one run divided by its 200 nodes, as a ratio to the floor: one INSERT +
COMMIT of a small row, raw driver (sqlite3 / psycopg, autocommit). The machine is shared, so
the floor is measured the same way as the runs and interleaved with them: every repetition
times 200 consecutive INSERT+COMMITs as one interval (a run and its floor see the same
preemption), then one run of every variant (the two task styles in alternating order, so
neither always follows the floors); each figure is the median over repetitions. The
per-statement median (each INSERT timed alone, which a busy machine rarely preempts) is
printed too.

The breakdown runs the `def` chain once more per repetition with timers wrapped around the
runtime's entry points (monkeypatched here, nothing in ``src/``): template rendering and
settings (``executors/task.py``'s ``render``/``seconds_setting``), checkpoint serialisation
(``Journal._row``: the delta JSON and the row; the id is minted just before it, so it counts
as scheduling), the store write (the store's ``put``) and the task body; scheduling is what is
left (the scheduler, the executor, the id, the JSON check of the output, events, asyncio).
"""

from __future__ import annotations

import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import workloads as w

NODES = 200
TARGETS = {"none": 2.5, "sqlite": 4.0, "postgres": 1.5}
"""Issue 9: per-node total with no store <= 2.5x the SQLite floor, with SQLite <= 4x it;
PostgreSQL within 1.5x its own floor."""


class SQLiteFloor:
    """Consecutive small INSERT+COMMITs on a WAL file (raw sqlite3, autocommit)."""

    def __init__(self, directory: Path) -> None:
        self.connection = sqlite3.connect(directory / f"floor-{uuid.uuid4().hex[:6]}.db",
                                          isolation_level=None)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("PRAGMA synchronous = NORMAL")
        self.connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT)")
        self.next = 0

    def batch(self, count: int = NODES) -> tuple[float, list[float]]:
        """Seconds per statement over ``count`` in a row, and each statement's seconds."""
        each = []
        execute = self.connection.execute
        start = time.perf_counter()
        for _ in range(count):
            self.next += 1
            one = time.perf_counter()
            execute("INSERT INTO t VALUES (?, ?)", (f"{self.next:08d}", '{"ok":1}'))
            each.append(time.perf_counter() - one)
        return (time.perf_counter() - start) / count, each


class PostgresFloor:
    """Consecutive small INSERTs in autocommit (one round trip and one commit each)."""

    def __init__(self) -> None:
        import psycopg

        self.connection = psycopg.connect(w.PG_URL, autocommit=True)
        self.schema = f"floor_{uuid.uuid4().hex[:8]}"
        self.connection.execute(f'CREATE SCHEMA "{self.schema}"')
        self.connection.execute(f'CREATE TABLE "{self.schema}".t (id text PRIMARY KEY, v text)')
        self.next = 0

    def batch(self, count: int = NODES) -> tuple[float, list[float]]:
        each = []
        sql = f'INSERT INTO "{self.schema}".t VALUES (%s, %s)'
        start = time.perf_counter()
        for _ in range(count):
            self.next += 1
            one = time.perf_counter()
            self.connection.execute(sql, (f"{self.next:08d}", '{"ok":1}'), prepare=True)
            each.append(time.perf_counter() - one)
        return (time.perf_counter() - start) / count, each

    def close(self) -> None:
        self.connection.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
        self.connection.close()


# -- the breakdown ----------------------------------------------------------------------------
class Timers:
    """Nanoseconds spent inside wrapped callables, by concern."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}

    def wrap(self, concern: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns[concern] = self.ns.get(concern, 0) + time.perf_counter_ns() - start
        return timed


@contextmanager
def instrumented(timers: Timers, store: Any) -> Iterator[None]:
    """Timers around rendering, serialisation, the store write and the task body."""
    from tether.runtime import journal
    from tether.runtime.executors import task

    saved = (task.render, task.seconds_setting, journal.Journal._row, w.TASKS["noop_sync"])
    task.render = timers.wrap("rendering", task.render)  # type: ignore[assignment]
    task.seconds_setting = timers.wrap("rendering", task.seconds_setting)  # type: ignore
    journal.Journal._row = timers.wrap("serialisation", journal.Journal._row)  # type: ignore
    w.TASKS["noop_sync"] = timers.wrap("task body", w.noop_sync)
    if store is not None:
        store.put = timers.wrap("store write", store.put)
    try:
        yield
    finally:
        task.render, task.seconds_setting, journal.Journal._row, w.TASKS["noop_sync"] = saved
        if store is not None:
            del store.put


def breakdown(plan: Any, store: Any) -> dict[str, float]:
    """Seconds per node by concern for one run of ``plan`` (the rest is scheduling)."""
    timers = Timers()
    with instrumented(timers, store):
        total, _ = w.run_once(plan, store)
    parts = {name: ns / 1e9 / NODES for name, ns in timers.ns.items()}
    parts["scheduling (the rest)"] = total / NODES - sum(parts.values())
    parts["total (instrumented)"] = total / NODES
    return parts


# -- the measurement --------------------------------------------------------------------------
def measure(tmp: Path, repeat: int, pg: Any) -> dict[str, Any]:
    """Interleaved medians of every variant and both floors (see the module docstring)."""
    plans = {"async": w.chain(NODES), "def": w.chain(NODES, sync=True)}
    stores: dict[str, Any] = {"none": None, "sqlite": w.sqlite_store(tmp, "normal")}
    if pg is not None:
        stores["postgres"] = pg
    floors: dict[str, Any] = {"sqlite": SQLiteFloor(tmp)}
    if pg is not None:
        floors["postgres"] = PostgresFloor()
    batches: dict[str, list[float]] = {name: [] for name in floors}
    singles: dict[str, list[float]] = {name: [] for name in floors}
    times: dict[str, list[float]] = {f"{style}/{name}": [] for style in plans
                                     for name in stores}
    parts: list[dict[str, float]] = []
    try:
        for plan in plans.values():  # warm-up: caches, connections, the thread pool
            for store in stores.values():
                w.run_once(plan, store)
        for floor in floors.values():
            floor.batch()
        for repetition in range(repeat):
            for name, floor in floors.items():
                per, each = floor.batch()
                batches[name].append(per)
                singles[name].extend(each)
            styles = list(plans.items())  # alternate which style follows the floors
            for style, plan in styles if repetition % 2 == 0 else reversed(styles):
                for name, store in stores.items():
                    times[f"{style}/{name}"].append(w.run_once(plan, store)[0] / NODES)
            parts.append(breakdown(plans["def"], stores["sqlite"]))
    finally:
        if "postgres" in floors:
            floors["postgres"].close()
    result: dict[str, Any] = {
        "floor": {name: statistics.median(v) for name, v in batches.items()},
        "floor_single": {name: statistics.median(v) for name, v in singles.items()},
        "per_node": {key: statistics.median(v) for key, v in times.items()},
        "breakdown_def_sqlite": {key: statistics.median(p.get(key, 0.0) for p in parts)
                                 for key in parts[0]},
    }
    result["ratio"] = {key: value / result["floor"][
        "postgres" if key.endswith("postgres") else "sqlite"]
        for key, value in result["per_node"].items()}
    return result


def report(r: dict[str, Any]) -> None:
    def us(seconds: float) -> str:
        return f"{seconds * 1e6:7.1f} µs"

    print(f"\nW0  {NODES}-node chain of trivial tasks: per-node total time / floor (median)")
    for name, floor in r["floor"].items():
        print(f"    floor {name:9} {us(floor)} per INSERT+COMMIT, 200 in a row "
              f"(one statement alone: {us(r['floor_single'][name])})")
    print(f"    {'':6} {'store':9} {'per node':>10} {'ratio':>7}  target")
    for key, value in r["per_node"].items():
        style, store = key.split("/")
        ratio, target = r["ratio"][key], TARGETS[store]
        print(f"    {style:6} {store:9} {us(value)} {ratio:6.2f}x  <= {target}x: "
              f"{'met' if ratio <= target else 'MISSED'}")
    print("    where a `def` node's time goes, SQLite (instrumented run, medians):")
    for key, value in r["breakdown_def_sqlite"].items():
        print(f"        {key:24} {us(value)}")
