"""Where the time of a checkpointed node goes (W1, SQLite): cProfile, grouped by concern.

Run: .venv/bin/python bench/profile_w1.py [--nodes 2000] [--store sqlite|postgres|none]
Prints the share of the run's time spent in SQL (driver calls), serialisation (json),
template rendering, scheduling (asyncio and tether's scheduler), checkpoint bookkeeping
(journal, ids) and the rest. Profiling inflates Python-heavy parts: read shares, not times.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as w

GROUPS = (
    ("SQL (driver)", ("sqlite3", "psycopg", "method 'execute'", "method 'fetch")),
    ("serialisation (json)", ("json/", "values.py", "records.py")),
    ("template rendering", ("jinja2", "render.py", "expressions.py")),
    ("checkpoint bookkeeping", ("journal.py", "ids.py", "stores/sql.py", "statements.py",
                                "retry.py")),
    ("scheduling (asyncio, scheduler)", ("asyncio", "execution.py", "state.py", "invoke.py",
                                         "select.epoll", "runner.py", "context.py")),
)


def group_of(filename: str, name: str) -> str:
    where = f"{filename}:{name}"
    for label, needles in GROUPS:
        if any(needle in where for needle in needles):
            return label
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--store", choices=["sqlite", "postgres", "none"], default="sqlite")
    args = parser.parse_args()
    plan = w.chain(args.nodes)
    schema = None
    if args.store == "sqlite":
        store = w.sqlite_store(Path(tempfile.mkdtemp()))
    elif args.store == "postgres":
        made = w.postgres_store()
        if made is None:
            sys.exit("set TETHER_BENCH_POSTGRES_URL")
        store, schema = made
    else:
        store = None
    try:
        w.run_once(plan, store)
        profile = cProfile.Profile()
        profile.enable()
        w.run_once(plan, store)
        profile.disable()
    finally:
        if schema is not None:
            w.drop_schema(schema)
    stats = pstats.Stats(profile)
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        totals[group_of(filename, name)] += tottime
    total = sum(totals.values())
    print(f"{args.nodes}-node chain, store {args.store}: {total / args.nodes * 1e6:.1f} µs "
          "per node under the profiler")
    for label, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"    {label:34} {seconds / total * 100:5.1f} %  "
              f"({seconds / args.nodes * 1e6:6.1f} µs per node)")


if __name__ == "__main__":
    main()
