"""Concurrency keys and deduplication with asyncio tasks in one process (issue 26): 16
in-place runs of one key started together with ``asyncio.gather`` on one event loop and
one store (in-memory, SQLite, PostgreSQL), each ``on_conflict``; and 16 submissions of one
dedup key / one key gathered from the loop (``asyncio.to_thread``: ``Runner.submit`` is
synchronous).

The task bodies are coroutines that yield to the loop while they hold their run, so the
runs interleave at every await; each appends ``("start"|"end", rid, node)`` to a ledger
outside the store. Checked from the ledger: never more than ``limit`` runs with a body open
at once, a cancelled run stopped at a node boundary (every body it started ended, and its
nodes form a prefix of the chain), and nothing ran twice (each node's body at most once per
run).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tether import ConcurrencyLimitReached, Runner
from tether.runtime.results import RunResult
from tether.stores.base import Checkpointer

RUNS = 16
NODES = ("n0", "n1", "n2")

WORKFLOW = """\
tether: 1
name: keyed-async
inputs:
  rid: {{type: string}}
  branch: {{type: string}}
concurrency: {{key: "{{{{ inputs.branch }}}}", limit: {limit}, on_conflict: {policy}}}
nodes:
  n0: {{task: hold, with: {{rid: "{{{{ inputs.rid }}}}", node: n0}}}}
  n1: {{task: hold, needs: n0, with: {{rid: "{{{{ inputs.rid }}}}", node: n1}}}}
  n2: {{task: hold, needs: n1, with: {{rid: "{{{{ inputs.rid }}}}", node: n2}}}}
