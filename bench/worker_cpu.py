"""Where a worker drain's time goes: CPU per node step of each worker process and of
PostgreSQL, what PostgreSQL's backends wait for (issue 11, scaling), and the worker's CPU per
step against the in-process runner's on the same runs (issue 26).

Run: .venv/bin/python bench/worker_cpu.py [--runs 300] [--workers 1] [--concurrency 1,4]
     [--repeat 3] [--src TREE,TREE] [--py-spy DIR] [--metrics [on|both]] [--detail]
     [--group-commit] [--one-cpu-each]

The drain is bench/workers.py's (``drain``'s set-up: a backlog of ``--runs`` 10-node runs of
plain ``def`` tasks moved into the served queue by one UPDATE); meanwhile the CPU time (utime
+ stime, ``/proc/<pid>/stat``) of every process of the machine is read before and after (one
started during the drain, such as a worker slot's connection and its backend, counts whole),
with the machine's busy time (``/proc/stat``, less idle, iowait and steal) and PostgreSQL's
commit count, so the per-step figures add up: workers + PostgreSQL (every ``postgres``
process: backends, WAL writer, checkpointer, ...) + the rest = the machine's busy time; the
rest is listed by process (kernel threads, this script, other jobs) and by kind
(interrupts). ``pg_stat_activity`` is sampled every 20 ms for the wait events of the drain's
backends (every client backend of the database opened since the runs were submitted, as they
appear). These details are printed with ``--detail``.

**Like for like** (issue 26: "worker process CPU per node step at most 1.5x the in-process
runner's CPU per node on the same workload"): each drain is paired with the in-process
runner doing the same work as a user would: a fresh process (``--in-process-child``) on its
own schema of the same PostgreSQL runs ``Runner(plan, store).run({})`` on the same 10-node
chain of the same ``def`` task (``worker_tasks.bench_step``), ``--runs`` times one after the
other (after 20 warm-up runs); its CPU per step is the process's CPU (``getrusage``: user +
system, every thread) over those runs / their steps. The worker's CPU per step is its
process's over the drain / the drain's steps; both include everything their process does
(the worker: claims, history events, logging, heartbeats; the runner: creating each run).
The same child also runs a 200-node chain of the same task (as W0 of bench/run.py and
bench/tracing.py do) for the old comparison, the worker's CPU per step against the in-process
CPU per node of a long chain.

``--concurrency 1,4``: each concurrency in turn; ``--repeat N``: each measurement N times,
medians reported; ``--src A,B``: the ``src`` trees to compare (the workers and the in-process
children import tether from each; default: the one this script imports), measured
alternately (A B B A ...), with the ratios of B to A. Each figure comes from this one
invocation.
``--metrics``: the workers serve Prometheus metrics (``--metrics-port 0``); ``--metrics
both``: no in-process child; each repetition drains with a plain worker and one serving
metrics, alternated (P M, M P, M P, P M, ...), and prints the paired ratios metrics / plain of
the worker's CPU per step by two clocks: utime + stime (``/proc/<pid>/stat``, clock ticks)
and the time its threads ran (``/proc/<pid>/task/*/schedstat``, nanoseconds). The two
workers of a pair share a ``PYTHONHASHSEED`` (the repetition's number), so their dicts are
laid out alike. ``--callgrind DIR``: the workers run under valgrind's callgrind, counting
the instructions of the drain (a third clock; far slower: use fewer ``--runs``).
``--group-commit``: the workers share their slots' checkpoint writes in one write group
(``tether worker --group-commit``; every ``--src`` tree must know the flag).
``--one-cpu-each``: worker i runs with ``tether worker --cpu`` (the CPUs this process may use,
in turn) and the in-process child on the first of them, so the like-for-like ratio compares
processes kept to one CPU each (every ``--src`` tree must know ``--cpu``).
``--py-spy DIR``: each worker runs under ``py-spy record`` (on-CPU samples, flame graph and
speedscope profile per worker in DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

import tether  # noqa: E402
import workers as wb  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
W0_NODES = 200


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (0 once it is gone)."""
    return sum(user_system(pid))


