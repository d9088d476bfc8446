"""``tether submit`` on a current SQLite file skips SQLAlchemy and the runtime
(``stores/sqlite_submit.py``, issue 25) and must be indistinguishable from the full store:
the same rows in every table, the same output and exit codes, the same errors, and runs that
resume to the same end.

The full store is reached through the real command with an equivalent URL that is not plain
(``?durability=normal``: the store the plain URL opens, but read by ``parse_store_url``).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.stores.sqlite import SQLiteCheckpointer

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "examples" / "refund" / "refund.yaml"
TASKS = REFUND.parent / "tasks.py"

_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")
_EPOCH = re.compile(r"\b1[5-9]\d{8}(\.\d+)?\b")
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{19,}\b")  # event ids, owner tokens
_PROCESS = re.compile(r"@[^/\s']+/\d+/\d+/")  # an owner's host and process
_MS = re.compile(r'("(?:duration_ms|elapsed_ms|ms|seconds|took)":)\s*[0-9.e-]+')


def _normal(value: Any) -> Any:
    """A value with what differs between two identical histories (ids, clocks) masked."""
    if isinstance(value, float) and value > 1e9:
        return "<time>"
    if isinstance(value, str):
        value = _ID.sub("<id>", value)
        value = _STAMP.sub("<stamp>", value)
        value = _EPOCH.sub("<time>", value)
        value = _PROCESS.sub("@<process>/", _HEX.sub("<hex>", value))
        return _MS.sub(r"\1<ms>", value)
    return value


def dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, masked and sorted."""
    with sqlite3.connect(db) as connection:
        tables = [r[0] for r in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {table: sorted((tuple(_normal(v) for v in row) for row in connection.execute(
            f'SELECT * FROM "{table}"')), key=repr) for table in tables}


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
           "TETHER_EXAMPLE_LEDGER": str(cwd / "ledger.jsonl")}
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, str, Path, str]:
    """Two current SQLite files: one reached by a plain URL (the fast path), one by the
    equivalent URL that the full store reads."""
    fast, full = tmp_path / "fast.db", tmp_path / "full.db"
    for db in (fast, full):
        SQLiteCheckpointer(db).close()
    return fast, f"sqlite:///{fast}", full, f"sqlite:///{full}?durability=normal"


def _both(stores: tuple[Path, str, Path, str], *args: str, cwd: Path,
          ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    _, fast_url, _, full_url = stores
    return (tether(*[fast_url if a == "DB" else a for a in args], cwd=cwd),
            tether(*[full_url if a == "DB" else a for a in args], cwd=cwd))


def _said(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    """A command's exit code and output, with the store's URL, ids and times masked."""
    def masked(text: str) -> str:
        text = re.sub(r"'?sqlite:///\S*(fast|full)\.db(\?durability=normal)?'?", "DB", text)
        return str(_normal(re.sub(r"\(\d+ ms\)", "(ms)", text)))
    return done.returncode, masked(done.stdout), masked(done.stderr)


def _same(fast: subprocess.CompletedProcess[str], full: subprocess.CompletedProcess[str],
          ) -> None:
    assert _said(fast) == _said(full)


def test_both_paths_write_the_same_rows_and_resume_alike(
        stores: tuple[Path, str, Path, str], tmp_path: Path) -> None:
    fast_db, _, full_db, _ = stores
    submits = [
        ("submit", str(REFUND), "--db", "DB", "-i", "account=ACC-42", "-i", "amount=500",
         "--id", "refund-1"),
        ("submit", str(REFUND), "--db", "DB", "-i", "account=ACC-42", "-i", "amount=20",
         "--queue", "slow", "--priority", "7"),
        ("submit", str(REFUND), "--db", "DB", "--inputs-file", "IN"),
        ("submit", str(REFUND.with_suffix(".flow")), "--db", "DB", "-i", "account=ACC-42",
         "-i", "amount=2"),
        # the same dedup key again: nothing is submitted, the first run is printed
        ("submit", str(REFUND), "--db", "DB", "-i", "account=ACC-42", "-i", "amount=1",
         "--id", "refund-1"),
    ]
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"account": "ACC-42", "amount": 30}))
    for argv in submits:
        fast, full = _both(stores, *[str(inputs) if a == "IN" else a for a in argv],
                           cwd=tmp_path)
        assert fast.returncode == 0, fast.stderr
        _same(fast, full)
    assert "already existed (queued)" in fast.stderr
    assert dump(fast_db) == dump(full_db)
    # each run resumed by the same commands ends the same way, in the same rows
    _same(*_both(stores, "resume", "refund-1", "--tasks", str(TASKS), "--db", "DB",
                 cwd=tmp_path))
    _same(*_both(stores, "resume", "refund-1", "--tasks", str(TASKS), "--db", "DB",
                 "--value", '{"approved": true}', cwd=tmp_path))
    assert dump(fast_db) == dump(full_db)
    with sqlite3.connect(fast_db) as connection:
        assert connection.execute("SELECT status FROM runs WHERE execution_id = "
                                  "'refund-1'").fetchone() == ("completed",)


@pytest.mark.parametrize(("argv", "code", "says"), [
    (("-i", "account=ACC-42"), 1, "missing required input 'amount'"),
    (("-i", "account=ACC-42", "-i", "amount=1", "-i", "extra=1"), 1, "unknown input"),
    (("-i", "account=ACC-42", "-i", "amount=x"), 2, "not valid JSON"),
    (("-i", "account=ACC-42", "-i", "amount=1", "--id", "a b"), 2, "--id"),
    (("-i", "account=ACC-42", "-i", "amount=1", "--queue", " "), 2, "queue"),
])
def test_both_paths_refuse_alike(stores: tuple[Path, str, Path, str], tmp_path: Path,
                                 argv: tuple[str, ...], code: int, says: str) -> None:
    fast_db, _, full_db, _ = stores
    fast, full = _both(stores, "submit", str(REFUND), "--db", "DB", *argv, cwd=tmp_path)
    _same(fast, full)
    assert fast.returncode == code and says in fast.stderr, fast.stderr
    assert dump(fast_db) == dump(full_db)


def test_a_dedup_key_of_another_workflow_is_refused_alike(
        stores: tuple[Path, str, Path, str], tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(REFUND.read_text().replace("name: refund", "name: other", 1))
    assert "name: other" in other.read_text()
    first = _both(stores, "submit", str(other), "--db", "DB", "-i", "account=A", "-i",
                  "amount=1", "--id", "taken", cwd=tmp_path)
    assert first[0].returncode == 0, first[0].stderr
    fast, full = _both(stores, "submit", str(REFUND), "--db", "DB", "-i", "account=A", "-i",
                       "amount=1", "--id", "taken", cwd=tmp_path)
    _same(fast, full)
    assert fast.returncode != 0 and "other" in fast.stderr, fast.stderr
    assert dump(stores[0]) == dump(stores[2])
