"""What a concurrency-keyed claim costs against an unkeyed one, on PostgreSQL (issue 26).

Run: .venv/bin/python bench/concurrency_claim.py [--backlog 1000] [--claims 100] [--limit 4]
     [--keys 100]

One schema, two queues with ``--backlog`` queued one-node runs each: ``plain`` (no key) and
``keyed`` (a workflow with ``concurrency: {key: "{{ inputs.k }}", limit: 1}``): every other
run belongs to one of ``--keys`` busy keys, whose first run is claimed and held before the
timing starts (so those queued runs wait behind it and each claim must pass over them), the
others to keys of their own (``--keys 0``: every run has a key of its own). Then
``--claims`` rounds, each timing one ``claim_runs(limit=--limit)`` of ``plain`` and one of
``keyed``, alternately (A/B in one process, so machine load hits both alike); after each
round the claimed runs are marked completed (untimed), so both backlogs shrink alike.
Prints the medians (wall time of the call: its round trip and the statement) and their
ratio, and the process CPU time of each. Needs TETHER_BENCH_POSTGRES_URL (or
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
from tether.compiler.plan import (  # noqa: E402
    Plan,
    PlanConcurrency,
    PlanInput,
    TaskNode,
    with_fingerprint,
)


def keyed_plan() -> Plan:
    node = TaskNode(id="n0", index=0, task="bench_step")
    return with_fingerprint(Plan(
        name="wkeyed", nodes=(node,), inputs=(PlanInput(name="k", type="string",
                                                        required=True),),
        concurrency=PlanConcurrency(key="{{ inputs.k }}", limit=1)))


def _timed(store: tether.Checkpointer, queue: str, limit: int,
           ) -> tuple[float, float, list[str]]:
    now = time.time()
    cpu, wall = time.process_time(), time.perf_counter()
    claimed = store.claim_runs("bench", [queue], limit, now, now + 600)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(claimed) == limit, f"the {queue} backlog ran out: raise --backlog"
    return wall, cpu, [c.run.execution_id for c in claimed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=100)
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--keys", type=int, default=10)
    args = parser.parse_args()
    if not w.PG_URL:
        raise SystemExit("set TETHER_BENCH_POSTGRES_URL to a PostgreSQL database")
    schema = wb.Schema()
    try:
        plain = tether.Runner(wb.chain(1, "bench_step"), schema.store)
        keyed = tether.Runner(keyed_plan(), schema.store)
        for i in range(args.keys):
            keyed.submit({"k": f"busy-{i}"}, queue="keyed")
        now = time.time()
        assert len(schema.store.claim_runs("holder", ["keyed"], args.keys, now,
                                           now + 3600)) == args.keys
        for i in range(args.backlog):
            plain.submit({}, queue="plain")
            keyed.submit({"k": f"busy-{i % args.keys}" if i % 2 and args.keys else f"own-{i}"},
                         queue="keyed")
        schema.sql("ANALYZE %S.runs")
        store = schema.store
        times: dict[str, list[float]] = {"plain": [], "keyed": []}
        cpus: dict[str, list[float]] = {"plain": [], "keyed": []}
        with schema.connection() as connection:
            for _ in range(args.claims):
                for queue in ("plain", "keyed"):
                    wall, cpu, ids = _timed(store, queue, args.limit)
                    times[queue].append(wall)
                    cpus[queue].append(cpu)
                    schema.sql("UPDATE %S.runs SET status = 'completed', owner = NULL "
                               "WHERE execution_id = ANY(%s)", ids, connection=connection)
        median = {q: statistics.median(t) for q, t in times.items()}
        cpu_median = {q: statistics.median(t) for q, t in cpus.items()}
        print(f"claim_runs(limit={args.limit}) over backlogs of {args.backlog:,} queued runs "
              + (f"(keyed: half of them behind {args.keys} busy keys, limit 1), " if args.keys
                 else "(keyed: a key of its own each, limit 1), ") +
              f"{args.claims} claims each, alternating: "
              f"unkeyed median {median['plain'] * 1e3:.3f} ms, keyed median "
              f"{median['keyed'] * 1e3:.3f} ms, ratio {median['keyed'] / median['plain']:.2f}x;"
              f" process CPU per claim {cpu_median['plain'] * 1e3:.3f} / "
              f"{cpu_median['keyed'] * 1e3:.3f} ms; load {wb.load()}")
    finally:
        schema.drop()


if __name__ == "__main__":
    main()
