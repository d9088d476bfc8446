"""A worker slot's run end and its next claim in one transaction (``stores/pg_end_claim.py``,
issue 26, endclaim26): on PostgreSQL without a write group, the store of a slot sends the
end of its run with the claim of the slot's next run, one round trip and one commit.

Proven with a real ``Worker`` on the test database: every run is still claimed once and
completes, the claims that went with an end share that end's transaction (``xmin``), so the
transactions per run fall; a worker stopping as its run ends gives the run it claimed with
the end back (history: claimed, released) and a later worker completes it; a claim statement
that fails (a trigger in the test schema) rolls the end back, and the end is written alone
and the next run claimed alone; an end whose fence finds the lease lost still has its claimed
run driven; and the end with its claim is two prepared statements and one Sync (one round
trip, no BEGIN or COMMIT) in a libpq trace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from conftest import chain_workflow, wait_for
from tether.runtime.plans import load_plan
from tether.runtime.runner import Runner
from tether.status import RUN_END
from tether.stores.base import Checkpointer
from tether.stores.events import RunEventKind
from tether.stores.open import open_checkpointer
from tether.workers.loop import Worker

NODES = 3


@dataclass
class Setup:
    url: str
    schema: str
    store: Checkpointer
    runner: Runner
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    hooks: dict[tuple[str, str], Callable[[], None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def store_url(self) -> str:
        return f"{self.url}?schema={self.schema}"

    def step(self, rid: str, node: str, x: int = 0) -> int:
        with self.lock:
            self.calls[(rid, node)] += 1
            hook = self.hooks.pop((rid, node), None)
        if hook is not None:
            hook()
        return x + 1

    def submit(self, rids: list[str]) -> dict[str, str]:
        return {rid: self.runner.submit({"rid": rid}) for rid in rids}

    def worker(self, concurrency: int = 1) -> tuple[Worker, threading.Thread]:
        worker = Worker(self.store_url, {"step": self.step}, concurrency=concurrency,
                        poll_seconds=0.1)
        return worker, threading.Thread(target=worker.run_forever, daemon=True)

    def sql(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f'SET search_path TO "{self.schema}"')
            cursor = connection.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture
def setup(pg_schema: tuple[str, str], tmp_path: Path) -> Iterator[Setup]:
    url, schema = pg_schema
    store = open_checkpointer(f"{url}?schema={schema}")
    plan = load_plan(str(chain_workflow(tmp_path, NODES)))
    try:
        yield Setup(url, schema, store, Runner(plan, store))
    finally:
        store.close()


def _history(store: Checkpointer, eid: str) -> list[str]:
    return [e.kind.value for e in store.events(eid)
            if e.kind in (RunEventKind.CLAIMED, RunEventKind.RELEASED)]


def _claim_xmin(setup: Setup, eid: str) -> list[str]:
    """The transactions of the run's ``claimed`` events."""
    return [str(x) for x, in setup.sql(
        "SELECT xmin::text FROM run_events WHERE execution_id = %s AND kind = %s "
        "ORDER BY event_id", (eid, RunEventKind.CLAIMED.value))]


def _end_xmins(setup: Setup, eids: list[str]) -> set[str]:
    return {str(x) for x, in setup.sql(
        "SELECT xmin::text FROM checkpoints WHERE execution_id = ANY(%s) AND node_id = %s",
        (eids, RUN_END))}


def _written_xmins(setup: Setup, eids: list[str]) -> set[str]:
    """Every transaction that wrote a checkpoint row or an event of the runs (the submits'
    own, which wrote the runs' rows only, are not among them)."""
    return {str(x) for x, in setup.sql(
        "SELECT xmin::text FROM checkpoints WHERE execution_id = ANY(%s) UNION "
        "SELECT xmin::text FROM run_events WHERE execution_id = ANY(%s)", (eids, eids))}


def _trace_messages(text: str) -> list[tuple[str, str, str]]:
    """libpq trace lines as (F or B, the message's kind, its whole text): a line that does
    not start a message (a statement's text goes on over several lines) is its
    predecessor's."""
    messages: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4 and fields[1] in ("F", "B"):
            messages.append((fields[1], fields[3], line))
        elif messages:
            side, kind, whole = messages[-1]
            messages[-1] = (side, kind, f"{whole}\n{line}")
    return messages


def _stop(worker: Worker, thread: threading.Thread) -> None:
    worker.stop()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not stop"


