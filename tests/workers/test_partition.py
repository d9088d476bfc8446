"""The network-partition proof: `tether worker` processes on separate hosts (network
namespaces joined by veth pairs, see netns.py) talking to PostgreSQL over their links; one
worker's link is cut while it holds runs, another worker takes them over, the link comes
back, and the cut-off worker writes nothing (fencing).

PostgreSQL only (SQLite has no network). Needs root and network namespaces: skipped, with
the reason, where they cannot be made; CI runs as root, so it runs there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from netns import Hosts, unavailable

from conftest import NODES, Fleet, chain_workflow, wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

RUNS = 2
LEASE = "2"
TIMEOUTS = "&connect_timeout=2"
"""A host's connections give up on a silent peer after 2 s (the store derives libpq's
``tcp_user_timeout`` and keepalives from ``connect_timeout``), within A's 2 s lease."""


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    with Hosts(2) as made:
        yield made


@pytest.fixture
def pg_store_url(pg_schema: tuple[str, str]) -> str:
    url, schema = pg_schema
    return f"{url}?schema={schema}"


def _start_on(fleet: Fleet, hosts: Hosts, i: int, name: str, gate: Path | None,
              ) -> tuple[subprocess.Popen[bytes], Path]:
    """A `tether worker` inside host ``i``, its store URL as that host sees the server."""
    env = {**fleet.env, **({"TETHER_TEST_GATE": str(gate)} if gate else {})}
    env.pop("TETHER_LEASE_SECONDS", None)  # the lease comes from --lease
    path = fleet.directory / f"{name}.log"
    with open(path, "wb") as log:
        proc = subprocess.Popen(hosts.command(i, [
            sys.executable, "-m", "tether", "worker", "--db",
            hosts.translate(i, fleet.url) + TIMEOUTS,
            "--tasks", "fleet_tasks", "--concurrency", "4", "--lease", LEASE,
            "--poll", "0.1"]), env=env, cwd=fleet.directory, stdout=log,
            stderr=subprocess.STDOUT)
    fleet.procs.append(proc)
    return proc, path


def _rows(url: str, ids: list[str]) -> dict[str, object]:
    """Everything the store holds about the runs, as comparable values: each checkpoint row
    (node, step type, status, id), each run_end, decisions, idempotency records, and each
    run row (status, owner, attempt, lease)."""
    import psycopg

    server, _, schema = url.partition("?schema=")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        mine = "WHERE execution_id = ANY(%s)"
        return {
            "checkpoints": sorted(conn.execute(
                "SELECT execution_id, node_id, step_type, status, checkpoint_id "
                "FROM checkpoints " + mine, [ids]).fetchall()),
            "decisions": sorted(conn.execute(
                "SELECT execution_id, checkpoint_id, value FROM decisions " + mine,
                [ids]).fetchall()),
            "idempotent": sorted(conn.execute(
                "SELECT execution_id, key, value FROM idempotency_cache " + mine,
                [ids]).fetchall()),
            "runs": sorted(conn.execute(
                "SELECT execution_id, status, owner, attempt, lease_until FROM runs " + mine, [ids]
            ).fetchall()),
        }


def _statuses(url: str, ids: list[str]) -> set[str]:
    store = open_checkpointer(url, create=False)
    try:
        return {run.status for eid in ids if (run := store.get_run(eid)) is not None}
    finally:
        store.close()


