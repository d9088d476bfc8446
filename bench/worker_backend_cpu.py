"""PostgreSQL CPU per node step of a worker's own backends (issue 26, a leaner worker).

Run: .venv/bin/python bench/worker_backend_cpu.py [--runs 300] [--repeat 4]
     [--src TREE,TREE]

``bench/worker_cpu.py --detail`` adds up every ``postgres`` process of the machine, which on
a server shared with other jobs counts their backends too. This counts only the drain's
own: an in-process ``Worker`` ×4 (``--concurrency``) drains ``--runs`` 10-node runs of
``def`` tasks (``worker_tasks.bench_step``, as bench/workers.py's drain), and every
connection its store opens is noted (``PostgresCheckpointer._connect``) with its backend's
pid; the CPU those backends ran (``/proc/<pid>/schedstat``, the server on this machine) over
the drain / its steps is the figure, with the worker process's CPU (``getrusage``: the
worker's threads and this script's completion poll, one query per 0.1 s on a connection of
its own, not counted as the worker's backend). Each drain runs in a fresh process on a fresh
schema; ``--src A,B`` alternates the trees A B B A ... and prints each drain and the medians
and the ratio B / A. Needs TETHER_BENCH_POSTGRES_URL or TETHER_TEST_POSTGRES_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _schedstat(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # the backend ended: its last reading stands
        return -1


def child(runs: int, concurrency: int) -> None:
    sys.path.insert(0, str(HERE))
    import tether
    import workers as wb
    from tether.stores import postgres
    from tether.workers.loop import Worker

    pids: list[int] = []
    connect = postgres.PostgresCheckpointer._connect

    def noted(self: postgres.PostgresCheckpointer) -> object:
        connection = connect(self)
        pids.append(connection.info.backend_pid)  # type: ignore[attr-defined]
        return connection

    postgres.PostgresCheckpointer._connect = noted  # type: ignore[method-assign]
    schema = wb.Schema()
    try:
        runner = tether.Runner(wb.chain(10, "bench_step"), schema.store)
        for _ in range(runs):
            runner.submit({}, queue=wb.SERVED)
        schema.sql("ANALYZE %S.runs")
        pids.clear()
        worker = Worker(schema.url, ["worker_tasks"], queues=[wb.SERVED],
                        concurrency=concurrency)
        ran: dict[int, int] = {}
        poll = schema.connection()
        before = resource.getrusage(resource.RUSAGE_SELF)
        thread = threading.Thread(target=worker.run_forever)
        thread.start()
        query = f'SELECT count(*) FROM "{schema.name}".runs WHERE status = \'completed\''
        while True:
            time.sleep(0.1)
            for pid in list(pids):
                ran[pid] = max(ran.get(pid, 0), _schedstat(pid))
            if poll.execute(query).fetchone()[0] >= runs:
                break
        for pid in list(pids):
            ran[pid] = max(ran.get(pid, 0), _schedstat(pid))
        after = resource.getrusage(resource.RUSAGE_SELF)
        worker.stop()
        thread.join()
        poll.close()
        steps = runs * 10
        print(json.dumps({
            "backends": len(ran), "pg_us": sum(ran.values()) / 1e3 / steps,
            "process_us": (after.ru_utime + after.ru_stime - before.ru_utime
                           - before.ru_stime) * 1e6 / steps,
            "load": os.getloadavg()[0]}))
    finally:
        schema.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--src", default=str(HERE.parent / "src"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.runs, args.concurrency)
        return
    trees = args.src.split(",")
    order = [trees[(i // len(trees) + i) % len(trees)]  # A B B A A B ...
             for i in range(len(trees) * args.repeat)]
    found: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
    for n, tree in enumerate(order, 1):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, str(HERE)])}
        out = subprocess.run([sys.executable, __file__, "--child", "--runs", str(args.runs),
                              "--concurrency", str(args.concurrency)], env=env, check=True,
                             capture_output=True, text=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        found[tree].append(figures)
        print(f"[{n}/{len(order)}] {tree}: PostgreSQL (the worker's {figures['backends']} "
              f"backends) {figures['pg_us']:.1f} µs/step, worker process "
              f"{figures['process_us']:.1f} µs/step; load {figures['load']:.1f}", flush=True)
    medians = {tree: {key: statistics.median(f[key] for f in found[tree])
                      for key in ("pg_us", "process_us")} for tree in trees}
    for tree in trees:
        print(f"{tree}: median PostgreSQL {medians[tree]['pg_us']:.1f} µs/step (range "
              f"{min(f['pg_us'] for f in found[tree]):.1f}-"
              f"{max(f['pg_us'] for f in found[tree]):.1f}), worker process "
              f"{medians[tree]['process_us']:.1f} µs/step")
    if len(trees) == 2:
        a, b = trees
        pairs = [fb["pg_us"] / fa["pg_us"] for fa, fb in zip(found[a], found[b], strict=True)]
        print(f"{b} / {a}: PostgreSQL {medians[b]['pg_us'] / medians[a]['pg_us']:.2f}x "
              f"(pairs {', '.join(f'{p:.2f}' for p in pairs)}), worker process "
              f"{medians[b]['process_us'] / medians[a]['process_us']:.2f}x")


if __name__ == "__main__":
    main()
