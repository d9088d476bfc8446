"""Regression tests for items of issue 8's "Measured" list that had none through the public
API: a fork at the ``run_end`` row (item 4), tasks that end with ``SystemExit``,
``CancelledError`` or another ``BaseException`` (item 7), a secret's value never reaching the
store (item 11). On every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tether
from tether import CheckpointNotFound, Runner
from tether.stores.base import Checkpointer

SECRET = "sk-measured-secret-0123"
WORKFLOW = """tether: 1
name: measured
secrets: [MEASURED_KEY]
nodes:
  a: {task: m.a, with: {key: "{{ secrets.MEASURED_KEY }}"}}
output:
  a: "{{ nodes.a.output }}"
"""


class Boom(BaseException):
    """A BaseException subclass a task may raise."""


def _raise(exc: BaseException) -> Callable[..., Any]:
    def body(key: str) -> Any:
        raise exc
    return body


@pytest.fixture
def plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MEASURED_KEY", SECRET)
    (tmp_path / "measured.yaml").write_text(WORKFLOW)
    return tether.compile(tmp_path / "measured.yaml")


def _stored(store: Checkpointer, execution_id: str) -> str:
    return "\n".join(repr(row) for row in store.rows(execution_id)) + repr(
        store.get_run(execution_id))


def test_a_fork_at_the_run_end_row_is_refused(store: Checkpointer, plan: Any) -> None:
    """Item 4: fork(id, checkpoint_id=<the run_end row>) is CheckpointNotFound, no branch."""
    done = Runner(plan, store, {"m.a": lambda key: {"ok": True}}).run({})
    assert done.status == "completed"
    (end,) = [row for row in store.rows(done.execution_id) if row.node_id == "run_end"]
    before = len(store.list_runs(limit=100))
    with pytest.raises(CheckpointNotFound, match="end marker"):
        Runner(None, store, {"m.a": lambda key: {}}).fork(done.execution_id, end.checkpoint_id)
    assert len(store.list_runs(limit=100)) == before


@pytest.mark.parametrize(("exc", "name"), [
    (SystemExit(0), "SystemExit"), (asyncio.CancelledError(), "CancelledError"),
    (Boom("x"), "Boom"), (GeneratorExit(), "GeneratorExit")])
def test_a_task_ending_with_a_base_exception_fails_the_node_naming_it(
        store: Checkpointer, plan: Any, exc: BaseException, name: str) -> None:
    """Item 7: the run fails (never completes, never stays running) with the exception
    named, and writes one failed run_end."""
    result = Runner(plan, store, {"m.a": _raise(exc)}).run({})
    assert result.status == "failed", result
    assert result.error is not None and result.error["type"] == name, result.error
    assert result.error["node_id"] == "a"
    ends = [row.status for row in store.rows(result.execution_id) if row.node_id == "run_end"]
    assert ends == ["failed"]
    run = store.get_run(result.execution_id)
    assert run is not None and run.status == "failed"


def test_a_secrets_value_never_reaches_the_store_or_the_result(
        store: Checkpointer, plan: Any) -> None:
    """Item 11: a task echoing its secret, and one failing with it in the message: the value
    is masked as *** in the result and is nowhere in the stored rows or the run row."""
    done = Runner(plan, store, {"m.a": lambda key: {"echo": key}}).run({})
    assert done.status == "completed" and done.output == {"a": {"echo": "***"}}
    assert SECRET not in _stored(store, done.execution_id)
    failed = Runner(plan, store, {"m.a": _raise(ValueError(f"bad key {SECRET}"))}).run({})
    assert failed.status == "failed" and failed.error is not None
    assert SECRET not in str(failed.error) and "***" in failed.error["message"]
    assert SECRET not in _stored(store, failed.execution_id)
