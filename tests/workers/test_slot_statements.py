"""A worker's slots on PostgreSQL compile each statement once per process: the stores they
open from the worker's URL share the worker's own store's compiled statements
(``Checkpointer.share_statements``), instead of compiling the claim and the fenced writes
once per slot (tens of milliseconds of CPU each, paid when the slots first ran).

Counted by the texts compiled while the worker runs (the real compiler, wrapped to record
its output), never by timing.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import tether.stores.statements as statements
from conftest import chain_workflow, wait_for
from tether.runtime.plans import load_plan
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
from tether.workers.loop import Worker

SLOTS = 4
VERSION_CHECK = "SELECT schema_version.version"


@pytest.mark.parametrize("opened", ["from its url", "by its connect callable"])
def test_the_slots_of_a_worker_compile_each_statement_once(
        opened: str, pg_schema: tuple[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the worker opens its slots' stores from its URL or through a ``connect``
    callable (as ``tether worker`` does)."""
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    store = open_checkpointer(store_url)
    calls: list[str] = []
    gate = threading.Barrier(SLOTS, timeout=60)

    def step(rid: str, node: str, x: int = 0) -> int:
        if node == "n0" and int(rid[1:]) < SLOTS:
            gate.wait()  # the first SLOTS runs are driven at once, one per slot
        calls.append(rid)
        return x + 1

    compiled: list[str] = []
    compile_statement = statements.compile_statement

    def recorded(element: object, dialect: object) -> statements.Compiled:
        result = compile_statement(element, dialect)  # type: ignore[arg-type]
        compiled.append(result[0])
        return result

    try:
        plan = load_plan(str(chain_workflow(tmp_path, 2)))
        runner = Runner(plan, store)
        runs = [runner.submit({"rid": f"r{i}"}) for i in range(2 * SLOTS)]
        monkeypatch.setattr(statements, "compile_statement", recorded)
        connect = (lambda: open_checkpointer(store_url)) if opened != "from its url" else None
        worker = Worker(store_url, {"step": step}, concurrency=SLOTS, poll_seconds=0.1,
                        connect=connect)
        thread = threading.Thread(target=worker.run_forever, daemon=True)
        thread.start()
        try:
            wait_for(lambda: worker.finished == len(runs), 120, "the worker to drain the runs")
        finally:
            worker.stop()
            thread.join(60)
        monkeypatch.setattr(statements, "compile_statement", compile_statement)
        assert not thread.is_alive(), "the worker did not stop"
        for eid in runs:
            run = store.get_run(eid)
            assert run is not None and run.status == "completed"
        assert len(calls) == 2 * len(runs)  # every node of every run ran once
        # Each store reads the schema's version as it opens, before it can share: that one
        # small statement is compiled per store; nothing else is.
        twice = {text[:60]: n for text, n in Counter(compiled).items()
                 if n > 1 and not text.startswith(VERSION_CHECK)}
        assert any("FOR UPDATE SKIP LOCKED" in text for text in compiled)  # the claim
        assert compiled and not twice, f"compiled more than once: {twice}"
    finally:
        store.close()


def test_a_store_of_another_class_keeps_its_own_statements(
        pg_schema: tuple[str, str], tmp_path: Path) -> None:
    """Sharing is between stores of one class only: a SQLite store handed a PostgreSQL
    store keeps its own compiled statements and still works."""
    url, schema = pg_schema
    pg = open_checkpointer(f"{url}?schema={schema}")
    lite = open_checkpointer(f"sqlite:///{tmp_path / 'own.db'}")
    try:
        lite.share_statements(pg)
        plan = load_plan(str(chain_workflow(tmp_path, 2)))
        result = Runner(plan, lite, {"step": lambda rid, node, x=0: x + 1}).run({"rid": "a"})
        assert result.status == "completed"
    finally:
        lite.close()
        pg.close()


def test_a_store_sharing_another_schemas_statements_writes_in_its_own_schema(
        pg_schema: tuple[str, str], tmp_path: Path) -> None:
    """Statements compile without the schema (it is each connection's search path), so a
    store in schema B that shares the statements of a store in schema A runs its runs in B
    and leaves A untouched."""
    url, schema = pg_schema
    first = open_checkpointer(f"{url}?schema={schema}")
    second = open_checkpointer(f"{url}?schema={schema}_b")
    try:
        plan = load_plan(str(chain_workflow(tmp_path, 2)))
        tasks = {"step": lambda rid, node, x=0: x + 1}
        Runner(plan, first, tasks).run({"rid": "warm"})  # first compiles what a run needs
        second.share_statements(first)
        result = Runner(plan, second, tasks).run({"rid": "b"})
        assert result.status == "completed"
        assert second.get_run(result.execution_id) is not None
        assert first.get_run(result.execution_id) is None
        assert len(first.list_runs()) == 1
    finally:
        first.close()
        second.close()
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}_b" CASCADE')
