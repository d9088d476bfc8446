"""A worker stopped *inside* a store transaction does not stall the fleet (PostgreSQL).

Worker A (a real ``tether worker``, lease 2 s, pid 1 of its own PID namespace where the
kernel allows) holds run ``r1`` inside node ``n1`` (its body parked on a gate file) and,
with a slot free, keeps claiming from its queue, which has a limit: each claim locks the
queue's row ``FOR UPDATE`` inside its transaction. The test holds that row itself, waits
until ``pg_stat_activity`` shows A's claim waiting for it inside its transaction, stops A
(``SIGSTOP``) and lets the row go: A's stopped session now holds the row, idle inside its
transaction, and every other claimer of the queue would wait for it for as long as A stays
stopped. The server ends that session after ``idle_in_transaction_session_timeout``
(derived from the lease: 1 s here; ``stores/pg_sessions.py``), which the test sees as the
session's disappearance while A is still stopped. Worker B (another namespace) then claims
``r1`` once its lease has expired and finishes it.

After ``SIGCONT`` A's claim fails on its ended session with a clear log line and no
traceback, its parked body of ``n1`` returns and A finds its lease gone; it commits nothing
for ``r1`` (the store's rows of ``r1`` are exactly as B left them; its history gains only
A's ``lease_lost`` note). With B stopped, A claims and finishes a new run ``r2``: it
reconnected and carries on. The ledger outside the store (``keyed_tasks.py``): every body
ended once per run, but ``r1``'s ``n1``, in flight in A when it was stopped (B ran it
again)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from keyproof import (
    Namespaced,
    by_worker,
    ends,
    events_of,
    mark,
    namespace_refused,
    snapshot,
    stale,
    statuses,
)

from conftest import wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
from tether.stores.queueing import QueueRecord

NODES = ("n0", "n1", "n2")
WORKFLOW = """\
tether: 1
name: frozen
inputs:
  rid: {type: string}
nodes:
  n0: {task: keyed_step, with: {rid: "{{ inputs.rid }}", node: n0}}
  n1: {task: keyed_step, needs: n0, with: {rid: "{{ inputs.rid }}", node: n1}}
  n2: {task: keyed_step, needs: n1, with: {rid: "{{ inputs.rid }}", node: n2}}
"""


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Namespaced]:
    made = Namespaced(tmp_path, isolate=namespace_refused() is None)
    yield made
    made.close()


def _backends(admin: psycopg.Connection[tuple[object, ...]], app: str,
              ) -> list[tuple[int, str, str | None, list[int]]]:
    """The sessions of the worker tagged ``app``: pid, state, wait event type, and the pids
    blocking it."""
    rows = admin.execute("SELECT pid, state, wait_event_type, pg_blocking_pids(pid) "
                         "FROM pg_stat_activity WHERE application_name = %s", [app]).fetchall()
    return [(int(str(r[0])), str(r[1]), None if r[2] is None else str(r[2]),
             list(r[3]) if isinstance(r[3], list) else []) for r in rows]


def test_a_worker_stopped_inside_a_claim_transaction_does_not_stall_the_fleet(
        pg_schema: tuple[str, str], workers: Namespaced, tmp_path: Path) -> None:
    server, schema = pg_schema
    url = f"{server}?schema={schema}"
    # A: waits on the test's lock for as long as it takes (lock_timeout is not what this
    # proves); its idle-in-transaction timeout is the one derived from its 2 s lease.
    url_a = f"{url}&lock_timeout=600&application_name=frozen-a"
    ledger, gate = tmp_path / "ledger.txt", tmp_path / "gate"
    (tmp_path / "frozen.yaml").write_text(WORKFLOW, encoding="utf-8")
    store = open_checkpointer(url)
    store.put_queue(QueueRecord("default", concurrency=4, created_at=time.time()))
    runner = Runner(tmp_path / "frozen.yaml", store, {})
    r1 = runner.submit({"rid": "r1"})
    worker_a, log_a = workers.worker(url_a, "A", gate)
    wait_for(lambda: Path(f"{gate}.started").exists(), 90, "A to hold r1 in n1")
    with psycopg.connect(server, autocommit=True) as admin:
        with psycopg.connect(server) as holder:  # the queue's row, in a transaction
            holder.execute(f'SELECT 1 FROM "{schema}".queues WHERE name = %s FOR UPDATE',
                           ["default"])
            me = holder.info.backend_pid

            def waiting() -> list[int]:
                return [pid for pid, state, event, blockers in _backends(admin, "frozen-a")
                        if state == "active" and event == "Lock" and me in blockers]
            wait_for(lambda: bool(waiting()), 90, "A's claim to wait for the queue's row")
            [claimer] = waiting()
            workers.signal(worker_a, signal.SIGSTOP)
            mark(ledger, "lost A")
            holder.rollback()  # A's stopped claim now holds the row, idle in its transaction
        wait_for(lambda: claimer not in [b[0] for b in _backends(admin, "frozen-a")], 60,
                 "the server to end A's session idle in its transaction")
    assert worker_a.poll() is None  # still there, still stopped
    worker_b, _ = workers.worker(url, "B")
    wait_for(lambda: statuses(url, [r1]) == {r1: "completed"}, 120,
             "B to take r1 over after its lease and finish it")
    before, noted = snapshot(url, [r1]), events_of(url, [r1])
    gate.write_text("open")  # A's parked body returns once A runs again
    workers.signal(worker_a, signal.SIGCONT)
    wait_for(lambda: ("r1", "n1") in by_worker(ledger, "end", "A"), 60,
             "A's stale body of n1 to return")
    wait_for(lambda: "lost its lease" in log_a.read_text(), 60, "A to report its lease lost")
    wait_for(lambda: "ended this process's session" in log_a.read_text(), 60,
             "A to say its session was ended")
    assert workers.stop(worker_b) == 0
    r2 = runner.submit({"rid": "r2"})  # A alone now: A runs it
    wait_for(lambda: statuses(url, [r2]) == {r2: "completed"}, 120,
             "A to reconnect, claim and finish a new run")
    assert by_worker(ledger, "end", "A")[-3:] == [("r2", n) for n in NODES]
    assert snapshot(url, [r1]) == before, "A wrote to the store after losing r1"
    added = {k for e, k in events_of(url, [r1]).items() if e not in noted}
    assert added <= {"lease_lost"}, added
    assert workers.stop(worker_a) == 0
    store.close()
    text = log_a.read_text()
    assert "Traceback" not in text, text
    assert stale(ledger) == {("r1", "n1", "A")}
    assert ends(ledger) == {**{(rid, n): 1 for rid in ("r1", "r2") for n in NODES},
                            ("r1", "n1"): 2}  # A's uncommitted n1, and B's
    assert by_worker(ledger, "start", "B") == [("r1", "n1"), ("r1", "n2")]
