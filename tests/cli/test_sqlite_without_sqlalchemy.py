"""``tether run`` and the in-place ``tether resume`` on a current SQLite file import no
SQLAlchemy, and store exactly what they stored when every statement came from SQLAlchemy
(issue 25, fast start: the statements are compiled ahead of time, stores/sqlite_statements.py).

The real command runs in a subprocess through a small wrapper that reports, at exit, whether
``sqlalchemy`` was imported; with ``plain`` the wrapper first empties the SQLite store's
ready statements, so that every statement is built and compiled by SQLAlchemy as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tether.stores.open import open_checkpointer

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "examples" / "refund" / "refund.yaml"
TASKS = ROOT / "examples" / "refund" / "tasks.py"

_WRAPPER = """
import json, runpy, sys
if sys.argv[1] == "plain":
    from tether.stores.sqlite import SQLiteCheckpointer
    SQLiteCheckpointer.ready_statements = {}
sys.argv = ["tether", *sys.argv[2:]]
try:
    runpy.run_module("tether", run_name="__main__")
finally:
    print(json.dumps({"sqlalchemy": "sqlalchemy" in sys.modules}), file=sys.stderr)
"""


def _tether(mode: str, cwd: Path, *args: str, code: int = 0) -> tuple[dict[str, Any], bool]:
    """Run ``tether ARGS --json`` (``mode``: ``ready`` or ``plain``), which exits ``code``;
    its JSON result and whether it imported SQLAlchemy."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
           "TETHER_EXAMPLE_LEDGER": str(cwd / f"ledger-{mode}.jsonl")}
    done = subprocess.run([sys.executable, "-c", _WRAPPER, mode, *args, "--json"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == code, done.stderr
    imported = json.loads(done.stderr.strip().splitlines()[-1])["sqlalchemy"]
    return json.loads(done.stdout), bool(imported)


def _session(mode: str, cwd: Path) -> tuple[str, list[dict[str, Any]], list[bool]]:
    """A new database, then on it: a run that waits at its approval, its in-place resume to
    the end, and a run to completion. The database's URL, the commands' results and whether
    each of the last three imported SQLAlchemy."""
    db = f"sqlite:///{cwd / f'{mode}.db'}"
    run = ("run", str(REFUND), "--tasks", str(TASKS), "--db", db, "-i", "account=ACC-42")
    first, _ = _tether(mode, cwd, *run, "-i", "amount=20")  # creates the database
    waiting, paused_import = _tether(mode, cwd, *run, "-i", "amount=500", code=4)
    assert waiting["status"] == "paused"
    resumed, resume_import = _tether(mode, cwd, "resume", waiting["execution_id"], "--tasks",
                                     str(TASKS), "--db", db, "--value", '{"approved": true}')
    again, run_import = _tether(mode, cwd, *run, "-i", "amount=30")
    return db, [first, waiting, resumed, again], [paused_import, resume_import, run_import]


def _history(db: str) -> list[Any]:
    """What the store holds of each run, without what differs from one run to the next (ids,
    times, owner tokens)."""
    store = open_checkpointer(db, create=False)
    try:
        runs = sorted(store.find_runs(limit=10), key=lambda r: r.created_at)
        return [(run.workflow, run.status, run.inputs, run.error, run.attempt,
                 [(r.node_id, r.node_index, r.step_type, r.status, r.is_full, r.node_input,
                   r.node_output, r.iteration_counters, r.interrupt_reason,
                   r.interrupt_context, r.agent_path) for r in store.rows(run.execution_id)],
                 [(e.kind, e.actor, e.channel) for e in store.events(run.execution_id)],
                 [(d.node_id, d.value, d.resolver) for d in store.decisions(run.execution_id)],
                 store.list_pending(run.execution_id))
                for run in runs]
    finally:
        store.close()


def _without_ids(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("execution_id", "checkpoint_id")}


def test_run_and_resume_in_place_import_no_sqlalchemy_and_store_what_they_did(
        tmp_path: Path) -> None:
    db, results, imported = _session("ready", tmp_path)
    assert imported == [False, False, False]
    assert [r["status"] for r in results] == ["completed", "paused", "completed", "completed"]
    plain_db, plain_results, plain_imported = _session("plain", tmp_path)
    assert plain_imported == [True, True, True]  # (the wrapper's "plain" does compile)
    assert [_without_ids(r) for r in results] == [_without_ids(r) for r in plain_results]
    assert _history(db) == _history(plain_db)
