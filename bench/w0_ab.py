"""W0 A/B: per-node cost of two trees of tether, paired run by run (issue 21: the history must
not slow the hot path; within 5% of a base commit on every store).

Run: .venv/bin/python bench/w0_ab.py --base /path/to/base/src [--new src] [--pairs 41]
     [--store postgres|sqlite|none] [--json FILE]

``bench/run.py --only W0`` measures one tree at a time; comparing two of its invocations mixes
in the load of two different minutes, which on a shared machine moves PostgreSQL's per-node
time by more than the 5% to be judged. Here two child processes, one importing tether from
each tree (``PYTHONPATH``; the plan and tasks are this directory's ``workloads.py``, which uses
only the plan API both trees share), each with its own store, are driven alternately: every
pair is one run of the 200-node chain in each tree, back to back, in an order that alternates
between pairs (ABBA), for `async def` and for `def` tasks. Each child reports the run's wall
time and its own CPU time (``time.process_time``: every thread of the process, the driver
included) per node. The result per task style is the median of each tree's figures and the
median of the paired ratios new / base, with the quartiles of those ratios: a pair sees the
same load, so the ratio is what the trees differ by, not what the machine did. The database
server's time is not in the CPU figures (both trees send the same statements per node; see
docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
NODES = 200
STYLES = ("async", "def")


# -- the database server's CPU: the backends serving this process -----------------------------
def _own_ports() -> set[int]:
    """The local TCP ports of this process's sockets (its connections to the server)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def backend_pids(url: str) -> list[int]:
    """The server processes of this process's connections (PostgreSQL on this host)."""
    import psycopg

    ports = _own_ports()
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT pid, client_port FROM pg_stat_activity "
                                  "WHERE pid <> pg_backend_pid()").fetchall()
    return [pid for pid, port in rows if port in ports]


def on_cpu(pids: list[int]) -> float:
    """Seconds these processes have run on a CPU (``/proc/PID/schedstat``, nanoseconds)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/schedstat") as stat:
            total += int(stat.read().split()[0])
    return total / 1e9


# -- the child: one tree, one store, one run per request --------------------------------------
def child(store_name: str, nodes: int) -> None:
    sys.path.insert(0, str(HERE))
    import tempfile

    import workloads as w

    plans = {"async": w.chain(nodes), "def": w.chain(nodes, sync=True)}
    schema = None
    with tempfile.TemporaryDirectory() as directory:
        store: Any = None
        if store_name == "sqlite":
            store = w.sqlite_store(Path(directory), "normal")
        elif store_name == "postgres":
            made = w.postgres_store()
            if made is None:
                raise SystemExit("no PostgreSQL: set TETHER_BENCH_POSTGRES_URL")
            store, schema = made
        try:
            for plan in plans.values():  # warm-up: caches, connections, the thread pool
                for _ in range(3):
                    w.run_once(plan, store)
            pids = backend_pids(w.PG_URL) if schema is not None else []
            print("ready", flush=True)
            for line in sys.stdin:
                plan = plans[line.strip()]
                server, cpu, wall = on_cpu(pids), time.process_time(), time.perf_counter()
                w.run_once(plan, store)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                figures = {"wall": wall / nodes, "cpu": cpu / nodes}
                if pids:
                    figures["server"] = (on_cpu(pids) - server) / nodes
                print(json.dumps(figures), flush=True)
        finally:
            if schema is not None:
                w.drop_schema(schema)


# -- the driver -------------------------------------------------------------------------------
class Tree:
    def __init__(self, name: str, src: Path, store: str, nodes: int) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", "--store", store,
             "--nodes", str(nodes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.stdin: TextIO = self.process.stdin  # type: ignore[assignment]
        self.stdout: TextIO = self.process.stdout  # type: ignore[assignment]
        if self.stdout.readline().strip() != "ready":
            raise SystemExit(f"the {name} tree's child did not start (see its error above)")

    def run(self, style: str) -> dict[str, float]:
        self.stdin.write(style + "\n")
        self.stdin.flush()
        return json.loads(self.stdout.readline())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=60)


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def measure(base: Tree, new: Tree, pairs: int,
            styles: tuple[str, ...] = STYLES) -> dict[str, Any]:
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        style: {"base": [], "new": []} for style in styles}
    for pair in range(pairs):
        for style in styles if pair % 2 == 0 else reversed(styles):
            order = (base, new) if pair % 2 == 0 else (new, base)
            for tree in order:
                samples[style][tree.name].append(tree.run(style))
    result: dict[str, Any] = {}
    for style, by in samples.items():
        entry: dict[str, Any] = {}
        for metric in [m for m in ("wall", "cpu", "server") if m in by["base"][0]]:
            b = [s[metric] for s in by["base"]]
            n = [s[metric] for s in by["new"]]
            ratios = [y / x for x, y in zip(b, n, strict=True)]
            entry[metric] = {"base": statistics.median(b), "new": statistics.median(n),
                             "ratio": statistics.median(ratios), "quartiles": quartiles(ratios)}
        result[style] = entry
    return result


def report(result: dict[str, Any], store: str, pairs: int, nodes: int = NODES) -> None:
    print(f"W0 A/B, {nodes}-node chain, store {store}, {pairs} pairs (ABBA): per node, medians; "
          "ratio = median of paired new/base (quartiles)")
    for style, entry in result.items():
        for metric, figures in entry.items():
            low, high = figures["quartiles"]
            verdict = "within 5%" if figures["ratio"] <= 1.05 else "OVER 5%"
            print(f"    {style:5} {metric:4} base {figures['base'] * 1e6:7.1f} µs  new "
                  f"{figures['new'] * 1e6:7.1f} µs  ratio {figures['ratio']:.3f} "
                  f"({low:.3f}-{high:.3f})  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="the base tree's src directory")
    parser.add_argument("--new", type=Path, default=HERE.parent / "src",
                        help="the tree under test's src directory (default: this tree's)")
    parser.add_argument("--pairs", type=int, default=41)
    parser.add_argument("--store", choices=("postgres", "sqlite", "none"), default="postgres")
    parser.add_argument("--nodes", type=int, default=NODES,
                        help="the chain's length (W0: 200; 1 shows a run's fixed cost)")
    parser.add_argument("--kind", choices=("both", *STYLES), default="both",
                        help="the task style to run (default both, alternated)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.store, args.nodes)
        return
    if args.base is None:
        parser.error("--base is required (the src directory of the tree to compare against)")
    base = Tree("base", args.base.resolve(), args.store, args.nodes)
    new = Tree("new", args.new.resolve(), args.store, args.nodes)
    styles = STYLES if args.kind == "both" else (args.kind,)
    try:
        result = measure(base, new, args.pairs, styles)
    finally:
        base.close()
        new.close()
    report(result, args.store, args.pairs, args.nodes)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
