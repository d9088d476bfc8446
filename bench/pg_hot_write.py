"""The fenced checkpoint write's client CPU: psycopg's ``RawCursor`` against ``pg_hot``'s
libpq path (issue 26, pqfast26).

Run: TETHER_TEST_POSTGRES_URL=postgresql://... .venv/bin/python bench/pg_hot_write.py
     [--writes 500] [--blocks 8]

One process, one worker's store on a fresh schema, one run held by an owner: blocks of
``--writes`` writes of a 10-node step's checkpoint row, alternated A B B A ... between the two
ways of sending the same statement on the same connection: the previous path (the store's
``RawCursor``: ``execute(seen_sql, values, prepare=True).fetchone()``) and ``pg_hot``
(``HotStatement.first`` and the decoding ``_put_seen`` does). Each block's figure is the
thread's CPU (``time.thread_time``) per write; the medians of each way and their ratio are
printed. The server's work is the same statement in both ways (not counted here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tether.runtime.ids import new_checkpoint_id, new_execution_id
from tether.stores.postgres import PostgresCheckpointer
from tether.stores.records import CheckpointRow, RunRecord


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args()
    url = os.environ["TETHER_TEST_POSTGRES_URL"]
    schema = f"b_{uuid.uuid4().hex[:12]}"
    store = PostgresCheckpointer(url, schema=schema)
    try:
        figures = measure(store, args.writes, args.blocks)
    finally:
        with store.sql_cursor("dropping the bench schema") as cursor:
            cursor.execute(f'DROP SCHEMA "{schema}" CASCADE')
        store.close()
    for name, values in figures.items():
        print(f"{name}: {statistics.median(values):.1f} µs/write of thread CPU "
              f"({', '.join(f'{v:.1f}' for v in values)})")
    ratio = statistics.median(figures["pg_hot"]) / statistics.median(figures["cursor"])
    print(f"pg_hot / cursor: {ratio:.2f}x")


def measure(store: PostgresCheckpointer, writes: int, blocks: int) -> dict[str, list[float]]:
    from datetime import UTC, datetime

    store.use_for_worker()
    eid, owner = new_execution_id(), "bench-owner"
    now = datetime.now(tz=UTC)
    store.create_run(RunRecord(execution_id=eid, workflow="wf", plan_fingerprint="f" * 64,
                               status="running", inputs={}, created_at=now, updated_at=now,
                               owner=owner, lease_until=time.time() + 3600), "{}")
    store.put(step_row(eid), owner)  # compiles the statement, opens the hot connection
    sql = store._seen_sql
    assert sql is not None
    names = ("eid", "owner", *CheckpointRow._fields)

    def cursor_way(values: tuple[object, ...]) -> object:
        written, requested_at = store._hot_cursor.execute(sql, values, prepare=True).fetchone()
        return bool(written), requested_at

    def hot_way(values: tuple[object, ...]) -> object:
        found = store._hot_statement(sql, names).first(values)
        assert found is not None
        return found[0] != b"0", None if found[1] is None else float(found[1])

    ways = {"cursor": cursor_way, "pg_hot": hot_way}
    figures: dict[str, list[float]] = {name: [] for name in ways}
    order = ["cursor", "pg_hot", "pg_hot", "cursor"]
    with store._lock:
        for name in ways:  # warm both
            for _ in range(50):
                ways[name]((eid, owner, *step_row(eid)))
        for block in range(blocks):
            name = order[block % 4]
            way = ways[name]
            rows = [(eid, owner, *step_row(eid)) for _ in range(writes)]
            started = time.thread_time()
            for values in rows:
                way(values)
            figures[name].append((time.thread_time() - started) / writes * 1e6)
    return figures


def step_row(eid: str) -> CheckpointRow:
    checkpoint_id = new_checkpoint_id()
    return CheckpointRow(
        execution_id=eid, checkpoint_id=checkpoint_id, node_id="step_3", node_index=3,
        step_type="node", status="completed", base_id=checkpoint_id, is_full=False,
        state='[["nodes", "step_3", {"status": "completed", "output": 3}]]',
        node_input='{"x": 2}', node_output="3", iteration_counters="{}",
        created_at=time.time())


if __name__ == "__main__":
    main()
