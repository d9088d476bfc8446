"""`tether show` of a 10,000-checkpoint run: how long its history takes to read (target: the
command under 1 s, process start included).

Run: .venv/bin/python bench/show_history.py [--nodes 10000] [--repeat 5]
Writes one run of a 10,000-node chain of trivial tasks to a SQLite store (and to PostgreSQL
when TETHER_BENCH_POSTGRES_URL or TETHER_TEST_POSTGRES_URL is set), then prints the median
wall time of: building the first page of its history in process (`build_history`, the
default 200 checkpoints), building its last page (`--after` the checkpoint 200 before the
end), the `tether show ID` and `tether show ID --json` commands end to end, and, for
scale, `tether show ID --json --limit <every checkpoint>` (the whole history in one page).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as w

import tether
from tether.runtime.history_build import build_history
from tether.stores.base import Checkpointer
from tether.stores.open import open_checkpointer


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def command(url: str, *args: str) -> Callable[[], object]:
    def run() -> object:
        done = subprocess.run([sys.executable, "-m", "tether", "show", *args, "--db", url],
                              capture_output=True, text=True, check=False,
                              env=dict(os.environ))
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        return done

    return run


def measure(name: str, url: str, store: Checkpointer, nodes: int, repeat: int) -> None:
    result = tether.Runner(w.chain(nodes, sync=True), store, w.TASKS).run()
    eid = result.execution_id
    ids = [row.checkpoint_id for row in store.rows(eid)]
    print(f"{name}: a run of {len(ids):,} checkpoints")
    first = median_seconds(lambda: build_history(store, eid), repeat)
    last = median_seconds(lambda: build_history(store, eid, ids[-201]), repeat)
    print(f"    build_history, first page (200 checkpoints)   {first * 1000:8.1f} ms")
    print(f"    build_history, last page                      {last * 1000:8.1f} ms")
    for label, args in (("tether show ID", (eid,)), ("tether show ID --json", (eid, "--json")),
                        (f"tether show ID --json --limit {len(ids)}",
                         (eid, "--json", "--limit", str(len(ids))))):
        seconds = median_seconds(command(url, *args), repeat)
        print(f"    {label:46} {seconds * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * options.nodes))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'show.db'}"
        with open_checkpointer(url) as store:
            measure("SQLite", url, store, options.nodes, options.repeat)
    pg = os.environ.get("TETHER_BENCH_POSTGRES_URL") or os.environ.get(
        "TETHER_TEST_POSTGRES_URL")
    if pg:
        schema = f"show_bench_{os.getpid()}"
        url = f"{pg}?schema={schema}"
        try:
            with open_checkpointer(url) as store:
                measure("PostgreSQL", url, store, options.nodes, options.repeat)
        finally:
            import psycopg

            with psycopg.connect(pg, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
