"""A store damaged under tether, through the real commands: a SQLite file deleted while a run
is running fails the run (exit 1, StoreError, never "completed"); a checkpoint row holding
invalid JSON is a clear error naming the run and checkpoint (exit 1, never a traceback)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

TASKS = """\
import os
import tether

@tether.task("d.one")
def one(x: int) -> int:
    return x

@tether.task("d.delete_db")
def delete_db(x: int) -> int:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(os.environ["DB_FILE"] + suffix):
            os.remove(os.environ["DB_FILE"] + suffix)
    return x
"""

CHAIN = """\
tether: 1
name: chain
nodes:
  a: {task: d.one, with: {x: 0}}
  b: {task: d.delete_db, with: {x: 1}, needs: [a]}
  c: {task: d.one, with: {x: 2}, needs: [b]}
"""

GATE = """\
tether: 1
name: gate
nodes:
  a: {task: d.one, with: {x: 0}}
  r: {needs: [a], approval: {reason: ok}}
"""


def tether(cwd: Path, *args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    env.update(TETHER_DB=f"sqlite:///{db}", DB_FILE=str(db))
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_database_deleted_mid_run_fails_the_run_instead_of_completing(tmp_path: Path) -> None:
    (tmp_path / "tasks.py").write_text(TASKS)
    (tmp_path / "chain.yaml").write_text(CHAIN)
    db = tmp_path / "store.db"
    result = tether(tmp_path, "run", "chain.yaml", "--tasks", "tasks.py", "-q", db=db)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "was deleted or replaced" in result.stderr and str(db.name) in result.stderr
    assert "completed" not in result.stdout
    assert "Traceback" not in result.stderr


def test_a_checkpoint_holding_invalid_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tasks.py").write_text(TASKS)
    (tmp_path / "gate.yaml").write_text(GATE)
    db = tmp_path / "store.db"
    paused = tether(tmp_path, "run", "gate.yaml", "--tasks", "tasks.py", "-q",
                    "--execution-id", "e1", db=db)
    assert paused.returncode == 4, paused.stderr
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE checkpoints SET state = '{not json' WHERE node_id = 'a'")
    shown = tether(tmp_path, "show", "e1", db=db)
    assert shown.returncode == 1
    assert "run e1 holds invalid JSON" in shown.stderr
    assert "Traceback" not in shown.stderr
    for args in (("runs",), ("pending",), ("resume", "e1", "--tasks", "tasks.py", "--value",
                                           '{"approved": true}')):
        result = tether(tmp_path, *args, db=db)
        assert result.returncode in (0, 1), (args, result.stderr)
        assert "Traceback" not in result.stderr, args