def test_a_cut_off_worker_is_fenced_out_and_another_finishes_its_runs(
        pg_store_url: str, hosts: Hosts, fleet_of: Callable[[str], Fleet],
        tmp_path: Path) -> None:
    """Worker A (host 0) claims 2 runs of a 10-node chain and is parked inside node n5 of
    each (its gate is closed); worker B (host 1) is idle. A's link is cut (packets dropped,
    nothing reset). After A's 2 s lease expires in the database, B claims both runs and
    finishes them from A's last checkpoint. A, still cut off, stops each run by its own
    clock (LeaseLost: "could not be renewed in time" in its log) and keeps running. The
    store is then snapshotted; A's gate is opened and its link restored; B is stopped and
    A claims and finishes a new run (so A has been connected again for a whole run): the
    store rows of the two runs are exactly as before: not one checkpoint, run_end, decision,
    idempotency record or run-row change from A after it lost its leases.

    Node bodies: n0..n4 ran once (in A), n6..n9 once (in B). n5 ran in both processes:
    A's body was in flight when the link was cut and B ran it again after the takeover
    (at-least-once per node, as for any crash). A's n5 body went on once its gate opened
    and appended its effect line a second time, but the @idempotent call inside it returned
    the result B had recorded (every @idempotent body ran once), and A's n5 result was never
    checkpointed: each node has exactly one completed checkpoint, each run one run_end."""
    fleet = fleet_of(pg_store_url)
    workflow = chain_workflow(tmp_path)
    store = open_checkpointer(pg_store_url)
    runner = Runner(workflow, store, {})
    ids = [runner.submit({"rid": f"r{i}"}) for i in range(RUNS)]
    store.close()

    gate = tmp_path / "gate-a"
    started = Path(str(gate) + ".started")
    worker_a, log_a = _start_on(fleet, hosts, 0, "worker-a", gate)
    wait_for(lambda: started.exists() and len(started.read_text().split()) == RUNS, 60,
             "worker A to hold every run inside n5")
    worker_b, log_b = _start_on(fleet, hosts, 1, "worker-b", None)
    fleet.wait_registered(2)

    hosts.cut(0)
    wait_for(lambda: _statuses(pg_store_url, ids) == {"completed"}, 60,
             "worker B to take the runs over and finish them")
    assert all(f"run {eid} (recovered): completed" in log_b.read_text() for eid in ids)
    wait_for(lambda: log_a.read_text().count("lost its lease") == RUNS, 60,
             "worker A, still cut off, to stop each run by its own clock")
    assert log_a.read_text().count("could not be renewed in time") == RUNS
    assert worker_a.poll() is None, "worker A exited after losing its leases"
    before = _rows(pg_store_url, ids)

    gate.write_text("open")  # A's parked n5 bodies return
    hosts.restore(0)
    wait_for(lambda: all(fleet.lines(fleet.effects)[f"{eid} n5"] == 2
                         for eid in [f"r{i}" for i in range(RUNS)]), 30,
             "A's n5 bodies to return")
    # A goes on working: with B stopped, a new run is claimed and finished by A, so A has
    # been connected again for a whole run before the store is compared.
    worker_b.send_signal(signal.SIGTERM)
    assert worker_b.wait(30) == 0
    store = open_checkpointer(pg_store_url)
    late = Runner(workflow, store, {}).submit({"rid": "late"})
    store.close()
    wait_for(lambda: _statuses(pg_store_url, [late]) == {"completed"}, 60,
             "worker A to claim and finish a new run")
    assert f"run {late} (queued): completed" in log_a.read_text()
    assert _rows(pg_store_url, ids) == before, \
        "the cut-off worker wrote to the store after losing its lease"
    assert log_a.read_text().count("lost its lease") == RUNS

    checkpoints, runs = before["checkpoints"], before["runs"]
    assert isinstance(checkpoints, list) and isinstance(runs, list)
    for eid in ids:
        steps = sorted((node, step, status) for e, node, step, status, _ in checkpoints
                       if e == eid)
        assert steps == sorted([(f"n{n}", "node", "completed") for n in range(NODES)]
                               + [("run_end", "run_end", "completed")])
    assert {(status, owner, attempt) for _, status, owner, attempt, _ in runs} == \
        {("completed", None, 2)}
    assert before["decisions"] == []
    rids = [f"r{i}" for i in range(RUNS)]
    assert fleet.lines(fleet.effects) == {
        f"{rid} n{n}": 2 if n == 5 and rid != "late" else 1
        for rid in [*rids, "late"] for n in range(NODES)}
    assert fleet.lines(fleet.idempotent) == {
        f"{rid} n{n}": 1 for rid in [*rids, "late"] for n in range(NODES)}
    worker_a.send_signal(signal.SIGTERM)
    assert worker_a.wait(30) == 0
