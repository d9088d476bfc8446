"""What one SQLite checkpoint write costs, alone and with Python work between writes (W0).

Run: .venv/bin/python bench/sqlite_put.py [--rows 1000]

Prints, from one run, medians of: the floor (raw sqlite3 INSERT+COMMIT of a small row, WAL,
synchronous=NORMAL); the store's fenced ``put`` of a checkpoint row in a loop of its own;
and the same ``put`` with unrelated Python work (JSON round trips of a 200-key dict) between
two writes, about 0.4, 1.3 and 2.7 ms of it; and the share of the time spent in the few
calls that ran SQLite's automatic WAL checkpoint (every 1,000 WAL pages; it fsyncs). The
last rows show how much the interpreter's work between two statements slows the statement
itself (caches), which is why a ``put`` inside a run costs more than in a loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import pernode  # noqa: E402

from tether.runtime.ids import new_checkpoint_id, new_execution_id  # noqa: E402
from tether.stores.records import CheckpointRow, RunRecord  # noqa: E402
from tether.stores.sqlite import SQLiteCheckpointer  # noqa: E402

SLOW = 0.002  # a put that ran SQLite's WAL checkpoint (it fsyncs)
JUNK = {f"k{i}": [i, str(i), {"a": i}] for i in range(200)}


def work(rounds: int) -> None:
    for _ in range(rounds):
        json.loads(json.dumps(JUNK))


def row(execution_id: str, node: str) -> CheckpointRow:
    checkpoint_id = new_checkpoint_id()
    return CheckpointRow(
        execution_id=execution_id, checkpoint_id=checkpoint_id, node_id=node, node_index=0,
        step_type="node", status="completed", base_id=checkpoint_id, is_full=False,
        state=json.dumps([[["nodes", node], {"status": "completed", "output": {"ok": 1}}]]),
        created_at=time.time(), node_output='{"ok":1}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="sqlite-put-"))
    floor = pernode.SQLiteFloor(directory)
    each = floor.batch(args.rows)[1]
    print(f"floor: raw INSERT+COMMIT, median {statistics.median(each) * 1e6:.1f} µs")
    floor.connection.close()
    store = SQLiteCheckpointer(directory / "store.db")
    execution_id = new_execution_id()
    now = datetime.now(UTC)
    store.create_run(RunRecord(execution_id=execution_id, workflow="wf",
                               plan_fingerprint="f" * 64, status="running", inputs={},
                               created_at=now, updated_at=now, owner="me",
                               lease_until=time.time() + 3600), "{}")
    for rounds in (0, 1, 3, 6):
        times = []
        for i in range(args.rows):
            written = row(execution_id, f"n{rounds}-{i}")
            work(rounds)
            start = time.perf_counter()
            store.put(written, "me")
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        work(rounds * 50)
        between = (time.perf_counter() - start) / 50
        slow = [t for t in times if t > SLOW]
        print(f"fenced put, {between * 1e3:.1f} ms of Python work between two: median "
              f"{statistics.median(times) * 1e6:.1f} µs, mean {statistics.mean(times) * 1e6:.1f}"
              f" µs; {len(slow)} call(s) over {SLOW * 1e3:.0f} ms (WAL checkpoints) hold "
              f"{sum(slow) / sum(times) * 100:.0f}% of the time")
    store.close()


if __name__ == "__main__":
    main()
