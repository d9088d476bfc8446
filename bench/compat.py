"""What ``tether compat`` costs on a backlog (issue 24): runs grouped by plan and position.

Run: .venv/bin/python bench/compat.py [--runs 10000] [--nodes 200] [--started 500]

A ``--nodes``-node workflow (a chain of tasks with an approval after the tenth) gets
``--started`` runs really executed up to the approval (paused, ten nodes checkpointed) and the
rest of ``--runs`` submitted (queued). The new version changes a node after the approval (so
every run can move) and one before it (so the paused runs cannot). Prints the time of
:func:`tether.runtime.compat.check` over the whole backlog, and the verdicts, on SQLite (a
file in a temporary directory).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import tether
from tether.runtime.compat import check
from tether.stores.open import open_checkpointer


def _workflow(nodes: int, changed: str = "") -> str:
    lines = ["tether: 1", "name: backlog", "nodes:"]
    previous = None
    for i in range(nodes):
        node = f"n{i}"
        if i == 10:
            lines.append(f"  {node}: {{approval: {{reason: check}}, needs: [{previous}]}}")
        else:
            label = f"L{i}{changed if i in (5, nodes - 1) else ''}"
            needs = f", needs: [{previous}]" if previous else ""
            lines.append(f"  {node}: {{task: t.tag, with: {{label: {label}}}{needs}}}")
        previous = node
    return "\n".join(lines) + "\n"


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
        new = tether.compile(new_path)
        started = time.perf_counter()
        report = check(store, new)
        elapsed = time.perf_counter() - started
        print(f"compat of {args.runs} runs against a changed {args.nodes}-node workflow: "
              f"{elapsed:.2f} s ({len(report.movable)} can move, {len(report.pinned)} pinned)")
        store.close()


if __name__ == "__main__":
    main()