"""

LEDGER: list[tuple[str, str, str]] = []


async def hold(rid: str, node: str) -> str:
    LEDGER.append(("start", rid, node))
    await asyncio.sleep(0.02)  # the other runs' tasks go on meanwhile
    LEDGER.append(("end", rid, node))
    return rid


@pytest.fixture(autouse=True)
def _clean() -> None:
    LEDGER.clear()


def _workflow(tmp_path: Path, policy: str, limit: int) -> Path:
    path = tmp_path / f"keyed_{policy}.yaml"
    path.write_text(WORKFLOW.format(limit=limit, policy=policy), encoding="utf-8")
    return path


def _most_runs_open() -> int:
    open_bodies: Counter[str] = Counter()
    most = 0
    for kind, rid, _ in LEDGER:
        open_bodies[rid] += 1 if kind == "start" else -1
        most = max(most, sum(1 for n in open_bodies.values() if n))
    return most


def _gathered(store: Checkpointer, path: Path) -> list[RunResult | BaseException]:
    async def all_at_once() -> list[RunResult | BaseException]:
        runner = Runner(path, store, {"hold": hold})
        return await asyncio.gather(
            *(runner.arun({"rid": f"r{i:02d}", "branch": "main"}) for i in range(RUNS)),
            return_exceptions=True)

    return asyncio.run(all_at_once())


def _check_ledger(results: list[RunResult | BaseException], limit: int) -> None:
    assert _most_runs_open() <= limit, LEDGER
    starts = Counter((rid, node) for kind, rid, node in LEDGER if kind == "start")
    ends = Counter((rid, node) for kind, rid, node in LEDGER if kind == "end")
    assert starts == ends and set(ends.values()) <= {1}, LEDGER  # nothing twice, none cut
    for i, result in enumerate(results):
        if not isinstance(result, RunResult):
            continue
        done = [node for node in NODES if ends[(f"r{i:02d}", node)]]
        assert done == list(NODES[:len(done)])  # a prefix of the chain: stopped at a boundary
        assert result.status in ("completed", "cancelled"), result
        assert (result.status == "completed") == (len(done) == len(NODES)), (result, done)


@pytest.mark.parametrize(("policy", "limit"), [("queue", 1), ("queue", 2),
                                               ("cancel_running", 1)])
def test_sixteen_gathered_in_place_runs_of_one_key(store: Checkpointer, tmp_path: Path,
                                                    policy: str, limit: int) -> None:
    """``queue``: every run completes, never more than ``limit`` at once (each waits on the
    loop, nothing stored, while its key is full). ``cancel_running``: each newcomer asks the
    run holding the key to stop at its next node boundary; the runs end completed or
    cancelled, at least the last one to start completes, and never two run at once."""
    results = _gathered(store, _workflow(tmp_path, policy, limit))
    assert all(isinstance(r, RunResult) for r in results), results
    _check_ledger(results, limit)
    statuses = Counter(r.status for r in results if isinstance(r, RunResult))
    if policy == "queue":
        assert statuses == {"completed": RUNS}
        assert _most_runs_open() == limit  # the runs did overlap up to the limit
    else:
        assert statuses["completed"] >= 1 and statuses["cancelled"] >= 1, statuses
        assert sum(statuses.values()) == RUNS
    stored = store.find_runs(workflow="keyed-async", limit=100)
    assert {r.execution_id: str(r.status) for r in stored} == {
        r.execution_id: str(r.status) for r in results if isinstance(r, RunResult)}


@pytest.mark.parametrize("policy", ["reject", "cancel_new"])
def test_sixteen_gathered_in_place_runs_that_refuse_a_full_key(
        store: Checkpointer, tmp_path: Path, policy: str) -> None:
    """``reject`` / ``cancel_new``: a run that finds the key held is refused at once
    (``ConcurrencyLimitReached``, or stored cancelled having run nothing); never two runs
    at once; every run that started completed."""
    results = _gathered(store, _workflow(tmp_path, policy, 1))
    _check_ledger(results, 1)
    refused = [r for r in results if isinstance(r, ConcurrencyLimitReached)
               or (isinstance(r, RunResult) and r.status == "cancelled")]
    completed = [r for r in results if isinstance(r, RunResult) and r.status == "completed"]
    assert len(refused) + len(completed) == RUNS and completed and refused, results
    ran = {rid for _, rid, _ in LEDGER}
    assert ran == {f"r{i:02d}" for i, r in enumerate(results) if r in completed}
    stored = store.find_runs(workflow="keyed-async", limit=100)
    assert len(stored) == RUNS - (len(refused) if policy == "reject" else 0)


def test_submissions_gathered_from_the_loop_with_one_dedup_key_make_one_run(
        store: Checkpointer, tmp_path: Path) -> None:
    """16 submissions of one dedup key (each with another branch: another concurrency
    key) and 16 keyed submissions with ``reject``, gathered from one loop: one run per
    dedup key, one accepted by the ``reject`` key."""
    path = _workflow(tmp_path, "reject", 1)
    runner = Runner(path, store, {})

    async def submit(i: int, **options: Any) -> Any:
        try:
            return await asyncio.to_thread(runner.submit_run, {
                "rid": f"r{i:02d}", "branch": options.pop("branch", f"b{i}")}, **options)
        except ConcurrencyLimitReached as exc:
            return exc

    async def both() -> tuple[list[Any], list[Any]]:
        deduped = asyncio.gather(*(submit(i, dedup_key="async-1") for i in range(RUNS)))
        keyed = asyncio.gather(*(submit(i, branch="main") for i in range(RUNS)))
        return await deduped, await keyed

    deduped, keyed = asyncio.run(both())
    assert {d.execution_id for d in deduped} == {"async-1"}
    assert sorted(d.created for d in deduped) == [False] * (RUNS - 1) + [True]
    accepted = [k for k in keyed if not isinstance(k, ConcurrencyLimitReached)]
    assert len(accepted) == 1 and accepted[0].created, keyed
    main = [r for r in store.find_runs(workflow="keyed-async", limit=100)
            if r.concurrency_key == "main"]
    assert [r.execution_id for r in main] == [accepted[0].execution_id]
