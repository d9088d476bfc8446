"""Worker proofs with real `tether worker` processes on SQLite and PostgreSQL: a drain of many
queued 10-node runs, kill -9 of a worker holding runs, SIGTERM hand-back, cancel, and an
approval answered with `resume --enqueue`.

Task bodies append to effect files with O_APPEND (see fleet_tasks.py), so "every node once"
is counted from what the bodies did, not from the store. Leases are 2 s
(TETHER_LEASE_SECONDS) and workers poll every 0.1 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import NODES, Fleet, chain_workflow, wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

RUNS = int(os.environ.get("TETHER_TEST_FLEET_RUNS", "200"))


def _submit(url: str, workflow: Path, count: int) -> list[str]:
    store = open_checkpointer(url)
    try:
        runner = Runner(workflow, store, {})
        return [runner.submit({"rid": f"r{i}"}) for i in range(count)]
    finally:
        store.close()


def _statuses(url: str, ids: list[str]) -> dict[str, str]:
    store = open_checkpointer(url, create=False)
    try:
        return {eid: run.status for eid in ids if (run := store.get_run(eid)) is not None}
    finally:
        store.close()


def _all(url: str, ids: list[str], status: str) -> Callable[[], bool]:
    return lambda: set(_statuses(url, ids).values()) == {status}


def _expected(count: int, nodes: range = range(NODES)) -> set[str]:
    return {f"r{i} n{n}" for i in range(count) for n in nodes}


def _tether(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_four_workers_drain_queued_runs_every_node_once(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """RUNS queued 10-node runs, 4 worker processes: all complete; every node body and every
    @idempotent body ran exactly once; SIGTERM then stops each worker with exit 0 and
    deregisters it."""
    fleet = fleet_of(shared_url)
    ids = _submit(shared_url, chain_workflow(tmp_path), RUNS)
    workers = fleet.start(4)
    fleet.wait_registered(4)
    wait_for(_all(shared_url, ids, "completed"), 60 + RUNS * 0.3, "every run to complete")
    effects, charges = fleet.lines(fleet.effects), fleet.lines(fleet.idempotent)
    assert set(effects) == _expected(RUNS) and set(effects.values()) == {1}
    assert set(charges) == _expected(RUNS) and set(charges.values()) == {1}
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    assert [proc.wait(30) for proc in workers] == [0, 0, 0, 0]
    store = open_checkpointer(shared_url, create=False)
    assert store.list_workers() == []
    assert all(run.owner is None for run in store.list_runs(limit=RUNS))
    store.close()


def test_kill_9_of_a_worker_holding_runs_another_continues_each_once(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """A worker holding 4 runs (parked inside node n5) is killed with SIGKILL; a second
    worker takes each run over once its lease expires and finishes it: n0..n4 are not run
    again, every node ran once, and each run is on its second attempt."""
    fleet = fleet_of(shared_url)
    ids = _submit(shared_url, chain_workflow(tmp_path), 4)
    [first] = fleet.start(1, gated=True)
    started = Path(str(fleet.gate) + ".started")
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 4, 60,
             "the first worker to hold all 4 runs inside n5")
    first.kill()
    first.wait()
    fleet.gate.write_text("open")
    fleet.start(1, gated=True)
    wait_for(_all(shared_url, ids, "completed"), 60, "the second worker to finish them")
    effects = fleet.lines(fleet.effects)
    assert set(effects) == _expected(4) and set(effects.values()) == {1}
    store = open_checkpointer(shared_url, create=False)
    assert {store.get_run(eid).attempt for eid in ids} == {2}  # type: ignore[union-attr]
    store.close()


def test_sigterm_finishes_the_nodes_in_flight_hands_runs_back_and_exits_0(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """SIGTERM while 4 runs are inside n5: the worker lets n5 finish, stops each run at the
    next boundary, releases its lease (run left running, owner none) and exits 0; another
    worker then completes them without re-running anything."""
    fleet = fleet_of(shared_url)
    ids = _submit(shared_url, chain_workflow(tmp_path), 4)
    [first] = fleet.start(1, gated=True)
    fleet.wait_registered(1)
    started = Path(str(fleet.gate) + ".started")
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 4, 60,
             "the worker to hold all 4 runs inside n5")
    first.send_signal(signal.SIGTERM)
    log = tmp_path / "worker0.log"
    wait_for(lambda: "SIGTERM: stopping" in log.read_text(), 30, "the worker to see SIGTERM")
    fleet.gate.write_text("open")
    assert first.wait(30) == 0
    store = open_checkpointer(shared_url, create=False)
    runs = [store.get_run(eid) for eid in ids]
    assert {(r.status, r.owner) for r in runs if r is not None} == {("running", None)}
    store.close()
    assert set(fleet.lines(fleet.effects)) == _expected(4, range(6))
    fleet.start(1, gated=True)
    wait_for(_all(shared_url, ids, "completed"), 60, "another worker to finish them")
    effects = fleet.lines(fleet.effects)
    assert set(effects) == _expected(4) and set(effects.values()) == {1}


def test_cancel_of_a_queued_and_of_a_running_run(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """`tether cancel` of a queued run cancels it at once (it never starts); of a run a
    worker executes, it is requested, and the run ends cancelled at the next node boundary
    with no node after the one in flight run."""
    fleet = fleet_of(shared_url)
    workflow = chain_workflow(tmp_path)
    [running] = _submit(shared_url, workflow, 1)
    [first] = fleet.start(1, gated=True)
    started = Path(str(fleet.gate) + ".started")
    wait_for(started.exists, 60, "the run to reach n5")
    queued = _tether("submit", str(workflow), "--input", "rid=q", "--db", shared_url,
                     "--queue", "later", env=fleet.env, cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr
    queued_id = queued.stdout.strip()
    done = _tether("cancel", queued_id, "--db", shared_url, env=fleet.env, cwd=tmp_path)
    assert done.returncode == 0 and "cancelled run" in done.stdout
    asked = _tether("cancel", running, "--db", shared_url, env=fleet.env, cwd=tmp_path)
    assert asked.returncode == 0 and "cancel requested" in asked.stdout, asked
    fleet.gate.write_text("open")
    wait_for(_all(shared_url, [running], "cancelled"), 30, "the run to be cancelled")
    assert _statuses(shared_url, [queued_id]) == {queued_id: "cancelled"}
    assert set(fleet.lines(fleet.effects)) == {f"r0 n{n}" for n in range(6)}
    again = _tether("cancel", running, "--db", shared_url, env=fleet.env, cwd=tmp_path)
    assert again.returncode == 1 and "already ended (cancelled)" in again.stdout
    missing = _tether("cancel", "no-such-run", "--db", shared_url, env=fleet.env,
                      cwd=tmp_path)
    assert missing.returncode == 1 and "no-such-run" in missing.stderr
    workers = _tether("workers", "--db", shared_url, env=fleet.env, cwd=tmp_path)
    assert workers.returncode == 0 and str(first.pid) in workers.stdout


APPROVAL = """\
tether: 1
name: approve
inputs:
  rid: {type: string}