def _drain(setup: Setup, count: int, what: str, concurrency: int = 1) -> Worker:
    """A worker that runs until it has driven ``count`` runs, then stops."""
    worker, thread = setup.worker(concurrency)
    thread.start()
    try:
        wait_for(lambda: worker.finished == count, 120, what)
    finally:
        _stop(worker, thread)
    return worker


def test_four_slots_claim_with_their_runs_ends_and_commit_once_fewer_per_run(
        setup: Setup) -> None:
    """A worker x4 drains RUNS 3-node runs: each run completes, claimed once (attempt 1),
    each node body runs once. Runs were claimed with an end, and each such run's
    ``claimed`` event shares the transaction of another run's end row; the transactions
    that wrote the runs' rows are one per node (the last with the end) and one per claim
    alone (the loop's claims, which may take several runs, and the slots' claims alone):
    fewer than NODES + 1 per run, which is what they were when every claim was alone."""
    runs = 40
    ids = setup.submit([f"r{i}" for i in range(runs)])
    worker = _drain(setup, runs, "the worker to drain the runs", concurrency=4)
    assert worker.claimed_with_end > 0
    assert worker.claimed_with_end <= worker.chained <= runs - 1
    eids = list(ids.values())
    for eid in eids:
        run = setup.store.get_run(eid)
        assert run is not None and (run.status, run.owner, run.attempt) == \
            ("completed", None, 1)
        assert _history(setup.store, eid) == ["claimed"]
    assert set(setup.calls.values()) == {1} and len(setup.calls) == runs * NODES
    ends = _end_xmins(setup, eids)
    with_end = [eid for eid in eids if _claim_xmin(setup, eid)[0] in ends]
    assert len(with_end) == worker.claimed_with_end
    claims_alone = {_claim_xmin(setup, eid)[0] for eid in eids} - ends
    assert len(claims_alone) <= runs - worker.claimed_with_end
    assert len(_written_xmins(setup, eids)) == runs * NODES + len(claims_alone) \
        < runs * (NODES + 1)


def test_a_worker_stopping_as_its_run_ends_gives_back_the_run_claimed_with_the_end(
        setup: Setup) -> None:
    """The worker is asked to stop inside the last node of its run: that run completes (no
    boundary follows its last node), its end claims the next run in its transaction, and
    the slot gives that run back at once (history: claimed, released). A second worker
    completes it; the third run was never claimed by the first."""
    ids = setup.submit(["a", "b", "c"])
    first, thread = setup.worker()
    setup.hooks[("a", f"n{NODES - 1}")] = first.stop
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not stop"
    assert first.claimed_with_end == 1 and first.chained == 0
    a, b, c = (setup.store.get_run(ids[rid]) for rid in "abc")
    assert a is not None and a.status == "completed"
    assert b is not None and (b.status, b.owner) == ("running", None)
    assert c is not None and c.status == "queued"
    assert _history(setup.store, ids["b"]) == ["claimed", "released"]
    assert _claim_xmin(setup, ids["b"])[0] in _end_xmins(setup, [ids["a"]])
    _drain(setup, 2, "the second worker to end b and c")
    for rid in "bc":
        run = setup.store.get_run(ids[rid])
        assert run is not None and run.status == "completed"
    assert _history(setup.store, ids["b"]) == ["claimed", "released", "claimed"]
    assert set(setup.calls.values()) == {1} and len(setup.calls) == 3 * NODES


