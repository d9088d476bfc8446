"""What counting metrics adds to a node step, in instructions (issue 23: "metrics add at most
3% to a worker's per-step CPU").

Run: .venv/bin/python bench/metrics_instructions.py [--src TREE,TREE] [--runs 20]
     [--nodes 10] [--store postgres|sqlite] [--seeds 0,1] [--calls 10000]

``bench/worker_cpu.py --metrics both`` times workers with and without ``--metrics-port``; on
a shared 2-core machine its paired ratios scatter by ±10%, more than the bound. This counts
instead, as ``bench/w0_instructions.py`` does: a child process runs under valgrind's
callgrind with instrumentation off, warms up, switches it on (``callgrind_control -i on``)
for ``--runs`` runs of the worker's workload (bench/workers.py's chain of ``--nodes`` plain
``def`` nodes of ``worker_tasks.bench_step``, ``Runner.run`` on the store, each run followed
by the claim's ``observer.claimed`` call a worker makes), off again, and reports the
instructions of the whole process per step; once with no metrics (``observer.SINK`` None)
and once counting them (``metrics.enable()``, as ``tether worker --metrics-port`` does; no
HTTP server, which does nothing until scraped). A worker's own claim loop, heartbeats and
slot hand-offs are not in the count (the same with and without metrics): the ratio printed
is against this in-process step, which costs less than a worker's, so it overstates the
worker's ratio. Counts do not depend on the load; they move a little with the string hash
seed, so each configuration runs once per seed. ``--calls N``: also the instructions of one
call of the sink's ``node_finished``, ``run_started`` and ``claimed`` (N calls in a loop,
less the loop alone). Needs ``valgrind`` (and PostgreSQL for
``--store postgres``: ``TETHER_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(store_name: str, nodes: int, runs: int, metrics: bool) -> None:
    sys.path.insert(0, str(HERE))
    import worker_tasks  # noqa: F401 - registers bench_step
    import workloads as w

    import tether
    import workers as wb
    from tether.observability import observer

    if metrics:
        from tether.observability import metrics as counted

        counted.enable()
    plan = wb.chain(nodes, "bench_step")
    schema = None
    with tempfile.TemporaryDirectory() as directory:
        if store_name == "sqlite":
            store = w.sqlite_store(Path(directory), "normal")
        else:
            made = w.postgres_store()
            if made is None:
                raise SystemExit("no PostgreSQL: set TETHER_TEST_POSTGRES_URL")
            store, schema = made
        try:
            runner = tether.Runner(plan, store)

            def run() -> None:
                outcome = runner.run({})
                assert outcome.status == "completed", outcome.error
                observer.claimed(True, time.time() - 0.01, None)

            for _ in range(5):
                run()
            control = ["callgrind_control", "-i"]
            subprocess.run([*control, "on", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(runs):
                run()
            subprocess.run([*control, "off", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            store.close()
            if schema is not None:
                w.drop_schema(schema)


CALLS = {"node_finished": ("wchain10_bench_step", "task", "completed", 0.0004),
         "run_started": ("wchain10_bench_step",), "claimed": (0.3,)}


def calls_child(method: str, calls: int) -> None:
    """``calls`` calls of one of the sink's methods (``none``: the loop alone), counted."""
    from prometheus_client import CollectorRegistry

    from tether.observability.metrics import Metrics

    sink = Metrics(CollectorRegistry())
    call = getattr(sink, method) if method != "none" else None
    arguments = CALLS.get(method, ())

    def loop() -> None:
        for _ in range(calls):
            if call is not None:
                call(*arguments)

    loop()  # warm: the label sets exist, the thread's counts are made
    control = ["callgrind_control", "-i"]
    subprocess.run([*control, "on", str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    loop()
    subprocess.run([*control, "off", str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def per_call(tree: Path, calls: int) -> None:
    """Instructions per call of the sink's methods in ``tree`` (less the loop's)."""
    found = {}
    for method in ("none", *CALLS):
        with tempfile.TemporaryDirectory() as directory:
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={directory}/out", sys.executable, __file__,
                 "--calls-child", method, "--calls", str(calls)],
                env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
                capture_output=True, text=True, check=False)
            refs = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
            if done.returncode != 0 or refs is None:
                raise SystemExit(f"the child of {tree} failed:\n{done.stderr[-2000:]}")
            found[method] = int(refs.group(1).replace(",", ""))
    print(f"  {tree!s:35} per call: " + ", ".join(
        f"{method} {(found[method] - found['none']) / calls:,.0f}" for method in CALLS))


def count(src: Path, args: argparse.Namespace, metrics: bool, seed: int) -> float:
    """Instructions per step of one tree's child under callgrind."""
    with tempfile.TemporaryDirectory() as directory:
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": str(seed)}
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={directory}/out", sys.executable, __file__, "--child",
             "--store", args.store, "--nodes", str(args.nodes), "--runs", str(args.runs),
             *(["--metrics-on"] if metrics else [])],
            env=env, capture_output=True, text=True, check=False)
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"the child of {src} failed:\n{done.stderr[-2000:]}")
        return int(found.group(1).replace(",", "")) / (args.nodes * args.runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default=str(HERE.parent / "src"),
                        help="comma-separated src trees")
    parser.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--calls", type=int, default=0,
                        help="also count N calls of the sink's methods, per call")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--metrics-on", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.store, args.nodes, args.runs, args.metrics_on)
        return
    if args.calls_child:
        calls_child(args.calls_child, args.calls)
        return
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"Metrics in instructions: {args.runs} runs of a {args.nodes}-node `def` chain, "
          f"store {args.store}, hash seeds {seeds}; per step (callgrind, the whole process)")
    for tree in (Path(t.strip()).resolve() for t in args.src.split(",") if t.strip()):
        off = [count(tree, args, False, seed) for seed in seeds]
        on = [count(tree, args, True, seed) for seed in seeds]
        ratios = [b / a for a, b in zip(off, on, strict=True)]
        added = statistics.median(on) - statistics.median(off)
        print(f"  {tree!s:35} off {statistics.median(off):9,.0f}  metrics "
              f"{statistics.median(on):9,.0f}  +{added:7,.0f}  ratio "
              f"{statistics.median(ratios):.4f} (per seed: "
              f"{', '.join(f'{r:.4f}' for r in ratios)})")
        if args.calls:
            per_call(tree, args.calls)


if __name__ == "__main__":
    main()