nodes:
  review:
    approval:
      reason: ship it
      form:
        approved: {type: boolean}
  after:
    needs: [review]
    task: step
    with: {rid: "{{ inputs.rid }}", node: after}
output: "{{ nodes.after.output }}"
"""


def test_an_approval_answered_with_enqueue_is_continued_by_a_worker_once(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    fleet = fleet_of(shared_url)
    workflow = tmp_path / "approve.yaml"
    workflow.write_text(APPROVAL, encoding="utf-8")
    ran = _tether("run", str(workflow), "--input", "rid=a", "--tasks", "fleet_tasks",
                  "--db", shared_url, "--quiet", "--execution-id", "appr-1",
                  env=fleet.env, cwd=tmp_path)
    assert ran.returncode == 4, ran.stderr
    fleet.start(2)
    answered = _tether("resume", "appr-1", "--value", '{"approved": true}', "--enqueue",
                       "--db", shared_url, env=fleet.env, cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert "left to the workers" in answered.stdout
    wait_for(_all(shared_url, ["appr-1"], "completed"), 30, "a worker to continue it")
    assert fleet.lines(fleet.effects) == {"a after": 1}


FLAKY = """\
tether: 1
name: flaky
inputs:
  rid: {type: string}
nodes:
  first:
    task: step
    with: {rid: "{{ inputs.rid }}", node: first}
  shaky:
    needs: [first]
    task: fail_once
    with: {rid: "{{ inputs.rid }}", node: shaky}
