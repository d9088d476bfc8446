"""The worker fleet's benchmark (issue 11, "Performance"): throughput, scaling, claim latency.

Run: .venv/bin/python bench/workers.py [--runs 1000] [--workers 1,2,4] [--concurrency 4]
     [--latency 50] [--no-async]          (part of `make bench`)
Needs PostgreSQL: TETHER_BENCH_POSTGRES_URL (or TETHER_TEST_POSTGRES_URL); skipped without.
Every measurement uses a fresh schema, dropped afterwards; every ratio comes from this run.

Throughput: ``--runs`` 10-node runs of plain ``def`` tasks are submitted (``Runner.submit``)
to a queue no worker serves; N ``tether worker`` processes are started on the served queue
and wait until all have registered; then one UPDATE moves the whole backlog into the served
queue (and NOTIFYs), so every worker starts from the same instant and process start-up is not
measured. Drain time: from that UPDATE to the last run's completion (``runs.updated_at``).
Node steps per second = runs x 10 / drain time.

Per-step overhead: one worker's drain time per node step, less the uncheckpointed cost of a
node (W1's baseline, measured here), against W1's PostgreSQL per-node checkpoint overhead
(the single-process 200-node chain of bench/run.py, measured here): target at most 1.5x.
Scaling: steps/s with 2 workers over 1 worker: target at least 1.6x (2 cores).

Claim latency: one idle worker (default poll of 1 s, so a fast start needs the NOTIFY
wake-up); ``--latency`` one-node runs are submitted one at a time, each after the previous
has completed and a pause; latency = the body's own time.time() at start minus time.time()
just before ``submit``: target median at most 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

import tether  # noqa: E402
from tether.compiler.plan import Plan, PlanInput, TaskNode, with_fingerprint  # noqa: E402

HOLD, SERVED = "bench-hold", "bench"


def chain(n: int, task: str) -> Plan:
    nodes = [TaskNode(id=f"n{i}", index=i, task=task, needs=(f"n{i - 1}",) if i else (),
                      waits_for=(f"n{i - 1}",) if i else (), generation=i) for i in range(n)]
    return with_fingerprint(Plan(name=f"wchain{n}_{task}", nodes=tuple(nodes),
                                 generations=tuple((f"n{i}",) for i in range(n))))


def stamp_plan() -> Plan:
    node = TaskNode(id="n0", index=0, task="bench_stamp", args={"rid": "{{ inputs.rid }}"})
    return with_fingerprint(Plan(name="wstamp", nodes=(node,),
                                 inputs=(PlanInput(name="rid", type="string", required=True),)))




def load() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


class Schema:
    """A fresh schema with tether's tables; a store on it; dropped by ``drop``."""

    def __init__(self) -> None:
        from tether.stores.postgres import PostgresCheckpointer

        self.name = f"bench_wk_{uuid.uuid4().hex[:10]}"
        self.store = PostgresCheckpointer(w.PG_URL, schema=self.name)
        sep = "&" if "?" in w.PG_URL else "?"
        self.url = f"{w.PG_URL}{sep}schema={self.name}"

    def connection(self) -> Any:
        import psycopg

        return psycopg.connect(w.PG_URL, autocommit=True)

    def sql(self, statement: str, *params: Any, connection: Any = None) -> list[tuple[Any, ...]]:
        if connection is None:
            with self.connection() as connection:
                return self.sql(statement, *params, connection=connection)
        cursor = connection.execute(statement.replace("%S", f'"{self.name}"'), params)
        return list(cursor.fetchall()) if cursor.description else []

    def drop(self) -> None:
        self.store.close()
        w.drop_schema(self.name)


