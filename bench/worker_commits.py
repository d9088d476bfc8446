"""PostgreSQL's commits and statements per run of a worker drain (issue 26): counts, so the
load of the machine does not move them.

Run: TETHER_BENCH_POSTGRES_URL=postgresql://.../<a database of its own> \\
     .venv/bin/python bench/worker_commits.py [--runs 500] [--concurrency 1,4]
     [--src TREE,TREE] [--group-commit]

The drain is bench/workers.py's (a backlog of ``--runs`` 10-node runs of plain ``def`` tasks
moved into the served queue by one UPDATE; one ``tether worker`` with ``--concurrency``
slots). Read from ``pg_stat_database`` of the URL's database before and after the drain:
``xact_commit`` (every commit: the worker's claims, checkpoint statements, ends,
heartbeats, its idle polls and its few writes as it stops; this script's own polls are
one per 50 ms, counted and subtracted; autovacuum is turned off on the schema's tables,
whose commits counted too) and ``tup_inserted`` (rows inserted: checkpoints and history
events). Use a database no other job writes to: the counters are the database's. ``--src A,B``: the
``src`` trees the workers import, alternated A B B A. ``--group-commit``: the worker shares
its slots' checkpoint writes in one write group (``tether worker --group-commit``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

import tether  # noqa: E402
import workers as wb  # noqa: E402

STATS = ("SELECT xact_commit, tup_inserted FROM pg_stat_database "
         "WHERE datname = current_database()")


def _stats(connection: Any) -> tuple[int, int]:
    connection.execute("SELECT pg_stat_clear_snapshot()")
    (commits, inserted), = connection.execute(STATS).fetchall()
    return int(commits), int(inserted)


def drain(runs: int, concurrency: int, src: str, workdir: Path,
          options: tuple[str, ...] = ()) -> dict[str, float]:
    """One drain by one worker importing ``src`` (``options``: more ``tether worker``
    options): commits and rows per run."""
    schema = wb.Schema()
    try:
        runner = tether.Runner(wb.chain(10, "bench_step"), schema.store)
        for _ in range(runs):
            runner.submit({}, queue=wb.HOLD)
        for (table,) in schema.sql("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                   schema.name):  # autovacuum's commits count too
            schema.sql(f'ALTER TABLE %S."{table}" SET (autovacuum_enabled = false)')
        os.environ["PYTHONPATH"] = src  # (the fleet's workers import tether from it)
        fleet = wb.Fleet(schema, 1, concurrency, workdir, {}, options)
        try:
            schema.store.close()  # its backends exit: the submissions' counts are sent
            with schema.connection() as watch:
                time.sleep(1.5)  # the worker's start-up counted: an idle backend
                commits, inserted = _stats(watch)
                polls = 0
                start = time.monotonic()
                schema.sql(f"UPDATE %S.runs SET queue = '{wb.SERVED}' "
                           f"WHERE queue = '{wb.HOLD}'; "
                           f'NOTIFY "{schema.store.notify_channel}"', connection=watch)
                while True:
                    polls += 1
                    (done,), = schema.sql("SELECT count(*) FROM %S.runs WHERE status = "
                                          "'completed'", connection=watch)
                    if done == runs:
                        break
                    time.sleep(0.05)
                seconds = time.monotonic() - start
        finally:
            fleet.stop()
        with schema.connection() as watch:  # sends its counts within 1 s, one that
            time.sleep(1.0)                  # exits at once
            commits_after, inserted_after = _stats(watch)
        own = polls + 4  # the UPDATE, the polls, the two snapshot clears, the first stats
        return {"commits_per_run": (commits_after - commits - own) / runs,
                "rows_per_run": (inserted_after - inserted) / runs,
                "steps_per_second": runs * 10 / seconds}
    finally:
        schema.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--src", default=str(HERE.parent / "src"))
    parser.add_argument("--group-commit", action="store_true",
                        help="the worker runs with --group-commit (every tree must know it)")
    args = parser.parse_args()
    options = ("--group-commit",) if args.group_commit else ()
    if not w.PG_URL:
        raise SystemExit("needs TETHER_BENCH_POSTGRES_URL (or TETHER_TEST_POSTGRES_URL)")
    trees = args.src.split(",")
    order = trees if len(trees) == 1 else [trees[0], trees[1], trees[1], trees[0]]
    with tempfile.TemporaryDirectory() as folder:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for src in order:
                result = drain(args.runs, concurrency, src, Path(folder), options)
                print(f"x{concurrency} {src}: {result['commits_per_run']:.2f} commits/run, "
                      f"{result['rows_per_run']:.2f} rows inserted/run, "
                      f"{result['steps_per_second']:,.0f} steps/s (load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
