"""Peer workloads, run inside the peers' virtual environment by bench/peers.py.

Prints one JSON object: per-node checkpoint overhead of a 200-node linear chain (W1) for
LangGraph (SqliteSaver, PostgresSaver) and DBOS (SQLite, PostgreSQL), bytes stored by
LangGraph with an unchanged 100 KB value in the state (W2), and LangGraph SqliteSaver's
10-node runs per second (W4). A peer that cannot be set up is reported with the reason.
Usage: python peer_workloads.py --repeat N [--postgres URL] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any


def median_of(function: Any, repeat: int) -> float:
    return statistics.median(function() for _ in range(repeat))


# -- LangGraph --------------------------------------------------------------------------------
def langgraph_chain(n: int, checkpointer: Any = None) -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        count: int
        blob: str

    graph = StateGraph(State)
    for i in range(n):
        graph.add_node(f"n{i}", lambda state: {"count": state.get("count", 0) + 1})
    graph.add_edge(START, "n0")
    for i in range(n - 1):
        graph.add_edge(f"n{i}", f"n{i + 1}")
    graph.add_edge(f"n{n - 1}", END)
    return graph.compile(checkpointer=checkpointer)


def langgraph_timing(n: int, checkpointer: Any, repeat: int,
                     state: dict[str, Any]) -> dict[str, float]:
    plain = langgraph_chain(n)
    durable = langgraph_chain(n, checkpointer)
    config = {"recursion_limit": n + 10}

    def without() -> float:
        start = time.perf_counter()
        plain.invoke(dict(state), config)
        return time.perf_counter() - start

    def with_store() -> float:
        run = {**config, "configurable": {"thread_id": uuid.uuid4().hex}}
        start = time.perf_counter()
        durable.invoke(dict(state), run)
        return time.perf_counter() - start

    without(), with_store()
    pairs = [(without(), with_store()) for _ in range(repeat)]
    base = statistics.median(p[0] for p in pairs)
    timed = statistics.median(p[1] for p in pairs)
    return w1_figures(timed, base, n)


def w1_figures(timed: float, base: float, n: int) -> dict[str, float]:
    """W1 per node: the total with the store, without it, and the difference (overhead)."""
    return {"w1_overhead_per_node": (timed - base) / n, "w1_total_per_node": timed / n,
            "w1_baseline_per_node": base / n}


def langgraph_sqlite(workdir: Path, repeat: int) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = workdir / "langgraph.db"
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    saver = SqliteSaver(connection)
    saver.setup()
    result: dict[str, Any] = langgraph_timing(200, saver, repeat, {"count": 0})
    before = _sqlite_bytes(connection)
    blob = langgraph_chain(200, saver)
    blob.invoke({"count": 0, "blob": "x" * 100_000},
                {"recursion_limit": 210, "configurable": {"thread_id": "blob"}})
    result["w2_bytes"] = _sqlite_bytes(connection) - before
    small = langgraph_chain(10, saver)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < 2.0:
        small.invoke({"count": 0}, {"configurable": {"thread_id": uuid.uuid4().hex}})
        count += 1
    result["w4_runs_per_second"] = count / (time.perf_counter() - start)
    return result


def _sqlite_bytes(connection: sqlite3.Connection) -> int:
    total = 0
    for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        columns = [r[1] for r in connection.execute(f"PRAGMA table_info({table})")]
        expression = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
        total += connection.execute(f"SELECT coalesce(sum({expression}), 0) FROM {table}"
                                    ).fetchone()[0]
    return int(total)


def langgraph_postgres(url: str, repeat: int) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    with Connection.connect(url, autocommit=True, prepare_threshold=0,
                            row_factory=dict_row) as connection:
        saver = PostgresSaver(connection)
        saver.setup()
        return langgraph_timing(200, saver, repeat, {"count": 0})


# -- DBOS -------------------------------------------------------------------------------------
def dbos_timing(database_url: str, repeat: int, workdir: Path) -> dict[str, Any]:
    os.chdir(workdir)
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {"name": "bench", "system_database_url": database_url}
    DBOS(config=config)

    @DBOS.step()
    def step(value: int) -> int:
        return value + 1

    def plain_step(value: int) -> int:
        return value + 1

    @DBOS.workflow()
    def chain(n: int) -> int:
        value = 0
        for _ in range(n):
            value = step(value)
        return value

    DBOS.launch()
    try:
        def without() -> float:
            start = time.perf_counter()
            value = 0
            for _ in range(200):
                value = plain_step(value)
            return time.perf_counter() - start

        def with_store() -> float:
            start = time.perf_counter()
            chain(200)
            return time.perf_counter() - start

        with_store()
        base = median_of(without, repeat)
        timed = median_of(with_store, repeat)
        return w1_figures(timed, base, 200)
    finally:
        DBOS.destroy()


# -- DBOS queues (the workers' workload of bench/workers.py) ---------------------------------
DBOS_HOLD, DBOS_SERVED = "bench_hold", "bench"


def _dbos_define(url: str, schema: str, concurrency: int, nodes: int) -> Any:
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {"name": "benchq", "system_database_url": url,
                          "dbos_system_schema": schema}
    DBOS(config=config)

    @DBOS.step(name="wstep")
    def step() -> dict[str, int]:
        return {"ok": 1}

    @DBOS.workflow(name="wchain")
    def chain() -> int:
        for _ in range(nodes):
            step()
        return nodes

    return chain


def dbos_worker(url: str, schema: str, concurrency: int, nodes: int, cpu: int) -> None:
    """One DBOS worker process: serves the queue until its standard input closes; with
    ``cpu`` >= 0, its threads confined to that CPU first (as ``tether worker --cpu``)."""
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})  # before DBOS starts a thread: they inherit it
    from dbos import DBOS

    _dbos_define(url, schema, concurrency, nodes)
    DBOS.listen_queues([DBOS_SERVED])
    DBOS.launch()
    # DBOS's queues are polled (default every 1 s); 10 ms gives it the best throughput,
    # with the same per-process concurrency as tether's workers.
    DBOS.register_queue(DBOS_SERVED, worker_concurrency=concurrency,
                        polling_interval_sec=0.01)
    print("ready", flush=True)
    sys.stdin.read()
    DBOS.destroy()


def dbos_queue(url: str, runs: int, nodes: int, counts: list[int], concurrency: int,
               workdir: Path, one_cpu_each: bool = False) -> dict[str, Any]:
    """``runs`` workflows of ``nodes`` steps enqueued on a queue nobody serves; N worker
    processes start and report ready; one UPDATE moves the backlog into the served queue
    (as bench/workers.py does for tether); drain time = that UPDATE to the last
    workflow's completion (``updated_at``)."""
    import subprocess

    import psycopg
    from dbos import DBOSClient

    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    base = plain.split("?", 1)[0]
    result: dict[str, Any] = {"runs": runs, "nodes": nodes, "concurrency": concurrency}
    for count in counts:
        schema = f"dbosq_{uuid.uuid4().hex[:8]}"
        procs: list[Any] = []
        try:
            cpus = sorted(os.sched_getaffinity(0))
            first = subprocess.Popen(
                [sys.executable, __file__, "--dbos-worker", url, "--schema", schema,
                 "--concurrency", str(concurrency), "--nodes", str(nodes),
                 "--cpu", str(cpus[0] if one_cpu_each else -1)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=workdir, text=True)
            procs.append(first)
            assert first.stdout is not None and first.stdout.readline().strip() == "ready"
            client = DBOSClient(system_database_url=url, dbos_system_schema=schema)
            for _ in range(runs):
                client.enqueue({"queue_name": DBOS_HOLD, "workflow_name": "wchain"})
            client.destroy()
            for i in range(1, count):
                proc = subprocess.Popen(
                    [sys.executable, __file__, "--dbos-worker", url, "--schema", schema,
                     "--concurrency", str(concurrency), "--nodes", str(nodes),
                     "--cpu", str(cpus[i % len(cpus)] if one_cpu_each else -1)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=workdir, text=True)
                procs.append(proc)
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            with psycopg.connect(base, autocommit=True) as connection:
                start = time.time()
                connection.execute(f"UPDATE {schema}.workflow_status SET queue_name = %s "
                                   "WHERE queue_name = %s", (DBOS_SERVED, DBOS_HOLD))
                while True:
                    done, failed = connection.execute(
                        f"SELECT count(*) FILTER (WHERE status = 'SUCCESS'), count(*) FILTER "
                        f"(WHERE status IN ('ERROR', 'CANCELLED')) FROM {schema}.workflow_status"
                    ).fetchone()
                    if failed:
                        raise RuntimeError(f"{failed} DBOS workflow(s) failed")
                    if done == runs:
                        break
                    time.sleep(0.05)
                end = connection.execute(
                    f"SELECT max(updated_at) FROM {schema}.workflow_status").fetchone()[0]
            seconds = end / 1000 - start
            result[f"workers_{count}"] = {"seconds": seconds,
                                          "steps_per_second": runs * nodes / seconds}
        finally:
            for proc in procs:
                proc.communicate(timeout=60)
            with psycopg.connect(base, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return result


def guarded(name: str, function: Any, *args: Any) -> dict[str, Any]:
    try:
        return function(*args)
    except Exception as exc:  # report and go on: one peer failing must not hide the others
        traceback.print_exc(file=sys.stderr)
        return {"skipped": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", default="")
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--only", default="")
    parser.add_argument("--queue-runs", type=int, default=0)
    parser.add_argument("--queue-workers", default="1,2")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--dbos-worker", default="")
    parser.add_argument("--schema", default="")
    parser.add_argument("--cpu", type=int, default=-1)
    parser.add_argument("--one-cpu-each", action="store_true")
    args = parser.parse_args()
    if args.dbos_worker:
        dbos_worker(args.dbos_worker, args.schema, args.concurrency, args.nodes, args.cpu)
        return
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    timings = args.only != "queue"  # --only queue: the queue drains alone (bench/peers.py)
    if timings:
        results["langgraph_sqlite"] = guarded("langgraph_sqlite", langgraph_sqlite, workdir,
                                              args.repeat)
    if args.postgres and timings:
        results["langgraph_postgres"] = guarded("langgraph_postgres", langgraph_postgres,
                                                args.postgres, args.repeat)
    if timings:
        results["dbos_sqlite"] = guarded("dbos_sqlite", dbos_timing,
                                         f"sqlite:///{workdir / 'dbos.sqlite'}", args.repeat,
                                         workdir)
    if args.postgres:
        pg = args.postgres.replace("postgresql://", "postgresql+psycopg://", 1) \
            if args.postgres.startswith("postgresql://") else args.postgres
        if timings:
            results["dbos_postgres"] = guarded("dbos_postgres", dbos_timing, pg,
                                               args.repeat, workdir)
        if args.queue_runs:
            counts = [int(v) for v in args.queue_workers.split(",") if v.strip()]
            results["dbos_queue"] = guarded("dbos_queue", dbos_queue, pg, args.queue_runs,
                                            args.nodes, counts, args.concurrency, workdir,
                                            args.one_cpu_each)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
