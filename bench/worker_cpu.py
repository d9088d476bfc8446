"""Where a worker drain's time goes: CPU per node step of each worker process and of
PostgreSQL's backends, and what the backends wait for (issue 11, scaling).

Run: .venv/bin/python bench/worker_cpu.py [--runs 300] [--workers 1] [--concurrency 4]
     [--py-spy DIR]

The drain is bench/workers.py's (``drain``'s set-up: a backlog moved into the served queue by
one UPDATE); meanwhile the CPU time (utime + stime, ``/proc/<pid>/stat``) of every worker
process and of every PostgreSQL backend serving the bench's schema is read before and after,
and ``pg_stat_activity`` is sampled every 20 ms for the wait events of those backends.
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
                 "--queue", wb.SERVED],
                env={**os.environ, "PYTHONPATH": path}, cwd=workdir,
                stdout=open(workdir / f"worker-{i}.log", "wb"),  # noqa: SIM115
                stderr=subprocess.STDOUT))
        while len(schema.store.list_workers()) < args.workers:
            time.sleep(0.05)
        time.sleep(0.5)
        import psycopg

        watch = psycopg.connect(w.PG_URL, autocommit=True)
        poll = schema.connection()
        backends = [row[0] for row in watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND backend_start > %s", (since,)).fetchall()]
        pids = [p for proc in procs for p in tree(proc.pid)]
        waits: Counter[str] = Counter()
        samples = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for state, event in watch.execute(
                        "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'CPU') "
                        "FROM pg_stat_activity WHERE pid = ANY(%s)", (backends,)).fetchall():
                    waits[f"{state} {event}"] += 1
                samples[0] += 1
                time.sleep(0.02)

        before = {p: cpu_seconds(p) for p in pids + backends}
        queued = {p: waited_seconds(p) for p in pids + backends}
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
        after = {p: cpu_seconds(p) for p in pids + backends}
        queued = {p: waited_seconds(p) - queued[p] for p in pids + backends}
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
        pg = sum(after[p] - before[p] for p in backends)
        print(f"  PostgreSQL backends runnable, not running: "
              f"{sum(queued[p] for p in backends):.2f} s")
        print(f"  {len(backends)} PostgreSQL backends: {pg:.2f} s CPU = "
              f"{pg / steps * 1e6:,.0f} µs/step ({pg / seconds * 100:.0f}% of a core)")
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
    finally:
        for proc in procs:  # (an error above leaves no worker running)
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
        schema.drop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