def user_system(pid: int) -> tuple[float, float]:
    """utime and stime of ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def ran_seconds(pid: int) -> float:
    """Time the threads of ``pid`` alive now spent on a CPU (``schedstat``, nanoseconds: finer
    than ``cpu_seconds``' clock ticks; a thread that ended is not counted)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                total += int((task / "schedstat").read_text().split()[0])
    except OSError:
        return 0.0
    return total / 1e9


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


def worker_env(src: str | None) -> dict[str, str]:
    """The environment of a worker or child: ``bench/`` and ``src`` (default: the tree this
    script imports) on ``PYTHONPATH``."""
    tree = src or str(Path(tether.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), tree])}


def drain(args: argparse.Namespace, src: str | None, concurrency: int,
          metrics: bool = False, seed: int | None = None) -> dict[str, float]:
    """One drain by ``--workers`` worker processes (see the module docstring); the details
    printed with ``--detail``. Returns steps/s and the workers' CPU per step (``metrics``:
    the workers serve Prometheus metrics; ``seed``: their ``PYTHONHASHSEED``)."""
    schema = wb.Schema()
    workdir = Path(tempfile.mkdtemp(prefix="worker-cpu-"))
    procs: list[subprocess.Popen[bytes]] = []
    say = print if args.detail else (lambda *_: None)
    try:
        runner = tether.Runner(wb.chain(args.nodes, "bench_step"), schema.store)
        for _ in range(args.runs):
            runner.submit({}, queue=wb.HOLD)
        (since,), = schema.sql("SELECT now()")
        prefix = []
        for i in range(args.workers):
            if args.py_spy:
                spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
                prefix = [spy, "record", "--gil",
                          "-r", "250", "-f", "raw", "-o", f"{args.py_spy}/worker-{i}.txt", "--"]
            if args.callgrind:
                prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                          f"--callgrind-out-file={args.callgrind}/worker-"
                          f"{'metrics' if metrics else 'plain'}-{uuid.uuid4().hex[:6]}.out"]
            procs.append(subprocess.Popen(
                [*prefix, sys.executable, "-m", "tether", "worker", "--db", schema.url,
                 "--tasks", "worker_tasks", "--concurrency", str(concurrency),
                 "--queue", wb.SERVED, *(["--metrics-port", "0"] if metrics else []),
                 *(["--group-commit"] if args.group_commit else []),
                 *(["--cpu", str(wb.cpu_of(i))] if args.one_cpu_each else [])],
                env={**worker_env(src), **({} if seed is None else
                                           {"PYTHONHASHSEED": str(seed)})}, cwd=workdir,
                stdout=open(workdir / f"worker-{i}.log", "wb"),  # noqa: SIM115
                stderr=subprocess.STDOUT))
        while len(schema.store.list_workers()) < args.workers:
            if any(proc.poll() is not None for proc in procs):
                raise SystemExit(f"a worker exited; see {workdir}")
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
        ran = {p: ran_seconds(p) for p in pids}
        system = sum(user_system(p)[1] for p in pids)
        queued = {p: waited_seconds(p) for p in everyone}
        machine = machine_seconds()
        callgrind(args, procs, "on")
        wall = time.time()
        schema.sql(f"UPDATE %S.runs SET queue = '{wb.SERVED}' WHERE queue = '{wb.HOLD}'; "
                   f'NOTIFY "{schema.store.notify_channel}"')
        sampler = threading.Thread(target=sample, daemon=True)
        if args.detail:
            sampler.start()
        while True:
            (done,), = schema.sql("SELECT count(*) FILTER (WHERE status = 'completed') "
                                  "FROM %S.runs", connection=poll)
            if done == args.runs:
                break
            time.sleep(0.1)
        callgrind(args, procs, "off")
        (commits_after,), = watch.execute(commits_sql).fetchall()
        later = processes()  # (processes started during the drain: all their CPU is in it)
        everyone.update(later)
        after = {p: cpu_seconds(p) for p in everyone}
        ran = {p: ran_seconds(p) - ran[p] for p in pids}
        system = sum(user_system(p)[1] for p in pids) - system
        before.update({p: 0.0 for p in everyone if p not in before})
        server = [p for p, name in everyone.items() if name == "postgres"]
        machine = {k: v - machine[k] for k, v in machine_seconds().items()}
        busy = sum(v for k, v in machine.items() if k not in ("idle", "iowait", "steal"))
        queued = {p: waited_seconds(p) - queued.get(p, 0.0) for p in everyone}
        stop.set()
        if args.detail:
            sampler.join()
        end = schema.sql("SELECT max(updated_at) FROM %S.runs")[0][0]
        seconds = end - wall
        steps = args.runs * args.nodes
        mine = sum(after[p] - before[p] for p in pids)
        say(f"{args.workers} worker(s) x{concurrency}: {steps} steps in {seconds:.2f} s "
            f"= {steps / seconds:,.0f} steps/s; load {wb.load()}")
        for p in pids:
            used = after[p] - before[p]
            say(f"  worker pid {p}: {used:.2f} s CPU = {used / steps * 1e6:,.0f} µs/step "
                f"({used / seconds * 100:.0f}% of a core); runnable, not running: "
                f"{queued[p]:.2f} s (all threads)")
        say(f"  PostgreSQL processes runnable, not running: "
            f"{sum(queued[p] for p in server):.2f} s")
        everything = sum(after[p] - before[p] for p in server)
        commits = commits_after - commits
        say(f"  PostgreSQL commits: {commits:,} = {commits / steps:.2f} per step (the "
            "database's: this script's polls and other jobs' commits included)")
        rest = busy - mine - everything
        say(f"  all {len(server)} PostgreSQL processes: {everything:.2f} s CPU = "
            f"{everything / steps * 1e6:,.0f} µs/step ({everything / seconds * 100:.0f}% of a "
            "core)")
        say(f"  the machine: {busy:.2f} s busy ({busy / seconds * 100:.0f}% of a core); "
            f"besides workers and PostgreSQL {rest:.2f} s = {rest / steps * 1e6:,.0f} "
            "µs/step (kernel threads, this script, other jobs)")
        say("  the machine by kind: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in machine.items() if k != "idle"))
        others = sorted(((after[p] - before[p], p) for p in everyone
                         if p not in pids and p not in server), reverse=True)
        say("  the rest by process: " + ", ".join(
            f"{everyone[p]} ({p}) {used:.2f} s" for used, p in others[:6] if used > 0))
        if args.detail:
            total = sum(waits.values()) or 1
            say(f"  backend states over {samples[0]} samples:")
            for key, n in waits.most_common(12):
                say(f"    {key:45} {n / total * 100:5.1f}%")
        watch.close()
        poll.close()
        for proc in procs:
            proc.send_signal(signal.SIGINT if args.py_spy else signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
        instructions = 0
        for i in range(len(procs)):  # each worker's group commit (--group-commit), logged
            # as it stops
            for line in (workdir / f"worker-{i}.log").read_text().splitlines():
                if "checkpoint writes:" in line:
                    say(f"  worker {i}: {line.split('checkpoint writes: ', 1)[1]}")
                if "I   refs:" in line or "I refs:" in line:
                    instructions += int(line.rsplit(":", 1)[1].strip().replace(",", ""))
        return {"instructions_per_step": instructions / steps,
                "steps_per_second": steps / seconds, "cpu_per_step": mine / steps,
                "postgres_per_step": everything / steps,
                "ran_per_step": sum(ran.values()) / steps, "system_per_step": system / steps}
    finally:
        for proc in procs:  # (an error above leaves no worker running)
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
        schema.drop()
        shutil.rmtree(workdir, ignore_errors=True)


def callgrind(args: argparse.Namespace, procs: list[subprocess.Popen[bytes]],
              state: str) -> None:
    """Switch the workers' callgrind instrumentation ``on`` or ``off`` (with --callgrind)."""
    for proc in procs if args.callgrind else []:
        subprocess.run(["callgrind_control", "-i", state, str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def in_process(args: argparse.Namespace, src: str | None) -> dict[str, float]:
    """The in-process runner on the same runs, in a fresh process (``child``)."""
    schema = f"bench_ip_{uuid.uuid4().hex[:10]}"
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--in-process-child", schema,
             "--runs", str(args.runs), "--nodes", str(args.nodes),
             *(["--one-cpu-each"] if args.one_cpu_each else [])],
            env=worker_env(src), capture_output=True, text=True, check=False, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the in-process child failed:\n{done.stderr}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        w.drop_schema(schema)


def child(schema: str, runs: int, nodes: int) -> None:
    """In this process: ``runs`` runs of the chain one after the other with ``Runner.run``,
    then a 200-node chain; prints their CPU per step (process user + system) as JSON."""
    import resource

    import worker_tasks  # noqa: F401 - registers bench_step, as the workers import it

    from tether.stores.postgres import PostgresCheckpointer

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    store = PostgresCheckpointer(w.PG_URL, schema=schema)
    try:
        result = {}
        for label, length, count in (("per_step", nodes, runs),
                                     ("w0_per_node", W0_NODES, max(5, runs * nodes // W0_NODES))):
            runner = tether.Runner(wb.chain(length, "bench_step"), store)
            for _ in range(max(2, 200 // length)):  # warm-up: caches, connections, plan
                runner.run({})
            start, wall = cpu(), time.perf_counter()
            for _ in range(count):
                outcome = runner.run({})
                assert outcome.status == "completed", outcome.error
            result[label] = (cpu() - start) / (count * length)
            result[label + "_wall"] = (time.perf_counter() - wall) / (count * length)
    finally:
        store.close()
    print(json.dumps(result))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float]) -> str:
    """Median, quartiles and extremes of ``values``."""
    if len(values) < 2:
        return f"{median(values):.3f}"
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return (f"median {median(values):.3f} (quartiles {low:.3f}-{high:.3f}, "
            f"range {min(values):.3f}-{max(values):.3f}, n={len(values)})")


CLOCKS = (("cpu_per_step", "utime+stime"), ("ran_per_step", "schedstat"),
          ("instructions_per_step", "instructions"))


def metrics_pairs(args: argparse.Namespace, trees: list[str | None],
                  concurrencies: list[int]) -> None:
    """``--metrics both``: each repetition drains with a plain worker and a worker serving
    metrics (``--metrics-port 0``), in alternated order (plain first, then metrics first,
    ...), for each tree and concurrency; prints each pair and, per tree, the paired ratios
    metrics / plain of the worker's CPU per step (issue 23: at most 1.03)."""
    clocks = CLOCKS if args.callgrind else CLOCKS[:2]
    started = wb.load()
    ratios: dict[tuple[int, int, str], list[float]] = {}
    plain: dict[tuple[int, int], list[float]] = {}
    for repetition in range(args.repeat):
        for index in (range(len(trees)) if repetition % 2 == 0 else
                      reversed(range(len(trees)))):
            for concurrency in concurrencies:
                order = (False, True) if (repetition // 2 + repetition) % 2 == 0 else (
                    True, False)  # plain, metrics; metrics, plain; metrics, plain; ...
                got = {on: drain(args, trees[index], concurrency, on, repetition)
                       for on in order}
                plain.setdefault((index, concurrency), []).append(got[False]["cpu_per_step"])
                line = []
                for clock, name in clocks:
                    ratio = got[True][clock] / got[False][clock]
                    ratios.setdefault((index, concurrency, clock), []).append(ratio)
                    scale, unit = (1, "") if clock == "instructions_per_step" else (1e6, " µs")
                    line.append(f"{name} {got[False][clock] * scale:,.1f}/"
                                f"{got[True][clock] * scale:,.1f}{unit} = {ratio:.3f}")
                print(f"[{repetition + 1}/{args.repeat}] {trees[index] or 'this tree'} "
                      f"x{concurrency} plain/metrics: {'; '.join(line)}; system "
                      f"{got[False]['system_per_step'] * 1e6:,.0f}/"
                      f"{got[True]['system_per_step'] * 1e6:,.0f} µs; load "
                      f"{wb.load()[0]:.1f}", flush=True)
    print(f"\nWorker CPU per step with metrics / without, {args.runs} runs of {args.nodes} "
          f"`def` nodes, {args.workers} worker(s), PostgreSQL, {args.repeat} pairs (load "
          f"average before {started}, after {wb.load()}; {os.cpu_count()} cores)")
    for (index, concurrency), values in sorted(plain.items()):
        print(f"  {trees[index] or 'this tree'} x{concurrency} (plain worker "
              f"{median(values) * 1e6:,.1f} µs/step):")
        for clock, name in clocks:
            print(f"    {name:12} {spread(ratios[(index, concurrency, clock)])}")
    print("  bound (issue 23): metrics / plain <= 1.03")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", default="1,4", help="comma-separated slot counts")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each")
    parser.add_argument("--src", default="", help="comma-separated src trees (A/B)")
    parser.add_argument("--py-spy", default=None)
    parser.add_argument("--metrics", nargs="?", const="on", default="off",
                        choices=("off", "on", "both"),
                        help="workers serve Prometheus metrics (--metrics-port 0); both: "
                        "alternate plain and metrics workers, print the paired ratios")
    parser.add_argument("--callgrind", default=None, metavar="DIR",
                        help="workers run under valgrind's callgrind, counting the drain's "
                        "instructions (profiles in DIR)")
    parser.add_argument("--detail", action="store_true", help="print each drain's details")
    parser.add_argument("--group-commit", action="store_true",
                        help="workers run with --group-commit (the slots' write group)")
    parser.add_argument("--one-cpu-each", action="store_true",
                        help="each worker on one CPU (tether worker --cpu), the in-process "
                        "child on the first")
    parser.add_argument("--in-process-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # (the finally blocks clean up)
    if args.in_process_child:
        if args.one_cpu_each:
            os.sched_setaffinity(0, {wb.cpu_of(0)})
        child(args.in_process_child, args.runs, args.nodes)
        return
    if not w.PG_URL:
        print("worker CPU bench skipped: set TETHER_BENCH_POSTGRES_URL or "
              "TETHER_TEST_POSTGRES_URL")
        return
    trees: list[str | None] = [t.strip() for t in args.src.split(",") if t.strip()] or [None]
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if args.metrics == "both":
        metrics_pairs(args, trees, concurrencies)
        return
    started = wb.load()
    figures: dict[tuple[int, int], dict[str, list[float]]] = {}
    for repetition in range(args.repeat):
        order = list(range(len(trees)))
        if repetition % 2:
            order.reverse()  # A B, B A, A B, ...
        for index in order:
            inside = in_process(args, trees[index])
            for concurrency in concurrencies:
                drained = drain(args, trees[index], concurrency, args.metrics == "on")
                row = figures.setdefault((index, concurrency), {})
                for key, value in {**inside, **drained}.items():
                    row.setdefault(key, []).append(value)
                ratio = drained["cpu_per_step"] / inside["per_step"]
                row.setdefault("ratio", []).append(ratio)
                row.setdefault("w0_ratio", []).append(
                    drained["cpu_per_step"] / inside["w0_per_node"])
                print(f"[{repetition + 1}/{args.repeat}] {trees[index] or 'this tree'} "
                      f"x{concurrency}: worker {drained['cpu_per_step'] * 1e6:,.0f} µs/step "
                      f"({drained['steps_per_second']:,.0f} steps/s), in process "
                      f"{inside['per_step'] * 1e6:,.0f} µs/step: {ratio:.2f}x; load "
                      f"{wb.load()[0]:.1f}", flush=True)
    print(f"\nWorker CPU per step against the in-process runner's, {args.runs} runs of "
          f"{args.nodes} `def` nodes, {args.workers} worker(s), PostgreSQL, medians of "
          f"{args.repeat} (load average before {started}, after {wb.load()}; "
          f"{os.cpu_count()} cores)")
    print(f"  {'tree':30} {'slots':>5} {'steps/s':>8} {'worker':>9} {'in proc':>9} "
          f"{'ratio':>6} {'W0-like':>9} {'ratio':>6}  (µs of CPU per step)")
    for (index, concurrency), row in sorted(figures.items(), key=lambda kv: kv[0][::-1]):
        print(f"  {trees[index] or 'this tree':30} {concurrency:5} "
              f"{median(row['steps_per_second']):8,.0f} "
              f"{median(row['cpu_per_step']) * 1e6:9,.0f} {median(row['per_step']) * 1e6:9,.0f} "
              f"{median(row['ratio']):5.2f}x {median(row['w0_per_node']) * 1e6:9,.0f} "
              f"{median(row['w0_ratio']):5.2f}x")
    if len(trees) == 2:
        for concurrency in concurrencies:
            a, b = figures[(0, concurrency)], figures[(1, concurrency)]
            print(f"  x{concurrency}: worker CPU per step {trees[1]} / {trees[0]}: "
                  f"{median(b['cpu_per_step']) / median(a['cpu_per_step']):.2f}; steps/s "
                  f"{median(b['steps_per_second']) / median(a['steps_per_second']):.2f}; "
                  f"like-for-like ratio {median(a['ratio']):.2f}x -> {median(b['ratio']):.2f}x "
                  f"(target <= 1.5x)")
    print("  ratio: worker CPU per step / in-process CPU per step on the same 10-node runs "
          "(target <= 1.5x); W0-like: in-process CPU per node of a 200-node chain, and the "
          "worker's against it (the old comparison)")

if __name__ == "__main__":
    main()
