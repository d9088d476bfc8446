"""What ``tether compat`` costs on a backlog (issue 24): runs grouped by plan and position.

Run: .venv/bin/python bench/compat.py [--runs 10000] [--nodes 200] [--started 500]

A ``--nodes``-node workflow (a chain of tasks with an approval after the tenth) gets
``--started`` runs really executed up to the approval (paused, ten nodes checkpointed) and the
rest of ``--runs`` submitted (queued). The new version changes a node after the approval (so
every run can move) and one before it (so the paused runs cannot). A third version renames a
node the runs finished and the approval they are paused at (``renamed_from``: every run can
move).
Prints the CPU and wall time of :func:`tether.runtime.compat.check` over the whole backlog
against each, twice, alternated, and the verdicts, on SQLite (a file in a temporary
directory).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import tether
from tether.compiler.plan import Plan
from tether.runtime.compat import check
from tether.stores.open import open_checkpointer


def _workflow(nodes: int, changed: str = "", renamed: bool = False) -> str:
    """The chain; ``changed`` suffixes the labels of n5 and the last node; ``renamed``: n3
    and the approval n10 are renamed (``renamed_from``) instead."""
    lines = ["tether: 1", "name: backlog", "nodes:"]
    previous = None
    for i in range(nodes):
        node = f"r{i}" if renamed and i in (3, 10) else f"n{i}"
        was = f", renamed_from: n{i}" if node != f"n{i}" else ""
        if i == 10:
            lines.append(f"  {node}: {{approval: {{reason: check}}, needs: [{previous}]{was}}}")
        else:
            label = f"L{i}{changed if i in (5, nodes - 1) else ''}"
            needs = f", needs: [{previous}]" if previous else ""
            lines.append(f"  {node}: {{task: t.tag, with: {{label: {label}}}{needs}{was}}}")
        previous = node
    return "\n".join(lines) + "\n"


def _timed(store: Any, new: Plan, what: str, runs: int, nodes: int) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    report = check(store, new)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"compat of {runs} runs against a {nodes}-node workflow ({what}): {cpu:.2f} s CPU, "
          f"{wall:.2f} s wall ({len(report.movable)} can move, {len(report.pinned)} pinned)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--started", type=int, default=500)
    args = parser.parse_args()
    tasks = {"t.tag": lambda label: label}
    with tempfile.TemporaryDirectory() as tmp:
        old_path, new_path = Path(tmp, "v1.yaml"), Path(tmp, "v2.yaml")
        old_path.write_text(_workflow(args.nodes), encoding="utf-8")
        new_path.write_text(_workflow(args.nodes, "x"), encoding="utf-8")
        store = open_checkpointer(f"sqlite:///{tmp}/bench.db", create=True)
        old = tether.compile(old_path)
        started = time.perf_counter()
        runner = tether.Runner(old, store, tasks=tasks)
        for _ in range(args.started):
            runner.run()
        for _ in range(args.runs - args.started):
            runner.submit({})
        print(f"set-up: {args.runs} runs ({args.started} paused after 10 nodes) in "
              f"{time.perf_counter() - started:.1f} s")
        renamed_path = Path(tmp, "v3.yaml")
        renamed_path.write_text(_workflow(args.nodes, renamed=True), encoding="utf-8")
        for _ in range(2):  # alternated: the second round is the warm figure
            _timed(store, tether.compile(new_path), "two labels changed", args.runs,
                   args.nodes)
            _timed(store, tether.compile(renamed_path), "a started node and the approval "
                   "renamed", args.runs, args.nodes)
        store.close()


if __name__ == "__main__":
    main()