"""


def test_a_failed_run_resumed_with_enqueue_is_continued_by_a_worker(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """`tether resume FAILED --enqueue` queues the failed run again: a worker resumes it, the
    failed node runs again, the completed one does not."""
    fleet = fleet_of(shared_url)
    workflow = tmp_path / "flaky.yaml"
    workflow.write_text(FLAKY, encoding="utf-8")
    ran = _tether("run", str(workflow), "--input", "rid=f", "--tasks", "fleet_tasks",
                  "--db", shared_url, "--quiet", "--execution-id", "flaky-1",
                  env=fleet.env, cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    handed = _tether("resume", "flaky-1", "--enqueue", "--db", shared_url, env=fleet.env,
                     cwd=tmp_path)
    assert handed.returncode == 0, handed.stderr
    assert "left to the workers" in handed.stdout
    assert _statuses(shared_url, ["flaky-1"]) == {"flaky-1": "queued"}
    fleet.start(1)
    wait_for(_all(shared_url, ["flaky-1"], "completed"), 30, "a worker to resume it")
    assert fleet.lines(fleet.effects) == {"f first": 1, "f shaky": 1}


def test_a_recovery_that_fails_backs_off_is_shown_stuck_and_recovers_once_repaired(
        fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """A crashed run whose checkpoint holds invalid JSON: the worker's recovery fails, and
    instead of retrying at once it records the failure with a backoff (``available_at`` in
    the future, the reason in ``tether runs --stuck``); once the row is repaired, a later try
    takes the run over and continues it. SQLite only: the test edits the file directly (the
    store-level rules are in the conformance suite, on every backend)."""
    import json
    import sqlite3
    import time

    url = f"sqlite:///{tmp_path / 'stuck.db'}"
    fleet = fleet_of(url)
    workflow = tmp_path / "approve.yaml"
    workflow.write_text(APPROVAL, encoding="utf-8")
    ran = _tether("run", str(workflow), "--input", "rid=s", "--tasks", "fleet_tasks",
                  "--db", url, "--quiet", "--execution-id", "stuck-1",
                  env=fleet.env, cwd=tmp_path)
    assert ran.returncode == 4, ran.stderr
    database = sqlite3.connect(tmp_path / "stuck.db", isolation_level=None)
    [(checkpoint, state)] = database.execute(
        "SELECT checkpoint_id, state FROM checkpoints WHERE execution_id = 'stuck-1' "
        "AND status = 'interrupted'").fetchall()
    database.execute("UPDATE checkpoints SET state = '{not json' WHERE checkpoint_id = ?",
                     (checkpoint,))
    database.execute("UPDATE runs SET status = 'running', owner = NULL, queue = 'default' "
                     "WHERE execution_id = 'stuck-1'")  # as if its process had died
    corrupted_at = time.time()
    fleet.start(1)

    def recorded() -> tuple[int, float | None, str | None]:
        return database.execute("SELECT recovery_failures, available_at, blocked_reason "
                                "FROM runs WHERE execution_id = 'stuck-1'").fetchone()

    wait_for(lambda: recorded()[0] >= 1, 30, "the failed recovery to be recorded")
    failures, available_at, reason = recorded()
    assert available_at is not None and available_at >= corrupted_at + 1  # the 1 s backoff
    assert reason is not None and "recovery failed" in reason and "next try in" in reason
    stuck = _tether("runs", "--stuck", "--json", "--db", url, env=fleet.env, cwd=tmp_path)
    assert stuck.returncode == 0, stuck.stderr
    [shown] = json.loads(stuck.stdout)
    assert shown["execution_id"] == "stuck-1"
    assert "recovery failed" in json.dumps(shown)
    database.execute("UPDATE checkpoints SET state = ? WHERE checkpoint_id = ?",
                     (state, checkpoint))
    wait_for(lambda: _statuses(url, ["stuck-1"]) == {"stuck-1": "paused"}, 60,
             "a later try to take the repaired run over")
    assert recorded()[0] <= failures + 6  # backed off (1 s, 2 s, 4 s ...), not a hot loop
    database.close()
