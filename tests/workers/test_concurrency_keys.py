"""Concurrency keys under races, with real `tether worker` processes on SQLite and PostgreSQL.

16 submissions of one key race from 16 threads (each with its own store connection) while
3 workers claim; one worker is killed with SIGKILL in the middle of a node. Task bodies
append ``start RID NODE PID`` / ``end RID NODE PID`` with O_APPEND (the file's order is the
order of the events across processes); the test appends ``killed PID`` right after the kill,
which ends that worker's unfinished body. A sampler reads the store all along. Checked:

- never more than ``limit`` runs of the key ``running`` in any sample of the store, and never
  more than ``limit`` runs' bodies open at once in the records;
- a cancelled run stopped at a node boundary: each of its bodies that started also ended
  (unless the killed worker ran it), and its nodes form a prefix of the chain;
- nothing ran twice: a node's body ended at most once per run, except a node the killed
  worker was running (it ran again on the run's next attempt: the kill is what repeats it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from keyproof import Sampler

from conftest import Fleet, wait_for
from tether.errors import ConcurrencyLimitReached
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

NODES = ("n0", "n1", "n2")
SUBMISSIONS = 16

WORKFLOW = """\
tether: 1
name: keyed
inputs:
  rid: {{type: string}}
  branch: {{type: string}}
concurrency:
  key: "{{{{ inputs.branch }}}}"
  limit: {limit}
  on_conflict: {policy}
nodes:
  n0: {{task: keyed_hold, with: {{rid: "{{{{ inputs.rid }}}}", node: n0}}}}
  n1: {{task: keyed_hold, needs: n0, with: {{rid: "{{{{ inputs.rid }}}}", node: n1}}}}
  n2: {{task: keyed_hold, needs: n1, with: {{rid: "{{{{ inputs.rid }}}}", node: n2}}}}
"""


def _submit_racing(url: str, workflow: Path) -> tuple[list[str], int]:
    """16 threads submit at once (a barrier); the ids in submission order, and how many were
    rejected."""
    barrier = threading.Barrier(SUBMISSIONS)

    def one(i: int) -> str | None:
        store = open_checkpointer(url, create=False)
        try:
            runner = Runner(workflow, store, {})
            barrier.wait()
            try:
                return runner.submit({"rid": f"r{i:02d}", "branch": "main"})
            except ConcurrencyLimitReached:
                return None
        finally:
            store.close()

    with ThreadPoolExecutor(SUBMISSIONS) as pool:
        results = list(pool.map(one, range(SUBMISSIONS)))
    return [r for r in results if r is not None], results.count(None)


def _open_bodies(records: list[str]) -> int:
    """The most bodies open at once in the records (a ``killed PID`` line closes that
    worker's open bodies)."""
    open_now: Counter[str] = Counter()  # by pid
    most = 0
    for line in records:
        kind, *rest = line.split()
        if kind == "killed":
            open_now[rest[0]] = 0
        else:
            open_now[rest[2]] += 1 if kind == "start" else -1
        most = max(most, sum(open_now.values()))
    return most


def _run_policy(url: str, fleet: Fleet, tmp_path: Path, policy: str, limit: int,
                ) -> tuple[dict[str, str], list[str], int, Sampler, int, str]:
    """Start 3 workers and the sampler, race the submissions, kill -9 the worker of the
    first body, wait until nothing is queued or running; return each stored run's status by
    rid, the records, the rejections, the sampler, the killed pid and the rid of the run
    last in the key's line."""
    workflow = tmp_path / "keyed.yaml"
    workflow.write_text(WORKFLOW.format(limit=limit, policy=policy), encoding="utf-8")
    fleet.env["TETHER_TEST_HOLD"] = "0.3"
    procs = fleet.start(3, concurrency=2)
    fleet.wait_registered(3)
    sampler = Sampler(url)
    sampler.start()
    ids, rejected = _submit_racing(url, workflow)
    wait_for(lambda: fleet.effects.exists() and "start" in fleet.effects.read_text(), 60,
             "a body to start")
    pid = fleet.effects.read_text().split("\n")[0].split()[3]
    victim = next(p for p in procs if str(p.pid) == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    fd = os.open(fleet.effects, os.O_WRONLY | os.O_APPEND)
    os.write(fd, f"killed {pid}\n".encode())
    os.close(fd)
    store = open_checkpointer(url, create=False)
    try:
        wait_for(lambda: all((r := store.get_run(i)) is not None and r.status not in (
            "queued", "running") for i in ids), 180, "every run to end")
        runs = {i: store.get_run(i) for i in ids}
    finally:
        store.close()
        sampler.halt.set()
        sampler.join()
    stored = [r for r in runs.values() if r is not None]
    by_rid = {r.inputs["rid"]: str(r.status) for r in stored}
    last = max(stored, key=lambda r: (r.created_at, r.execution_id)).inputs["rid"]
    return by_rid, fleet.effects.read_text().splitlines(), rejected, sampler, int(pid), last


def _check_common(records: list[str], statuses: dict[str, str], sampler: Sampler,
                  limit: int, killed: int) -> None:
    assert sampler.samples > 10 and sampler.most <= limit
    assert _open_bodies(records) <= limit
    ends = Counter((r.split()[1], r.split()[2]) for r in records if r.startswith("end"))
    killed_bodies = {(r.split()[1], r.split()[2]) for r in records
                     if r.startswith("start") and r.split()[3] == str(killed)}
    assert all(n == 1 for body, n in ends.items() if body not in killed_bodies), ends
    for rid, status in statuses.items():
        done = [node for node in NODES if ends[(rid, node)]]
        assert done == list(NODES[:len(done)])  # a prefix of the chain
        if status == "completed":
            assert len(done) == len(NODES)
        else:
            assert status == "cancelled", (rid, status)
            started = {r.split()[2] for r in records
                       if r.startswith("start") and r.split()[1] == rid
                       and int(r.split()[3]) != killed}
            assert started <= set(done), (rid, started, done)  # stopped at a boundary


@pytest.mark.parametrize("policy", ["queue", "cancel_running", "cancel_new", "reject"])
def test_sixteen_racing_submissions_of_one_key_with_three_workers_and_a_kill(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path,
        policy: str) -> None:
    limit = 2 if policy == "queue" else 1
    fleet = fleet_of(shared_url)
    statuses, records, rejected, sampler, killed, last = _run_policy(
        shared_url, fleet, tmp_path, policy, limit)
    _check_common(records, statuses, sampler, limit, killed)
    counts = Counter(statuses.values())
    if policy == "queue":
        assert counts == Counter({"completed": SUBMISSIONS}) and sampler.most == limit
    elif policy == "cancel_new":
        assert counts["completed"] >= 1 and sum(counts.values()) == SUBMISSIONS
        ran = {r.split()[1] for r in records if r.startswith("start")}
        assert {rid for rid, s in statuses.items() if s == "cancelled"}.isdisjoint(ran)
    elif policy == "reject":
        assert rejected >= 1 and len(statuses) + rejected == SUBMISSIONS
        assert counts["completed"] == len(statuses)
    else:  # cancel_running: the last in the key's line survives; older ones may be cancelled
        assert len(statuses) == SUBMISSIONS and statuses[last] == "completed"
        assert counts["cancelled"] >= 1