class Fleet:
    """``tether worker`` subprocesses on one schema."""

    def __init__(self, schema: Schema, count: int, concurrency: int, workdir: Path,
                 env: dict[str, str], options: Sequence[str] = (),
                 one_cpu_each: bool = False) -> None:
        self.schema = schema
        path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "--db", schema.url, "--tasks",
             "worker_tasks", "--concurrency", str(concurrency), "--queue", SERVED,
             *options, *(["--cpu", str(cpu_of(i))] if one_cpu_each else [])],
            env={**os.environ, **env, "PYTHONPATH": path}, cwd=workdir,
            stdout=open(workdir / f"worker-{schema.name}-{i}.log", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT) for i in range(count)]
        deadline = time.monotonic() + 120
        while len(schema.store.list_workers()) < count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise SystemExit(f"workers did not register; see {workdir}")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def cpu_of(i: int) -> int:
    """The CPU worker process ``i`` is confined to with ``one_cpu_each``: the CPUs this
    process may use, in turn."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[i % len(cpus)]


def drain(count: int, runs: int, nodes: int, task: str, concurrency: int,
          workdir: Path, one_cpu_each: bool = False) -> dict[str, Any]:
    schema = Schema()
    try:
        runner = tether.Runner(chain(nodes, task), schema.store)
        for _ in range(runs):
            runner.submit({}, queue=HOLD)
        fleet = Fleet(schema, count, concurrency, workdir, {}, one_cpu_each=one_cpu_each)
        try:
            before = load()
            start = time.time()
            schema.sql(f"UPDATE %S.runs SET queue = '{SERVED}' WHERE queue = '{HOLD}'; "
                       f'NOTIFY "{schema.store.notify_channel}"')
            with schema.connection() as watch:  # one connection: a connect per poll
                while True:                      # forks a backend (ms of CPU each)
                    (done, failed), = schema.sql(
                        "SELECT count(*) FILTER (WHERE status = 'completed'), "
                        "count(*) FILTER (WHERE status IN ('failed', 'cancelled')) "
                        "FROM %S.runs", connection=watch)
                    if failed:
                        raise SystemExit(f"{failed} run(s) failed; see {workdir}")
                    if done == runs:
                        break
                    time.sleep(0.05)
            ends = [row[0] for row in schema.sql(
                "SELECT updated_at FROM %S.runs ORDER BY updated_at")]
        finally:
            fleet.stop()
        seconds = ends[-1] - start
        tenth, ninetieth = ends[len(ends) // 10], ends[len(ends) * 9 // 10]
        return {"workers": count, "task": task, "runs": runs, "nodes": nodes,
                "concurrency": concurrency, "seconds": seconds,
                "runs_per_second": runs / seconds, "steps_per_second": runs * nodes / seconds,
                "steady_steps_per_second":
                    (len(ends) * 8 // 10) * nodes / (ninetieth - tenth),
                "load_before": before, "load_after": load()}
    finally:
        schema.drop()


def latency(submits: int, gap: float, workdir: Path) -> dict[str, Any]:
    schema = Schema()
    stamps = workdir / f"stamps-{schema.name}.txt"
    try:
        fleet = Fleet(schema, 1, 4, workdir, {"TETHER_BENCH_STAMPS": str(stamps)})
        try:
            runner = tether.Runner(stamp_plan(), schema.store)
            submitted: dict[str, float] = {}
            seen = 0
            time.sleep(gap)
            for i in range(submits):
                rid = f"r{i}"
                submitted[rid] = time.time()
                runner.submit({"rid": rid}, queue=SERVED)
                deadline = time.monotonic() + 30
                while seen <= i:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"run {rid} did not start; see {workdir}")
                    time.sleep(0.002)
                    seen = len(stamps.read_text().splitlines()) if stamps.exists() else 0
                time.sleep(gap)  # the run completes and the worker is idle again
        finally:
            fleet.stop()
        started = dict(line.split() for line in stamps.read_text().splitlines())
        values = sorted(float(started[rid]) - at for rid, at in submitted.items())
        return {"submits": submits, "median": statistics.median(values),
                "p90": values[int(len(values) * 0.9)], "max": values[-1], "min": values[0]}
    finally:
        schema.drop()


def w1_postgres(repeat: int) -> dict[str, float]:
    from run import overhead

    made = w.postgres_store()
    assert made is not None
    store, schema = made
    try:
        result = overhead(w.chain(200), {"postgres": store}, repeat, 200)
    finally:
        store.close()
        w.drop_schema(schema)
    return {"baseline_per_node": result["baseline_per_node"],
            "per_node": result["postgres"]["per_node"],
            "overhead_per_node": result["postgres"]["overhead_per_node"]}


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(results: dict[str, Any]) -> None:
    w1 = results["W1_postgres"]
    print(f"\nWorkers on PostgreSQL (load average before {results['load_start']}, "
          f"after {results['load_end']}; {os.cpu_count()} cores)")
    print(f"    W1 PostgreSQL, one process: {w1['overhead_per_node'] * 1e6:,.1f} µs per node "
          f"overhead ({w1['per_node'] * 1e6:,.1f} µs per node, uncheckpointed "
          f"{w1['baseline_per_node'] * 1e6:,.1f} µs)")
    for row in results["drain"]:
        print(f"    {row['workers']} worker(s) x{row['concurrency']}, {row['task']:11} "
              f"{row['runs']:,} runs in {row['seconds']:.2f} s: "
              f"{row['steps_per_second']:,.0f} steps/s ({row['runs_per_second']:,.0f} runs/s; "
              f"steady 10-90%: {row['steady_steps_per_second']:,.0f} steps/s); load "
              f"{row['load_before'][0]:.1f} -> {row['load_after'][0]:.1f}")
    ratios = results["ratios"]
    if "per_step_overhead" in ratios:
        print(f"    per-step overhead, 1 worker: {ratios['per_step_overhead_us']:,.1f} µs = "
              f"{ratios['per_step_overhead']:.2f}x W1 PostgreSQL (target <= 1.5x: "
              f"{verdict(ratios['per_step_overhead'] <= 1.5)})")
    if "scaling_1_to_2" in ratios:
        print(f"    scaling 1 -> 2 workers: {ratios['scaling_1_to_2']:.2f}x (target >= 1.6x: "
              f"{verdict(ratios['scaling_1_to_2'] >= 1.6)})")
    if "scaling_1_to_4" in ratios:
        print(f"    scaling 1 -> 4 workers: {ratios['scaling_1_to_4']:.2f}x")
    lat = results.get("latency")
    if lat:
        print(f"    claim latency, submit -> body start, {lat['submits']} submits, idle worker: "
              f"median {lat['median'] * 1e3:.1f} ms, p90 {lat['p90'] * 1e3:.1f} ms, max "
              f"{lat['max'] * 1e3:.1f} ms (target median <= 50 ms: "
              f"{verdict(lat['median'] <= 0.05)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=int, default=50, help="submits (0: skip)")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between submits")
    parser.add_argument("--repeat", type=int, default=5, help="W1 repeats")
    parser.add_argument("--no-async", action="store_true", help="skip the async def runs")
    args = parser.parse_args()
    if not w.PG_URL:
        print("workers bench skipped: set TETHER_BENCH_POSTGRES_URL or TETHER_TEST_POSTGRES_URL")
        return
    counts = [int(v) for v in args.workers.split(",") if v.strip()]
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"),
                               "load_start": load(), "cpus": os.cpu_count()}
    results["W1_postgres"] = w1_postgres(args.repeat)
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        rows = [drain(n, args.runs, args.nodes, "bench_step", args.concurrency, workdir)
                for n in counts]
        if not args.no_async:
            rows.append(drain(counts[0], args.runs, args.nodes, "bench_astep",
                              args.concurrency, workdir))
        results["drain"] = rows
        if args.latency:
            results["latency"] = latency(args.latency, args.gap, workdir)
    results["load_end"] = load()
    by = {row["workers"]: row for row in rows if row["task"] == "bench_step"}
    ratios: dict[str, float] = {}
    w1 = results["W1_postgres"]
    if 1 in by:
        per_step = 1 / by[1]["steps_per_second"]
        ratios["per_step_us"] = per_step * 1e6
        ratios["per_step_overhead_us"] = (per_step - w1["baseline_per_node"]) * 1e6
        ratios["per_step_overhead"] = (per_step - w1["baseline_per_node"]) / \
            w1["overhead_per_node"]
        for n in (2, 4):
            if n in by:
                ratios[f"scaling_1_to_{n}"] = by[n]["steps_per_second"] / \
                    by[1]["steps_per_second"]
    results["ratios"] = ratios
    report(results)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "workers.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
