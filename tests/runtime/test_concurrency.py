"""Concurrency claims proven with real processes, on SQLite (one file, WAL) and PostgreSQL.

* The claim of a pending interrupt (SQLite: ``BEGIN IMMEDIATE`` + ``DELETE ... RETURNING``
  under the database write lock; PostgreSQL: ``DELETE ... RETURNING``, the row lock decides):
  16 processes resume one paused run at the same instant, 50 times: exactly one winner.
* The lease (a compare-and-set ``UPDATE``; a dead owner on this host is replaced at once):
  16 processes recover one crashed run at the same instant: exactly one continues it.
* Starting a run (``INSERT ... ON CONFLICT DO NOTHING`` of the run row): 16 processes
  starting one execution id at once: one runs it, the others get ExecutionExists.
* Many workers, many runs: 8 processes execute 200 runs against one database, handing paused
  runs to each other: every run completes, nothing runs twice, no checkpoint is lost.
* Schema set-up (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``pg_advisory_xact_lock``): 16
  processes opening an empty database at once all succeed.

Workers are long-lived child processes (``harness.child`` in ``race``/``batch`` mode), each
with its own store connection, reused across trials as real workers would be.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from harness import WORKFLOWS, checks, launch, tasks
from harness.tasks import read_effects

import tether
from tether import Runner, open_checkpointer

RACERS = 16
TRIALS = 50
APPROVAL = tether.compile(WORKFLOWS / "approval.yaml")
CRASHY = tether.compile(WORKFLOWS / "crashy.yaml")


def _value(worker: int) -> dict[str, Any]:
    return {"approved": worker % 2 == 0, "by": f"worker-{worker}"}


@pytest.mark.slow
def test_sixteen_processes_resume_one_paused_run_exactly_one_wins_fifty_times(
        shared_url: str, tmp_path: Path) -> None:
    """16 processes resume the same paused run at the same instant, 50 trials: exactly one
    completes it, the 15 others raise AlreadyResumed (never a ResumeError, never a driver
    error such as "database is locked"), the code after interrupt() runs exactly once, and
    the final state holds the winner's answer."""
    effects = tmp_path / "effects.jsonl"
    workers = launch.Workers(RACERS, {"url": shared_url, "action": "race",
                                      "effects": str(effects)}, tmp_path)
    store = open_checkpointer(shared_url)
    runner = Runner(APPROVAL, store, tasks.TASKS)
    try:
        for trial in range(TRIALS):
            paused = runner.run({"subject": f"trial {trial}"})
            assert paused.status == "paused"
            eid = paused.execution_id
            start_at = time.time() + 0.25
            for i in range(RACERS):
                workers.send(i, {"action": "resume", "execution_id": eid, "value": _value(i),
                                 "start_at": start_at, "tag": trial})
            answers = [workers.read(i) for i in range(RACERS)]
            where = f"trial {trial}, run {eid}: {json.dumps(answers)[:4000]}"
            outcomes = Counter(a["outcome"] if a["outcome"] != "error" else a["error_type"]
                               for a in answers)
            assert outcomes == {"completed": 1, "AlreadyResumed": RACERS - 1}, where
            winner = next(i for i, a in enumerate(answers) if a["outcome"] == "completed")
            decision = {"subject": f"trial {trial}", **_value(winner)}
            assert answers[winner]["output"] == {
                "decision": decision,
                "applied": {"applied": decision["approved"], "by": decision["by"]}}, where
            ran = checks.executions(read_effects(effects), eid=eid)
            assert sum(n for (task, _), n in ran.items() if task == "h.ask") == 1, (ran, where)
            assert sum(n for (task, _), n in ran.items() if task == "h.apply") == 1, where
            (after_interrupt,) = [json.loads(a) for (t, a) in ran if t == "h.ask"]
            assert after_interrupt["answer"] == _value(winner), where
            last = store.get_last(eid)
            assert last is not None and last.state_snapshot["nodes"]["ask"]["output"] == decision
            assert checks.run_ends(store, eid) == ["completed"], where
            assert store.get_pending(eid) is None
    finally:
        store.close()
        codes = workers.close()
    assert codes == [0] * RACERS


