"""A worker's instructions per run against the in-process runner's, counted, not timed
(issue 26: "worker process CPU per node step at most 1.5x the in-process runner's").

Run: .venv/bin/python bench/worker_instructions.py [--src TREE,TREE] [--runs 40,120]
     [--nodes 10]

``bench/worker_cpu.py`` times both sides; on this shared 2-core machine its ratios move with
the load by more than a change to the worker's code. This counts instead, under valgrind's
callgrind (load-independent): the worker is ``worker_cpu.py``'s one-slot drain with
``--callgrind`` (instrumentation on for the drain only: claims, drives, ends, hand-offs of
every thread of the worker process); the in-process runner is a child doing ``Runner.run``
of the same chain one run after the other (counted whole, start-up included). Each side runs
at two run counts; the difference divided by the difference of runs is the instructions of
one run, without start-up and one-off costs (first compiles, learning the plan). Not counted:
the kernel's side (sleeping and waking, which is most of what separates the two sides' CPU
beyond these counts; see docs/decisions.md, issue 26) and PostgreSQL's work. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

TOTALS = re.compile(r"^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", re.MULTILINE)


def totals(paths: list[Path]) -> int:
    """The instructions counted in callgrind output files."""
    found = 0
    for path in paths:
        text = subprocess.run(["callgrind_annotate", str(path)], capture_output=True,
                              text=True, check=True).stdout
        match = TOTALS.search(text)
        if match is None:
            raise SystemExit(f"no totals in {path}")
        found += int(match.group(1).replace(",", ""))
    return found


def env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), tree])}


def worker(tree: str, runs: int, nodes: int) -> int:
    """Instructions of a one-slot worker's drain of ``runs`` runs."""
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([sys.executable, str(HERE / "worker_cpu.py"), "--src", tree,
                        "--concurrency", "1", "--repeat", "1", "--runs", str(runs),
                        "--nodes", str(nodes), "--callgrind", directory],
                       env=env(tree), check=True, capture_output=True, timeout=3600)
        return totals(sorted(Path(directory).glob("*.out")))


def in_process(tree: str, runs: int, nodes: int) -> int:
    """Instructions of a whole process running ``runs`` runs in process (after warm-up)."""
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "child.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        sys.executable, str(Path(__file__).resolve()), "--child", str(runs),
                        "--nodes", str(nodes)],
                       env=env(tree), check=True, capture_output=True, timeout=3600)
        return totals([out])


def child(runs: int, nodes: int) -> None:
    import worker_tasks  # noqa: F401 - registers bench_step, as the workers import it

    import tether
    import workers as wb
    from tether.stores.postgres import PostgresCheckpointer

    schema = f"bench_wi_{uuid.uuid4().hex[:10]}"
    store = PostgresCheckpointer(w.PG_URL, schema=schema)
    try:
        runner = tether.Runner(wb.chain(nodes, "bench_step"), store)
        for _ in range(max(2, 200 // nodes)):  # warm-up, as worker_cpu.py's child
            runner.run({})
        for _ in range(runs):
            assert runner.run({}).status == "completed"
    finally:
        store.close()
        w.drop_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default="", help="comma-separated src trees (A/B)")
    parser.add_argument("--runs", default="40,120", help="the two run counts")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.nodes)
        return
    if not w.PG_URL:
        print("worker instructions bench skipped: set TETHER_BENCH_POSTGRES_URL or "
              "TETHER_TEST_POSTGRES_URL")
        return
    low, high = (int(r) for r in args.runs.split(","))
    trees = [t.strip() for t in args.src.split(",") if t.strip()] or \
        [str(HERE.parent / "src")]
    rows = []
    for tree in trees:
        per_run = {side: (count(tree, high, args.nodes) - count(tree, low, args.nodes))
                   / (high - low) for side, count in (("worker", worker),
                                                      ("in process", in_process))}
        rows.append((tree, per_run["worker"], per_run["in process"]))
        print(f"{tree}: worker {per_run['worker']:,.0f}, in process "
              f"{per_run['in process']:,.0f} instructions per run", flush=True)
    print(f"\nInstructions per run of {args.nodes} `def` nodes (the difference of {high} and "
          f"{low} runs), one worker slot against Runner.run, PostgreSQL")
    print(f"  {'tree':40s} {'worker':>12s} {'in proc':>12s} {'ratio':>7s}")
    for tree, mine, theirs in rows:
        print(f"  {tree[-40:]:40s} {mine:12,.0f} {theirs:12,.0f} {mine / theirs:6.3f}x")
    if len(rows) == 2:
        (_, a_w, a_i), (_, b_w, b_i) = rows
        print(f"  second / first: worker {b_w / a_w:.3f}, in process {b_i / a_i:.3f}")


if __name__ == "__main__":
    main()
