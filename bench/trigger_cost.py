"""What storing a run's trigger costs a submit (issue 26): CPU per ``Runner.submit_run`` with
the trigger stored (as every start now does) against the same submit with the trigger
dropped before the store writes it, alternated in one process, median of the rounds.

Run: .venv/bin/python bench/trigger_cost.py [--db URL] [--runs 300] [--rounds 6]

Without ``--db``, a SQLite file in a temporary directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import tether
from tether.stores.open import open_checkpointer
from tether.trigger import Trigger, TriggerKind

WORKFLOW = "tether: 1\nname: bench-trigger\nnodes:\n  a: {task: t}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "wf.yaml"
        path.write_text(WORKFLOW, encoding="utf-8")
        store = open_checkpointer(args.db or f"sqlite:///{folder}/bench.db", create=True)
        runner = tether.Runner(path, store, {})
        write = store.create_run

        def without_trigger(run: Any, plan_json: str) -> None:
            write(dataclasses.replace(run, trigger=None), plan_json)

        trigger = Trigger(TriggerKind.API, "bench")
        spent: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(args.rounds):
            for mode in ("with", "without"):
                store.create_run = write if mode == "with" else without_trigger  # type: ignore[method-assign]
                start = time.process_time()
                for _ in range(args.runs):
                    runner.submit_run({}, trigger=trigger)
                spent[mode].append((time.process_time() - start) / args.runs * 1e6)
        store.close()
    kept, dropped = statistics.median(spent["with"]), statistics.median(spent["without"])
    print(f"submit CPU per run: {kept:.0f} µs with the trigger stored, {dropped:.0f} µs "
          f"without; ratio {kept / dropped:.3f}")


if __name__ == "__main__":
    main()