@pytest.mark.slow
def test_sixteen_processes_recover_one_crashed_run_exactly_one_takes_it_over(
        shared_url: str, tmp_path: Path) -> None:
    """A run killed mid-way (a new process each trial, SIGKILL before its 6th checkpoint),
    then 16 processes resume it without a value at the same instant, 20 trials: the lease
    (a compare-and-set UPDATE; the dead owner may be replaced at once) lets exactly one
    continue, the 15 others get AlreadyResumed; the run ends with the uninterrupted run's
    state, and no unit runs twice among the racers (committed units not at all)."""
    plan_file = launch.compile_to("crashy.yaml", tmp_path / "plans")[1]
    reference, reference_store = launch.reference_run(CRASHY, tasks.TASKS, {})
    units = checks.committed_units(reference_store, CRASHY, reference.execution_id)
    effects = tmp_path / "effects.jsonl"
    zygote = launch.Zygote(tmp_path / "zygote")
    workers = launch.Workers(RACERS, {"url": shared_url, "action": "race",
                                      "effects": str(effects)}, tmp_path)
    store = open_checkpointer(shared_url)
    try:
        for trial in range(20):
            eid = str(uuid.uuid4())
            crashed = zygote.run({"url": shared_url, "action": "run", "plan": plan_file,
                                  "execution_id": eid, "crash": "before:#6",
                                  "effects": str(effects)})
            assert crashed.killed, crashed.describe()
            committed = checks.committed_units(store, CRASHY, eid)
            start_at = time.time() + 0.25
            for i in range(RACERS):
                workers.send(i, {"action": "resume", "execution_id": eid, "value": None,
                                 "start_at": start_at, "tag": trial})
            answers = [workers.read(i) for i in range(RACERS)]
            where = f"trial {trial}, run {eid}: {json.dumps(answers)[:4000]}"
            outcomes = Counter(a["outcome"] if a["outcome"] != "error" else a["error_type"]
                               for a in answers)
            assert outcomes == {"completed": 1, "AlreadyResumed": RACERS - 1}, where
            (winner,) = [a for a in answers if a["outcome"] == "completed"]
            assert winner["state"] == reference.state, where
            racers = set(workers.pids)
            again = checks.executions(read_effects(effects), pids=racers, eid=eid)
            assert again == units - committed, (again, committed, where)
            assert checks.run_ends(store, eid) == ["completed"], where
    finally:
        store.close()
        zygote.close()
        codes = workers.close()
    assert codes == [0] * RACERS


def test_sixteen_processes_start_one_execution_id_exactly_one_runs_it(
        shared_url: str, tmp_path: Path) -> None:
    """16 processes start a run under the same execution id at the same instant, 10 trials:
    exactly one runs it, the 15 others get ExecutionExists (never a driver error from the
    duplicate key), and the run's units ran once."""
    plan_file = launch.compile_to("crashy.yaml", tmp_path / "plans")[1]
    reference, reference_store = launch.reference_run(CRASHY, tasks.TASKS, {})
    units = checks.committed_units(reference_store, CRASHY, reference.execution_id)
    effects = tmp_path / "effects.jsonl"
    workers = launch.Workers(RACERS, {"url": shared_url, "action": "race",
                                      "effects": str(effects)}, tmp_path)
    try:
        for trial in range(10):
            eid = str(uuid.uuid4())
            start_at = time.time() + 0.25
            for i in range(RACERS):
                workers.send(i, {"action": "run", "plan": plan_file, "execution_id": eid,
                                 "start_at": start_at, "tag": trial})
            answers = [workers.read(i) for i in range(RACERS)]
            where = f"trial {trial}, run {eid}: {json.dumps(answers)[:3000]}"
            outcomes = Counter(a["outcome"] if a["outcome"] != "error" else a["error_type"]
                               for a in answers)
            assert outcomes == {"completed": 1, "ExecutionExists": RACERS - 1}, where
            assert checks.executions(read_effects(effects), eid=eid) == units, where
    finally:
        codes = workers.close()
    assert codes == [0] * RACERS


def _expected_rows(store: Any, execution_id: str) -> Counter[tuple[str, str, str]]:
    return Counter((r.node_id, r.step_type, r.status) for r in store.rows(execution_id))


