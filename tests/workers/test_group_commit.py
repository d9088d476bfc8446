"""The worker's write group is opt-in (``Worker(group_commit=...)``, ``tether worker
--group-commit``): by default each slot commits its own fenced checkpoint writes on its own
connection, and a run's end still carries its last node's row in one statement; with the
option the slots share one ``WriteGroup`` and the worker logs its counts as it stops.

On PostgreSQL (the only store with slots). The group's own algorithm is proven in
``tests/stores/test_write_group.py``; the group through an in-process worker in
``test_slots.py``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from conftest import NODES, Fleet, chain_workflow, wait_for
from tether.runtime.runner import Runner
from tether.status import RUN_END
from tether.stores.base import Checkpointer
from tether.stores.open import open_checkpointer
from tether.workers.loop import Worker

RUNS = 16
STOLEN = "stolen"  # the run whose lease another owner takes inside its node n1


def _xmins(url: str, schema: str, execution_id: str) -> tuple[dict[str, str], str]:
    """Each checkpoint row's inserting transaction (``xmin``) by node id, and the run row's
    (its last update's)."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            f'SELECT node_id, xmin::text FROM "{schema}".checkpoints '
            "WHERE execution_id = %s", (execution_id,)).fetchall()
        (run,), = connection.execute(
            f'SELECT xmin::text FROM "{schema}".runs WHERE execution_id = %s',
            (execution_id,)).fetchall()
    return dict(rows), run


def test_without_group_commit_each_slot_commits_its_own_fenced_writes(
        pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    """RUNS 3-node runs on 4 slots, no write group: every slot's store has none (and reads
    the cancel request with its writes); each node body runs once and each checkpoint is
    written once; a run's last node row, its end row and its run row's update are one
    transaction (the end carries the last node's row), its first node's row another. The
    writes are fenced: the run whose lease another owner took during n1 writes nothing
    after n0. No group counts are logged, and the fallback metric stays 0."""
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    store = open_checkpointer(store_url)
    opened: list[Checkpointer] = []
    calls: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()
    ids: dict[str, str] = {}

    def step(rid: str, node: str, x: int = 0) -> int:
        with lock:
            calls[(rid, node)] += 1
        if (rid, node) == (STOLEN, "n1"):  # as if its lease expired meanwhile
            assert store.acquire(ids[rid], "thief", time.time() + 60, time.time() + 3600)
        return x + 1

    def connect() -> Checkpointer:
        made = open_checkpointer(store_url, create=False)
        opened.append(made)
        return made

    runner = Runner(chain_workflow(tmp_path, 3), store, {})
    for rid in [STOLEN, *(f"r{i}" for i in range(RUNS - 1))]:
        ids[rid] = runner.submit({"rid": rid})
    worker = Worker(store_url, {"step": step}, concurrency=4, poll_seconds=0.1,
                    connect=connect)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    caplog.set_level(logging.INFO, logger="tether.workers")
    try:
        thread.start()
        wait_for(lambda: worker.finished == RUNS, 60, "the worker to drive every run")
        assert len(opened) == 4
        assert all(s.write_group is None and s.reads_cancel_on_write for s in opened)
        assert worker._writes is None and worker.write_batch_fallbacks() == 0
    finally:
        worker.stop()
        thread.join(30)
    try:
        assert "checkpoint writes" not in caplog.text
        expected = {(rid, n) for rid in ids for n in ("n0", "n1", "n2")} - {(STOLEN, "n2")}
        assert set(calls) == expected and set(calls.values()) == {1}
        for rid, eid in ids.items():
            run = store.get_run(eid)
            nodes = [row.node_id for row in store.list(eid)]
            assert run is not None
            if rid == STOLEN:
                assert (run.status, run.owner, nodes) == ("running", "thief", ["n0"])
                continue
            assert run.status == "completed" and sorted(nodes) == ["n0", "n1", "n2", RUN_END]
            rows, updated = _xmins(url, schema, eid)
            assert rows["n2"] == rows[RUN_END] == updated != rows["n0"], (rid, rows)
    finally:
        store.close()


@pytest.mark.parametrize("grouped", [True, False], ids=["group-commit", "default"])
def test_tether_worker_uses_the_write_group_only_with_group_commit(
        grouped: bool, pg_schema: tuple[str, str], fleet_of: Callable[[str], Fleet],
        tmp_path: Path) -> None:
    """A real ``tether worker --concurrency 4`` drains 8 10-node runs: with
    ``--group-commit`` it logs, as it stops, that its writes (one per node, the last one
    with the run's end) went in at most as many statements; without it, no such line."""
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    fleet = fleet_of(store_url)
    store = open_checkpointer(store_url)
    try:
        runner = Runner(chain_workflow(tmp_path), store, {})
        ids = [runner.submit({"rid": f"r{i}"}) for i in range(8)]
        [proc] = fleet.start(options=("--group-commit",) if grouped else ())
        wait_for(lambda: all((run := store.get_run(eid)) is not None and
                             run.status == "completed" for eid in ids), 120,
                 "the worker to complete every run")
    finally:
        store.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    log = (tmp_path / "worker0.log").read_text(encoding="utf-8")
    lines = [line for line in log.splitlines() if "checkpoint writes:" in line]
    effects = fleet.lines(fleet.effects)
    assert set(effects.values()) == {1} and len(effects) == 8 * NODES
    if not grouped:
        assert lines == [], log
        return
    [line] = lines
    written, statements = (int(word) for word in line.split() if word.isdigit())
    assert written == 8 * NODES and 1 <= statements <= written
