"""CPU per lease renewal on PostgreSQL: ``store.renew()`` N times (each a write transaction
through the store's transaction block), after 200 to warm up; prints microseconds of
process CPU per call. Under callgrind, the difference between two N gives the
instructions per call without the start-up (docs/performance.md, txn26):

    valgrind --tool=callgrind --callgrind-out-file=cg.N python bench/pg_renew_instructions.py N

for N = 200 and 1200. ``$TETHER_TEST_POSTGRES_URL`` names the server (a schema is made and dropped).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from datetime import UTC, datetime

import psycopg

from tether.stores.open import open_checkpointer
from tether.stores.records import RunRecord


def main() -> None:
    url = os.environ.get("TETHER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    schema = "b_" + uuid.uuid4().hex[:12]
    store = open_checkpointer(f"{url}?schema={schema}")
    now = datetime.now(tz=UTC)
    store.create_run(RunRecord(
        execution_id="e1", workflow="w", plan_fingerprint="f" * 64, status="running",
        inputs={}, created_at=now, updated_at=now, owner="me",
        lease_until=time.time() + 60), "{}")
    try:
        for _ in range(200):
            store.renew("e1", "me", time.time() + 60)
        started = time.process_time()
        for _ in range(calls):
            store.renew("e1", "me", time.time() + 60)
        print(f"{(time.process_time() - started) / calls * 1e6:.1f}")
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