@pytest.mark.slow
def test_eight_workers_execute_two_hundred_runs_exactly_once_each(
        shared_url: str, tmp_path: Path) -> None:
    """8 worker processes run 200 runs against one database at once (160 of the parallel /
    loop / for_each workflow; 40 that pause, then are resumed by another worker): every run
    completes, every unit's side effect is recorded exactly once, no worker hangs (deadlock),
    and every run has exactly its expected checkpoint rows and one run_end."""
    workers_count, crashy_runs, approval_runs = 8, 160, 40
    plans = tmp_path / "plans"
    crashy_file = launch.compile_to("crashy.yaml", plans)[1]
    approval_file = launch.compile_to("approval.yaml", plans)[1]
    effects = tmp_path / "effects.jsonl"
    reference, reference_store = launch.reference_run(CRASHY, tasks.TASKS, {})
    crashy_units = checks.committed_units(reference_store, CRASHY, reference.execution_id)
    crashy_rows = _expected_rows(reference_store, reference.execution_id)
    answer = {"approved": True, "by": "someone"}
    approval_ref, approval_store = launch.reference_run(APPROVAL, tasks.TASKS, {}, answer)
    approval_rows = _expected_rows(approval_store, approval_ref.execution_id)

    runs = [("crashy", str(uuid.uuid4())) for _ in range(crashy_runs)] + \
           [("approval", str(uuid.uuid4())) for _ in range(approval_runs)]
    workers = launch.Workers(workers_count, {"url": shared_url, "action": "batch",
                                             "effects": str(effects)}, tmp_path, timeout=300)
    try:
        # Phase 1: every worker starts its share at once (approval runs pause).
        for n, (kind, eid) in enumerate(runs):
            plan = crashy_file if kind == "crashy" else approval_file
            workers.send(n % workers_count, {"action": "run", "plan": plan,
                                             "execution_id": eid, "tag": eid})
        first = {}
        for n in range(len(runs)):
            answer_line = workers.read(n % workers_count)
            first[answer_line["tag"]] = answer_line
        # Phase 2: each paused run is resumed by a different worker than the one that started
        # it, all workers at once.
        paused = [n for n, (kind, _) in enumerate(runs) if kind == "approval"]
        for n in paused:
            workers.send((n + 1) % workers_count, {"action": "resume", "value": answer,
                                                   "execution_id": runs[n][1],
                                                   "tag": runs[n][1]})
        second = {}
        for n in paused:
            answer_line = workers.read((n + 1) % workers_count)
            second[answer_line["tag"]] = answer_line
    finally:
        codes = workers.close()
    assert codes == [0] * workers_count

    effects_lines = read_effects(effects)
    store = open_checkpointer(shared_url)
    try:
        for kind, eid in runs:
            outcome = first[eid]
            if kind == "approval":
                assert outcome["outcome"] == "paused", outcome
                outcome = second[eid]
            assert outcome["outcome"] == "completed", (kind, eid, outcome)
            ran = checks.executions(effects_lines, eid=eid)
            if kind == "crashy":
                assert outcome["state"] == reference.state
                assert ran == crashy_units, (eid, ran)
                assert _expected_rows(store, eid) == crashy_rows, checks.describe(store, eid)
            else:
                assert outcome["output"] == approval_ref.output
                assert sorted(task for task, _ in ran.elements()) == [
                    "h.apply", "h.ask", "h.step"], (eid, ran)
                assert _expected_rows(store, eid) == approval_rows, checks.describe(store, eid)
            assert checks.run_ends(store, eid) == ["completed"]
        assert store.list_pending() == []
        assert {r.status for r in store.list_runs(limit=1000)} == {"completed"}
    finally:
        store.close()


def test_sixteen_processes_set_up_an_empty_database_at_once(
        shared_url: str, tmp_path: Path) -> None:
    """16 processes open the same empty database (a new SQLite file; a PostgreSQL schema that
    does not exist yet) at the same instant: every set-up succeeds, the schema is created once
    and is usable from all of them."""
    exits = launch.start_together([{"url": shared_url, "action": "setup"}] * 16, tmp_path)
    for done in exits:
        assert done.returncode == 0 and done.result is not None, done.describe()
        assert done.result["outcome"] == "ok", done.describe()
    began = [done.result["began"] for done in exits if done.result]
    assert max(began) - min(began) < 3.0, f"the set-ups did not start together: {began}"
    store = open_checkpointer(shared_url)
    try:
        result = Runner(APPROVAL, store, tasks.TASKS).run({})
        assert result.status == "paused"
        from sqlalchemy import select

        from tether.stores.schema import SCHEMA_VERSION, schema_version
        with store.engine.connect() as connection:  # type: ignore[attr-defined]
            rows = connection.execute(select(schema_version)).all()
        assert [tuple(row) for row in rows] == [(1, SCHEMA_VERSION)]
    finally:
        store.close()
