"""Where a worker drain's time goes: CPU per node step of each worker process and of
PostgreSQL, and what PostgreSQL's backends wait for (issue 11, scaling).

Run: .venv/bin/python bench/worker_cpu.py [--runs 300] [--workers 1] [--concurrency 4]
     [--py-spy DIR]

The drain is bench/workers.py's (``drain``'s set-up: a backlog moved into the served queue by
one UPDATE); meanwhile the CPU time (utime + stime, ``/proc/<pid>/stat``) of every process of
the machine is read before and after (one started during the drain, such as a worker slot's
connection and its backend, counts whole), with the machine's busy time (``/proc/stat``, less
idle, iowait and steal) and PostgreSQL's commit count, so the per-step figures add up:
workers + PostgreSQL (every ``postgres`` process: backends, WAL writer, checkpointer, ...) +
the rest = the machine's busy time; the rest is listed by process (kernel threads, this
script, other jobs) and by kind (interrupts). ``pg_stat_activity`` is sampled every 20 ms for
the wait events of the drain's backends (every client backend of the database opened since
the runs were submitted, as they appear).
``--py-spy DIR``: each worker runs under ``py-spy record`` (on-CPU samples, flame graph and
speedscope profile per worker in DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

import tether  # noqa: E402
import workers as wb  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its reaped children (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def waited_seconds(pid: int) -> float:
    """Time the threads of ``pid`` spent runnable but not running (``schedstat``)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                total += int((task / "schedstat").read_text().split()[1])
    except OSError:
        return 0.0
    return total / 1e9


STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_seconds() -> dict[str, float]:
    """The whole machine's CPU time by kind, all cores (the first line of ``/proc/stat``)."""
    values = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    return {name: int(v) / TICK for name, v in zip(STAT_FIELDS, values, strict=True)}


