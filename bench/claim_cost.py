"""What one claim costs on PostgreSQL with a backlog (issue 11): ``claim_runs`` alone.

Run: .venv/bin/python bench/claim_cost.py [--backlog 1500] [--claims 200] [--limit 4]

``--backlog`` one-node runs are submitted (``Runner.submit``) to a queue; then ``--claims``
calls of ``Checkpointer.claim_runs(limit=--limit)`` claim from it one after the other, each
timed alone (wall time of the call: one round trip and the statement). The backlog shrinks by
at most ``claims x limit`` runs, so every claim sees about the same one. Prints the median
and p90 of the calls. Needs PostgreSQL: TETHER_BENCH_POSTGRES_URL (or
TETHER_TEST_POSTGRES_URL). A fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

import tether  # noqa: E402
import workers as wb  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=1500)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--limit", type=int, default=4)
    args = parser.parse_args()
    if not w.PG_URL:
        raise SystemExit("set TETHER_BENCH_POSTGRES_URL to a PostgreSQL database")
    schema = wb.Schema()
    try:
        runner = tether.Runner(wb.chain(1, "bench_step"), schema.store)
        for _ in range(args.backlog):
            runner.submit({}, queue=wb.SERVED)
        schema.sql("ANALYZE %S.runs")
        store = schema.store
        times = []
        for _ in range(args.claims):
            now = time.time()
            start = time.perf_counter()
            claimed = store.claim_runs("bench", [wb.SERVED], args.limit, now, now + 600)
            times.append(time.perf_counter() - start)
            assert len(claimed) == args.limit, "the backlog ran out: raise --backlog"
        times.sort()
        print(f"claim_runs(limit={args.limit}) over a backlog of {args.backlog:,} queued runs, "
              f"{args.claims} calls: median {statistics.median(times) * 1e3:.2f} ms, "
              f"p90 {times[int(len(times) * 0.9)] * 1e3:.2f} ms; load {wb.load()}")
    finally:
        schema.drop()


if __name__ == "__main__":
    main()
