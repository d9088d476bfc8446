"""The SQLAlchemy-free answer on SQLite (``stores/sqlite_answer.py``, issue 25): its statements
are the ones the SQLite store compiles and runs on the full path, its constants are the
runtime's, and it steps aside (None, nothing written) whenever the full path must act.

That both paths write the same rows, say the same and refuse alike through the real
command is in ``tests/cli/test_resume_paths.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether.compiler.plan import PLAN_FORMAT
from tether.runtime.runner import Runner
from tether.stores import lease_env, sql_text, sqlite_answer
from tether.stores.sqlite import SQLiteCheckpointer
from tether.workers import claims

WORKFLOW = """\
tether: 1
name: ask
nodes:
  review:
    approval:
      reason: ok?
      form: {approved: {type: boolean}}
"""


def _paused(tmp_path: Path, run_id: str = "run-0001") -> Path:
    """A SQLite file with run ``run_id`` paused at its approval (through the full store)."""
    db = tmp_path / "runs.db"
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(WORKFLOW)
    store = SQLiteCheckpointer(db)
    result = Runner(str(workflow), store, {}).run({}, run_id)
    assert result.status == "paused"
    store.close()
    return db


def test_the_statements_are_the_ones_the_full_path_runs(tmp_path: Path) -> None:
    """Run the full path's answer (and the lookups the fast one makes) on the store; each
    statement it compiled under a name is the text and parameter order used here."""
    db = _paused(tmp_path)
    store = SQLiteCheckpointer(db)
    store.list_workers(alive_since=0.0)
    store.execution_ids_with_prefix("run-00", 10)
    store.get_plan("0" * 64)  # (the Runner may have the plan from this process's cache)
    Runner(None, store, {}).resume("run-0001", {"approved": True}, leave=True, channel="cli")
    cache = store._sql._cache
    for name, (sql, names) in sql_text.SQLITE_ANSWER.items():
        assert cache[name].sql == sql, name
        assert cache[name].names == names, name
    # the literals the store binds itself, in the order the fast path passes them
    assert {k: v for k, v in cache["enqueue_run"].defaults.items() if "%" not in k} == {
        "status_1": "failed", "param_1": "queued"}
    assert cache["runs_prefix_True"].defaults["param_1"] == 0
    store.close()


def test_its_constants_are_the_runtimes() -> None:
    assert sqlite_answer.PLAN_FORMAT == PLAN_FORMAT
    assert (lease_env.LEASE_ENV, lease_env.DEFAULT_LEASE_SECONDS) == (
        claims.LEASE_ENV, claims.DEFAULT_LEASE_SECONDS)


def _rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as connection:
        return {t: sorted(connection.execute(f"SELECT * FROM {t}"), key=repr)
                for t in ("runs", "pending_interrupts", "decisions", "run_events")}


@pytest.mark.parametrize(("url", "run_id", "answer"), [
    ("sqlite:///{db}?durability=normal", "run-0001", {"approved": True}),  # not plain
    ("sqlite:///{db}", "run-0", {"approved": True}),  # a prefix too short
    ("sqlite:///{db}", "run-9999", {"approved": True}),  # no such run
    ("sqlite:///{db}", "run-0001", {"approved": 1}),  # not what the form takes
    ("sqlite:///{db}", "run-0001", {"approved": True, "x": float("nan")}),  # no JSON form
])
def test_it_steps_aside_and_writes_nothing(tmp_path: Path, url: str, run_id: str,
                                           answer: dict[str, object]) -> None:
    db = _paused(tmp_path)
    before = _rows(db)
    assert sqlite_answer.record_answer(url.format(db=db), run_id, answer, None, None) is None
    assert _rows(db) == before


def test_an_older_schema_goes_to_the_full_path(tmp_path: Path) -> None:
    db = _paused(tmp_path)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE schema_version SET version = version - 1")
    before = _rows(db)
    assert sqlite_answer.record_answer(f"sqlite:///{db}", "run-0001", {"approved": True},
                                       None, None) is None
    assert _rows(db) == before


def test_a_bad_lease_setting_goes_to_the_full_path(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    db = _paused(tmp_path)
    monkeypatch.setenv("TETHER_LEASE_SECONDS", "soon")
    assert sqlite_answer.record_answer(f"sqlite:///{db}", "run-0001", {"approved": True},
                                       None, None) is None


def test_it_records_the_answer_and_queues_the_run(tmp_path: Path) -> None:
    db = _paused(tmp_path)
    done = sqlite_answer.record_answer(f"sqlite:///{db}", "run-0001", {"approved": True},
                                       "review", "later")
    assert done is not None and done.status == "queued" and done.execution_id == "run-0001"
    assert "answer recorded for 'review'" in done.message and "'later'" in done.message
    rows = _rows(db)
    assert rows["pending_interrupts"] == []
    assert [r[4] for r in rows["decisions"]] == ['{"approved":true}']
    assert [r[2] for r in rows["run_events"]][-1] == "answered"


@pytest.mark.parametrize("plan_text", [
    "{not json", '{"tether_plan": 1, "nodes": [{"id": "review", "kind": "approval", '
    '"approval": {"form": [{"type": "boolean"}]}}]}',  # a form field without a name
    '{"tether_plan": 2, "nodes": []}',  # a plan format this path does not read
])
def test_a_plan_it_cannot_read_goes_to_the_full_path(tmp_path: Path, plan_text: str) -> None:
    db = _paused(tmp_path)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE plans SET plan = ?", (plan_text,))
    before = _rows(db)
    assert sqlite_answer.record_answer(f"sqlite:///{db}", "run-0001", {"approved": True},
                                       None, None) is None
    assert _rows(db) == before