def processes() -> dict[int, str]:
    """Every process of the machine, by pid: its ``comm``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found[int(entry.name)] = (entry / "comm").read_text().strip()
    return found


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a py-spy wrapper's python child)."""
    found = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in children:
        found += tree(int(child))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--py-spy", default=None)
    parser.add_argument("--metrics", action="store_true",
                        help="workers serve Prometheus metrics (--metrics-port 0): their cost")
    args = parser.parse_args()
    schema = wb.Schema()
    workdir = Path(tempfile.mkdtemp(prefix="worker-cpu-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        runner = tether.Runner(wb.chain(args.nodes, "bench_step"), schema.store)
        for _ in range(args.runs):
            runner.submit({}, queue=wb.HOLD)
        (since,), = schema.sql("SELECT now()")
        path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        prefix = []
        for i in range(args.workers):
            if args.py_spy:
                prefix = [str(Path(sys.executable).parent / "py-spy"), "record", "--gil",
                          "-r", "250", "-f", "raw", "-o", f"{args.py_spy}/worker-{i}.txt", "--"]
            procs.append(subprocess.Popen(
                [*prefix, sys.executable, "-m", "tether", "worker", "--db", schema.url,
                 "--tasks", "worker_tasks", "--concurrency", str(args.concurrency),
                 "--queue", wb.SERVED, *(["--metrics-port", "0"] if args.metrics else [])],
                env={**os.environ, "PYTHONPATH": path}, cwd=workdir,
                stdout=open(workdir / f"worker-{i}.log", "wb"),  # noqa: SIM115
                stderr=subprocess.STDOUT))
        while len(schema.store.list_workers()) < args.workers:
            time.sleep(0.05)
        time.sleep(0.5)
        import psycopg

        watch = psycopg.connect(w.PG_URL, autocommit=True)
        poll = schema.connection()
        pids = [p for proc in procs for p in tree(proc.pid)]
        waits: Counter[str] = Counter()
        samples = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for state, event in watch.execute(
                        "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'CPU') "
                        "FROM pg_stat_activity WHERE datname = current_database() "
                        "AND backend_type = 'client backend' AND backend_start > %s "
                        "AND pid <> pg_backend_pid() AND pid <> %s",
                        (since, poll.info.backend_pid)).fetchall():
                    waits[f"{state} {event}"] += 1
                samples[0] += 1
                time.sleep(0.02)

        commits_sql = ("SELECT xact_commit FROM pg_stat_database "
                       "WHERE datname = current_database()")
        (commits,), = watch.execute(commits_sql).fetchall()
        everyone = processes()
        server = [p for p, name in everyone.items() if name == "postgres"]
        before = {p: cpu_seconds(p) for p in everyone}
        queued = {p: waited_seconds(p) for p in everyone}
        machine = machine_seconds()
        wall = time.time()
        schema.sql(f"UPDATE %S.runs SET queue = '{wb.SERVED}' WHERE queue = '{wb.HOLD}'; "
                   f'NOTIFY "{schema.store.notify_channel}"')
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        while True:
            (done,), = schema.sql("SELECT count(*) FILTER (WHERE status = 'completed') "
                                  "FROM %S.runs", connection=poll)
            if done == args.runs:
                break
            time.sleep(0.1)
        (commits_after,), = watch.execute(commits_sql).fetchall()
        later = processes()  # (processes started during the drain: all their CPU is in it)
        everyone.update(later)
        after = {p: cpu_seconds(p) for p in everyone}
        before.update({p: 0.0 for p in everyone if p not in before})
        server = [p for p, name in everyone.items() if name == "postgres"]
        machine = {k: v - machine[k] for k, v in machine_seconds().items()}
        busy = sum(v for k, v in machine.items() if k not in ("idle", "iowait", "steal"))
        queued = {p: waited_seconds(p) - queued.get(p, 0.0) for p in everyone}
        stop.set()
        sampler.join()
        end = schema.sql("SELECT max(updated_at) FROM %S.runs")[0][0]
        seconds = end - wall
        steps = args.runs * args.nodes
        print(f"{args.workers} worker(s) x{args.concurrency}: {steps} steps in {seconds:.2f} s "
              f"= {steps / seconds:,.0f} steps/s; load {wb.load()}")
        for p in pids:
            used = after[p] - before[p]
            print(f"  worker pid {p}: {used:.2f} s CPU = {used / steps * 1e6:,.0f} µs/step "
                  f"({used / seconds * 100:.0f}% of a core); runnable, not running: "
                  f"{queued[p]:.2f} s (all threads)")
        print(f"  PostgreSQL processes runnable, not running: "
              f"{sum(queued[p] for p in server):.2f} s")
        everything = sum(after[p] - before[p] for p in server)
        commits = commits_after - commits
        print(f"  PostgreSQL commits: {commits:,} = {commits / steps:.2f} per step (this "
              "script's polls included; group commit batches a worker's writes)")
        mine = sum(after[p] - before[p] for p in pids)
        rest = busy - mine - everything
        print(f"  all {len(server)} PostgreSQL processes: {everything:.2f} s CPU = "
              f"{everything / steps * 1e6:,.0f} µs/step ({everything / seconds * 100:.0f}% of a "
              "core)")
        print(f"  the machine: {busy:.2f} s busy ({busy / seconds * 100:.0f}% of a core); "
              f"besides workers and PostgreSQL {rest:.2f} s = {rest / steps * 1e6:,.0f} "
              "µs/step (kernel threads, this script, other jobs)")
        print("  the machine by kind: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in machine.items() if k != "idle"))
        others = sorted(((after[p] - before[p], p) for p in everyone
                         if p not in pids and p not in server), reverse=True)
        print("  the rest by process: " + ", ".join(
            f"{everyone[p]} ({p}) {used:.2f} s" for used, p in others[:6] if used > 0))
        total = sum(waits.values()) or 1
        print(f"  backend states over {samples[0]} samples:")
        for key, n in waits.most_common(12):
            print(f"    {key:45} {n / total * 100:5.1f}%")
        watch.close()
        poll.close()
        for proc in procs:
            proc.send_signal(signal.SIGINT if args.py_spy else signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
        for i in range(len(procs)):  # each worker's group commit, logged as it stops
            for line in (workdir / f"worker-{i}.log").read_text().splitlines():
                if "checkpoint writes:" in line:
                    print(f"  worker {i}: {line.split('checkpoint writes: ', 1)[1]}")
    finally:
        for proc in procs:  # (an error above leaves no worker running)
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
        schema.drop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
