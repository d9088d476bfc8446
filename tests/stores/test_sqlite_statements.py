"""The SQLite store's statements compiled ahead of time (stores/sqlite_statements.py, issue 25).

The generated file must be what SQLAlchemy compiles now (regenerate it with ``make
sqlite-statements``); a store opened on a current database runs those statements without
importing SQLAlchemy, maps the driver's errors as before, and still compiles a statement the
file lacks (importing SQLAlchemy then).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tether.stores import sqlite_statements_gen
from tether.stores.records import CheckpointRow
from tether.stores.run_record import RunRecord
from tether.stores.sqlite import SQLiteCheckpointer
from tether.stores.sqlite_statements import STATEMENTS

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_statements_are_what_sqlalchemy_compiles_now() -> None:
    compiled = sqlite_statements_gen.compiled_statements()
    assert compiled == STATEMENTS, "stale: run `make sqlite-statements`"
    assert sqlite_statements_gen.render(compiled) == sqlite_statements_gen.TARGET.read_text()


def test_the_store_uses_the_generated_statements() -> None:
    assert SQLiteCheckpointer.ready_statements is STATEMENTS
    assert {"schema_version", "get_run", "put", "put_fenced", "claim", "acquire",
            "set_status", "create_run", "store_plan", "record_pending"} <= set(STATEMENTS)


_PROBE = """
import json, sqlite3, sys, time
from datetime import UTC, datetime
from tether.errors import ExecutionExists, StoreError
from tether.stores.events import RunEvent, RunEventKind
from tether.stores.open import open_checkpointer
from tether.stores.records import CheckpointRow, PendingInterrupt
from tether.stores.run_record import RunRecord

path, run_id = sys.argv[1], sys.argv[2]
store = open_checkpointer(f"sqlite:///{path}?busy_timeout=0.2", create=False)
report = {"found": store.get_run(run_id).workflow}
at = datetime.now(UTC)
try:  # the execution id is taken: the store's own error
    store.create_run(RunRecord(run_id, "wf", "fp", "queued", {}, at, at), "{}")
except ExecutionExists as exc:
    report["exists"] = type(exc).__name__
pending = PendingInterrupt(run_id, "c1", "review", "", "approval", {}, at)
try:  # a primary key taken: sqlite3's IntegrityError, as a StoreError
    store.record_interrupt(CheckpointRow(run_id, "c0"), pending, None)
except StoreError as exc:
    report["duplicate"] = str(exc)
holder = sqlite3.connect(path)
holder.execute("BEGIN IMMEDIATE")
try:  # another connection holds the write lock past the busy timeout
    store.add_event(RunEvent(run_id, RunEventKind.CANCEL_REQUESTED, time.time()))
except StoreError as exc:
    report["locked"] = str(exc)
holder.rollback()
report["sqlalchemy"] = "sqlalchemy" in sys.modules
report["workers"] = store.list_workers()
report["sqlalchemy_after"] = "sqlalchemy" in sys.modules
store.close()
print(json.dumps(report))
"""


def test_a_current_database_is_used_without_sqlalchemy_and_errors_map_as_before(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointer(path)  # creates the schema (with SQLAlchemy, here)
    at = datetime.now(UTC)
    run_id = "01900000-0000-7000-8000-00000000000a"
    store.create_run(RunRecord(run_id, "wf", "fp", "running", {}, at, at), "{}")
    store.put(CheckpointRow(run_id, "c0", created_at=time.time()))
    store.close()
    done = subprocess.run([sys.executable, "-c", _PROBE, str(path), run_id],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["found"] == "wf" and report["exists"] == "ExecutionExists"
    assert f"pausing run {run_id}: UNIQUE constraint failed" in report["duplicate"]
    assert "stayed locked for its busy timeout (0.2 s)" in report["locked"]
    assert report["sqlalchemy"] is False
    # a statement the file lacks (the workers' list) is compiled when first used
    assert report["workers"] == [] and report["sqlalchemy_after"] is True
