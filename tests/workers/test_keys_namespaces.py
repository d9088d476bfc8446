"""Concurrency keys and dedup across separate PID namespaces, with a worker stopped past its
lease (SIGSTOP / SIGCONT), on SQLite and PostgreSQL (issue 26, *Proofs*).

Every process here is pid 1 of a PID namespace of its own (``unshare --pid --fork
--mount-proc``; same hostname, same boot id), so no process can tell another's liveness
from its pid: only the store's leases and fencing decide.

- **Racing submissions.** 8 submitting processes, each in its own namespace, released at
  one instant: with ``reject``, exactly one run of the key is accepted; with
  ``cancel_running``, every submission is stored and exactly one run of the key is left in
  progress (the last in line); with one dedup key and 8 branches (8 concurrency keys, 8
  locks), exactly one run is created and no other branch's older run is cancelled.
- **A stopped worker.** Worker A (concurrency 2, lease 2 s, its own namespace) holds the
  first run of key ``main`` (limit 1) inside node ``n1``; it is stopped with SIGSTOP
  (outside a store transaction: the test checks, and continues and stops it again if it
  caught one) and stays stopped. Worker B (another namespace) starts. ``queue``: two more
  runs were queued behind the first. ``cancel_running``: a newer run is submitted while A
  is stopped, asking the held run to stop. Checked, the store sampled all along and the
  task bodies recorded in a ledger outside the store (``keyed_tasks.py``): never more than
  one run of the key ``running`` in the store nor with a body open (A's stale body left
  out); B takes the held run over only after its lease (``queue``: it runs ``n1`` again and
  finishes it, then the others in order; ``cancel_running``: it stops it at the boundary
  before ``n1``, cancelled with ``n0`` done, then runs the newer one). Then A's body is
  released and A continued (SIGCONT): it reports the lost lease, and once B is stopped
  and A has claimed and finished a new run of the key, the store's rows of the earlier
  runs are exactly as before A woke: A committed nothing after its lease. Nothing ran
  twice: each node's body ended once per run, but for ``queue`` the ``n1`` that was in
  flight in A when it was stopped (at-least-once for a body a stalled worker never
  committed).

Skipped, with the reason, where the kernel refuses a PID namespace; CI runs as root.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyproof import (
    KEY,
    UNSHARE,
    LostHolder,
    Namespaced,
    namespace_refused,
    worker_env,
    workflow,
)

from conftest import wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

RACERS = 8


def _refused() -> str | None:
    return namespace_refused()


pytestmark = pytest.mark.skipif(_refused() is not None, reason=str(_refused()))


@pytest.fixture
def spaces(tmp_path: Path) -> Iterator[Namespaced]:
    made = Namespaced(tmp_path)
    yield made
    made.close()


def _in_transaction(url: str, app: str) -> bool:
    """Whether the (stopped) worker tagged ``app`` holds a store transaction open: SQLite,
    the write lock (nobody else writes now); PostgreSQL, a session of it not idle."""
    if url.startswith("sqlite:///"):
        probe = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()
    import psycopg

    with psycopg.connect(url.partition("?")[0], autocommit=True) as conn:
        time.sleep(0.2)  # a statement sent just before the stop finishes on the server
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                           " AND state <> 'idle'", [app]).fetchone()
        return row is not None and row[0] > 0


def _tagged(url: str, app: str) -> str:
    return url if url.startswith("sqlite") else f"{url}&application_name={app}"


def _stop_outside_a_transaction(spaces: Namespaced, proc: subprocess.Popen[bytes],
                                url: str, app: str) -> None:
    """SIGSTOP the worker at a moment it holds no store transaction (a worker stopped inside
    one would hold its locks; that is another failure, not this proof's)."""
    for _ in range(100):
        spaces.signal(proc, signal.SIGSTOP)
        if not _in_transaction(url, app):
            return
        spaces.signal(proc, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the worker was inside a store transaction at every stop")


@pytest.mark.parametrize("policy", ["queue", "cancel_running"])
def test_a_keyed_run_held_by_a_worker_stopped_past_its_lease(
        shared_url: str, spaces: Namespaced, tmp_path: Path, policy: str) -> None:
    LostHolder(
        shared_url, tmp_path, policy,
        start=lambda name, gate: spaces.worker(
            _tagged(shared_url, "keys-a") if name == "A" else shared_url, name, gate),
        lose=lambda a: _stop_outside_a_transaction(spaces, a, shared_url, "keys-a"),
        regain=lambda a: spaces.signal(a, signal.SIGCONT), stop=spaces.stop,
    ).prove(wait_for)


def _race(spaces: Namespaced, url: str, path: Path, branches: list[str],
          dedup: str | None) -> list[dict[str, object]]:
    """``len(branches)`` submitting processes, each pid 1 of its own namespace, released
    at one instant; what each printed."""
    env = worker_env(spaces.directory)
    procs = [subprocess.Popen([*UNSHARE, sys.executable, "-m", "keyproof", url, str(path),
                               f"s{i}", branch, *([dedup] if dedup else [])],
                              env=env, cwd=spaces.directory, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, branch in enumerate(branches)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline() or "{}")
            assert ready.get("ready") == 1, (ready, proc.communicate())
        go = json.dumps({"start_at": time.time() + 0.3}) + "\n"
        out = [proc.communicate(go, timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs), out
    return [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in out]


def test_racing_keyed_submissions_from_separate_pid_namespaces(
        shared_url: str, spaces: Namespaced, tmp_path: Path) -> None:
    with open_checkpointer(shared_url) as store:  # every store migrated before the race
        store.find_runs(limit=1)
    rejected = _race(spaces, shared_url, workflow(tmp_path, "reject"), [KEY] * RACERS, None)
    accepted = [r for r in rejected if "rejected" not in r]
    assert len(accepted) == 1 and accepted[0]["created"], rejected
    assert all("concurrency key 'main'" in str(r["rejected"]) for r in rejected
               if r is not accepted[0])

    superseding = _race(spaces, shared_url, workflow(tmp_path, "cancel_running"),
                        [KEY] * RACERS, None)
    assert all(r.get("created") for r in superseding), superseding
    with open_checkpointer(shared_url) as store:
        mine = {r.execution_id: r for r in store.find_runs(workflow="keyproof", limit=100)
                if r.concurrency_key == KEY}
    assert len(mine) == RACERS + 1
    left = [r for r in mine.values() if r.status == "queued" and r.cancel_requested_at is None]
    last = max(mine.values(), key=lambda r: (r.created_at, r.execution_id))
    assert [r.execution_id for r in left] == [last.execution_id], left
    assert sum(1 for r in mine.values() if r.status == "cancelled") == RACERS


def test_racing_dedup_submissions_from_separate_pid_namespaces(
        shared_url: str, spaces: Namespaced, tmp_path: Path) -> None:
    path = workflow(tmp_path, "cancel_running")
    branches = [f"b{i}" for i in range(RACERS)]
    with open_checkpointer(shared_url) as store:
        runner = Runner(path, store, {})
        older = {b: runner.submit({"rid": f"old-{b}", "branch": b}) for b in branches}
    racing = _race(spaces, shared_url, path, branches, "ns-dedup-1")
    assert {r["id"] for r in racing} == {"ns-dedup-1"}, racing
    assert sorted(bool(r["created"]) for r in racing) == [False] * (RACERS - 1) + [True]
    with open_checkpointer(shared_url) as store:
        run = store.get_run("ns-dedup-1")
        assert run is not None
        winner = run.inputs["branch"]
        left = {b: (r.status, r.cancel_requested_at is None) for b, eid in older.items()
                if (r := store.get_run(eid)) is not None}
    assert left.pop(winner)[0] == "cancelled"  # superseded by the one run created
    assert left == {b: ("queued", True) for b in branches if b != winner}