def test_a_claim_statement_that_fails_rolls_the_end_back_and_both_are_written_alone(
        setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    """A trigger in the test schema raises on the first UPDATE that claims run ``b`` (a
    sequence, outside the transaction, counts its firings). ``a``'s end sent with that claim
    is rolled back with it, written alone, and the slot claims ``b`` alone: both complete,
    each claimed once, ``b``'s claim in another transaction than ``a``'s end."""
    ids = setup.submit(["a", "b"])
    setup.sql("CREATE SEQUENCE claim_trap")
    setup.sql(f"""
        CREATE FUNCTION claim_trap() RETURNS trigger AS $$
        BEGIN
            IF nextval('claim_trap') = 1 THEN
                RAISE EXCEPTION 'the claim of % is refused once', NEW.execution_id;
            END IF;
            RETURN NEW;
        END $$ LANGUAGE plpgsql;
        CREATE TRIGGER claim_trap BEFORE UPDATE ON runs FOR EACH ROW
        WHEN (OLD.status = 'queued' AND NEW.owner IS NOT NULL
              AND NEW.execution_id = '{ids["b"]}')
        EXECUTE FUNCTION claim_trap();""")
    caplog.set_level(logging.WARNING, logger="tether.stores")
    worker = _drain(setup, 2, "the worker to end both runs")
    assert setup.sql("SELECT last_value FROM claim_trap") == [(2,)]
    assert "its end with the next claim failed (RaiseException)" in caplog.text
    assert (worker.claimed_with_end, worker.chained) == (0, 1)
    for rid in "ab":
        run = setup.store.get_run(ids[rid])
        assert run is not None and (run.status, run.attempt) == ("completed", 1)
        assert _history(setup.store, ids[rid]) == ["claimed"]
    assert _claim_xmin(setup, ids["b"])[0] not in _end_xmins(setup, [ids["a"]])
    assert set(setup.calls.values()) == {1} and len(setup.calls) == 2 * NODES


def test_an_end_whose_lease_was_lost_still_drives_the_run_its_claim_took(
        setup: Setup) -> None:
    """Another owner takes ``a``'s lease inside its last node: ``a``'s end writes nothing
    (``LeaseLost``), yet the claim in its transaction took ``b``, which the slot drives to
    completion; ``a`` stays the thief's."""
    ids = setup.submit(["a", "b"])

    def steal() -> None:
        assert setup.store.acquire(ids["a"], "thief", time.time() + 60, time.time() + 3600)
    setup.hooks[("a", f"n{NODES - 1}")] = steal
    worker = _drain(setup, 2, "the worker to drive both runs")
    assert (worker.claimed_with_end, worker.chained) == (1, 1)
    a, b = setup.store.get_run(ids["a"]), setup.store.get_run(ids["b"])
    assert a is not None and (a.status, a.owner) == ("running", "thief")
    assert RUN_END not in [row.node_id for row in setup.store.list(ids["a"])]
    assert b is not None and (b.status, b.attempt) == ("completed", 1)
    assert _history(setup.store, ids["b"]) == ["claimed"]


def test_the_end_and_the_claim_are_one_round_trip_in_a_libpq_trace(
        setup: Setup, tmp_path: Path) -> None:
    """libpq traces the slot's connection (``PGconn.trace``) while a worker ends ``a`` and
    claims ``b`` with that end: from the server's ready-for-query before the end to the one
    after the claim, the client sends two prepared statements (the end, then the claim),
    each bound and executed once, and one Sync, with no BEGIN, COMMIT or other statement:
    one round trip, and the server idle (committed) after it."""
    ids = setup.submit(["a", "b"])
    path = tmp_path / "libpq.trace"
    opened: list[Checkpointer] = []

    with path.open("w") as trace:
        def connect() -> Checkpointer:
            made = open_checkpointer(setup.store_url, create=False)
            made._hot().pgconn.trace(trace.fileno())  # type: ignore[attr-defined]
            opened.append(made)
            return made
        worker = Worker(setup.store_url, {"step": setup.step}, concurrency=1,
                        poll_seconds=0.1, connect=connect)
        thread = threading.Thread(target=worker.run_forever, daemon=True)
        thread.start()
        try:
            wait_for(lambda: worker.finished == 2, 60, "the worker to end both runs")
        finally:
            _stop(worker, thread)
    assert worker.claimed_with_end == 1 and len(opened) == 1
    messages = _trace_messages(path.read_text(encoding="utf-8", errors="replace"))
    claims = {line.split('"')[1] for side, kind, line in messages
              if (side, kind) == ("F", "Parse") and '"tether_hot_' in line
              and "WITH lim AS" in line}
    assert len(claims) == 1, claims  # prepared once on the connection
    claim = f'"{claims.pop()}"'
    sent_with = [i for i, (side, kind, line) in enumerate(messages)
                 if (side, kind) == ("F", "Bind") and claim in line]
    assert sent_with, "no end went with a claim"
    for at in sent_with:  # a's end with b's claim; b's end with an empty claim
        start = max(i for i in range(at) if messages[i][1] == "ReadyForQuery") + 1
        ready = next(i for i in range(at, len(messages)) if messages[i][1] == "ReadyForQuery")
        block = messages[start:ready + 1]
        sent = [kind for side, kind, _ in block if side == "F" and kind != "Describe"]
        assert sent == ["Bind", "Execute", "Bind", "Execute", "Sync"], sent
        binds = [line for side, kind, line in block if (side, kind) == ("F", "Bind")]
        assert claim not in binds[0] and claim in binds[1]
        assert messages[ready][2].rstrip().endswith("I")  # committed, idle
        assert not any('"BEGIN"' in line or '"COMMIT"' in line for _, _, line in block)
    b = setup.store.get_run(ids["b"])
    assert b is not None and b.status == "completed"
