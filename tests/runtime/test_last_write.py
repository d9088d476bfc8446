"""The last node's checkpoint is written with the run's end, in one transaction.

A run that ends right after a node wrote one row for that node and then, in a second write,
the run_end row and the run's status. The node's row is now held until the scheduler knows
nothing runs after it, and goes to ``finish_run`` as its ``last_node`` (one commit, the same
rows in the same order); when anything runs after it (a next node, a pause), it is written
first, as before. Each store's writes are counted by wrapping the store object's own methods
(instance attributes, as the crash harness does; the store itself is untouched); the kill -9
proofs at the merged point are in test_crash.py (``before:finish``, ``after:apply``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import tether
from tether import Resume, interrupt
from tether.status import RUN_END
from tether.stores.base import Checkpointer

CHAIN = """
tether: 1
name: chain
nodes:
  a: {task: t.step, with: {name: a}}
  b: {task: t.step, with: {name: b}, needs: [a]}
  c: {task: t.{{last}}, with: {name: c}, needs: [b]}
output: "{{ nodes.b.output }}"
"""

PAUSE = """
tether: 1
name: pause
nodes:
  ask: {task: t.ask}
  slow: {task: t.slow}
  after: {task: t.step, with: {name: after}, needs: [slow]}
"""


def _step(name: str) -> dict[str, str]:
    return {"name": name}


def _fail(name: str) -> None:
    raise ValueError(f"{name} fails")


def _ask() -> Any:
    return interrupt("ok?").value


def _slow() -> str:
    time.sleep(0.3)  # the interrupt is recorded while this runs
    return "slow"


TASKS = {"t.step": _step, "t.fail": _fail, "t.ask": _ask, "t.slow": _slow}


def _count_writes(store: Checkpointer) -> list[tuple[str, str, str | None]]:
    """(method, row's node, last_node's node) of each checkpoint write of ``store``."""
    writes: list[tuple[str, str, str | None]] = []
    put, finish = store.put, store.finish_run

    def counted_put(row: Any, owner: str | None = None) -> None:
        writes.append(("put", row.node_id, None))
        put(row, owner)

    def counted_finish(row: Any, status: str, error: Any, owner: str | None, *,
                       last_node: Any = None) -> None:
        writes.append(("finish_run", row.node_id, last_node and last_node.node_id))
        finish(row, status, error, owner, last_node=last_node)

    store.put = counted_put  # type: ignore[method-assign]
    store.finish_run = counted_finish  # type: ignore[method-assign]
    return writes


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flow.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_chain_writes_its_last_node_with_its_end(store: Checkpointer,
                                                   tmp_path: Path) -> None:
    """Three nodes: two puts and one finish_run carrying the third node's row; the stored
    rows are the four of before, in order, and read back as the run's state."""
    writes = _count_writes(store)
    result = tether.Runner(_plan(tmp_path, CHAIN.replace("{{last}}", "step")), store,
                           TASKS).run({})
    assert result.status == "completed" and result.output == {"name": "b"}
    assert writes == [("put", "a", None), ("put", "b", None), ("finish_run", RUN_END, "c")]
    assert [r.node_id for r in store.rows(result.execution_id)] == ["a", "b", "c", RUN_END]
    last = store.latest_forkable(result.execution_id)
    assert last is not None and last.node_id == "c"
    assert last.state_snapshot["nodes"] == result.state["nodes"]
    run = store.get_run(result.execution_id)
    assert run is not None and (run.status, run.owner) == ("completed", None)


def test_a_failing_last_node_is_written_with_the_failed_end(store: Checkpointer,
                                                           tmp_path: Path) -> None:
    """The last node fails: its failed row and the failed run_end, in one write."""
    writes = _count_writes(store)
    result = tether.Runner(_plan(tmp_path, CHAIN.replace("{{last}}", "fail")), store,
                           TASKS).run({})
    assert result.status == "failed" and result.error is not None
    assert writes[-1] == ("finish_run", RUN_END, "c")
    rows = store.rows(result.execution_id)
    assert [(r.node_id, r.status) for r in rows][-2:] == [("c", "failed"),
                                                          (RUN_END, "failed")]


def test_a_node_after_which_the_run_pauses_is_written_before_the_pause(
        store: Checkpointer, tmp_path: Path) -> None:
    """``after`` runs alone while ``ask`` waits for an answer: its row is held, then written
    before the pause (nothing ends the run); the answer's run ends with ``ask``'s row."""
    writes = _count_writes(store)
    runner = tether.Runner(_plan(tmp_path, PAUSE), store, TASKS)
    paused = runner.run({})
    assert paused.status == "paused"
    assert ("put", "after", None) in writes and not any(w[0] == "finish_run" for w in writes)
    assert store.get_pending(paused.execution_id) is not None
    stored = store.latest_forkable(paused.execution_id)
    assert stored is not None and stored.state_snapshot["nodes"]["after"]["status"] == \
        "completed"
    writes.clear()
    done = runner.resume(paused.execution_id, Resume(value="yes"))
    assert done.status == "completed"
    assert done.state["nodes"]["ask"]["output"] == "yes"
    assert writes == [("finish_run", RUN_END, "ask")]
