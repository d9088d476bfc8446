"""W0 in instructions: the client's per-node cost of two trees, counted, not timed (issue 21).

Run: .venv/bin/python bench/w0_instructions.py --base /path/to/base/src [--new src]
     [--store postgres|sqlite|none] [--runs 4] [--nodes 200] [--seeds 0,1]

``bench/w0_ab.py`` times the trees in pairs; on a shared machine (and at 2 cores, any load)
its ratios scatter by several percent even between a tree and itself (run it with ``--base``
and ``--new`` the same tree: that spread is the noise floor). This counts instead: each tree's
child runs under valgrind's callgrind with instrumentation off, warms up (3 runs of each task
style), switches it on (``callgrind_control -i on``) for ``--runs`` runs of the ``--nodes``
chain, off again, and reports the instructions executed by the whole process (every thread)
per node. Counts do not depend on the load; they move a little with the string hash seed
(dict probe lengths), so each tree runs once per seed in ``--seeds``. Not counted: the
kernel's side of the syscalls (``strace -c`` counts those: the same per node in both trees)
and the database server's work (``w0_ab.py`` reports its CPU; ``EXPLAIN (ANALYZE, BUFFERS)``
of the fenced INSERT reads the same buffers in both schemas). Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STYLES = ("async", "def")


def child(store_name: str, style: str, nodes: int, runs: int) -> None:
    sys.path.insert(0, str(HERE))
    import workloads as w

    plan = w.chain(nodes, sync=style == "def")
    schema = None
    with tempfile.TemporaryDirectory() as directory:
        store = None
        if store_name == "sqlite":
            store = w.sqlite_store(Path(directory), "normal")
        elif store_name == "postgres":
            made = w.postgres_store()
            if made is None:
                raise SystemExit("no PostgreSQL: set TETHER_BENCH_POSTGRES_URL")
            store, schema = made
        try:
            for _ in range(3):
                w.run_once(plan, store)
            control = ["callgrind_control", "-i"]
            subprocess.run([*control, "on", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
            for _ in range(runs):
                w.run_once(plan, store)
            subprocess.run([*control, "off", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
        finally:
            if schema is not None:
                w.drop_schema(schema)


def count(src: Path, store: str, style: str, nodes: int, runs: int, seed: int) -> float:
    """Instructions per node of one tree's child under callgrind."""
    with tempfile.TemporaryDirectory() as directory:
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": str(seed)}
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={directory}/out", sys.executable, __file__, "--child",
             "--store", store, "--style", style, "--nodes", str(nodes), "--runs", str(runs)],
            env=env, capture_output=True, text=True)
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"the child of {src} failed:\n{done.stderr[-2000:]}")
        return int(found.group(1).replace(",", "")) / (nodes * runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="the base tree's src directory")
    parser.add_argument("--new", type=Path, default=HERE.parent / "src")
    parser.add_argument("--store", choices=("postgres", "sqlite", "none"), default="postgres")
    parser.add_argument("--style", choices=STYLES, default="async", help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.store, args.style, args.nodes, args.runs)
        return
    if args.base is None:
        parser.error("--base is required (the src directory of the tree to compare against)")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"W0 in instructions, {args.nodes}-node chain x {args.runs} runs, store {args.store}, "
          f"hash seeds {seeds}: per node (callgrind, the whole client process)")
    for style in STYLES:
        base = [count(args.base.resolve(), args.store, style, args.nodes, args.runs, seed)
                for seed in seeds]
        new = [count(args.new.resolve(), args.store, style, args.nodes, args.runs, seed)
               for seed in seeds]
        ratio = statistics.median(n / b for b, n in zip(base, new, strict=True))
        print(f"    {style:5} base {statistics.median(base):9,.0f}  new "
              f"{statistics.median(new):9,.0f}  ratio {ratio:.3f} "
              f"(per seed: {', '.join(f'{n / b:.3f}' for b, n in zip(base, new, strict=True))})")


if __name__ == "__main__":
    main()
