"""Crash tests that crash for real (STYLE rule 20), on SQLite and PostgreSQL.

A child process (``python -m harness.child``, a fresh interpreter) runs a workflow and SIGKILLs
itself at a chosen boundary; a new process resumes from the same store with the stored plan
(``Runner(None, store, tasks).resume(eid)``). Task bodies record every execution in an effects
file, and the store says which units were committed when the first process died, so the tests
can say exactly which bodies may run again:

* a unit whose ``completed`` checkpoint was committed never runs again;
* a unit that ran but was not committed runs again exactly once (the resumer does not crash);
* an ``idempotent`` body whose result was cached never runs again, even if its node does.
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
from harness.tasks import canonical, read_effects

import tether
from tether import AlreadyResumed, Resume, Runner, open_checkpointer
from tether.compiler.plan import Plan
from tether.runtime.idempotent import default_key
from tether.stores.base import Checkpointer

Unit = tuple[str, str]


# -- the crashy workflow and its uninterrupted run ------------------------------------------------
def _reference() -> tuple[Plan, Any, list[str]]:
    plan = tether.compile(WORKFLOWS / "crashy.yaml")
    result, store = launch.reference_run(plan, tasks.TASKS, {})
    seen: Counter[str] = Counter()
    addresses = []
    for row in store.rows(result.execution_id):
        seen[row.node_id] += 1
        addresses.append(f"{row.node_id}#{seen[row.node_id]}")
    return plan, result, addresses


PLAN, REFERENCE, ADDRESSES = _reference()

# Sorted: the two branches of the run commit in either order, and the parameter list must be
# the same in every process that collects it (pytest-xdist compares the workers' lists).
BOUNDARIES = (
    [f"before:{a}" for a in sorted(ADDRESSES)]
    + [f"after:{a}" for a in sorted(ADDRESSES)]
    + ["task:left", "task:right", "task:item:1", "task:judge#2", "task:draft#3",
       "task:charge", "task:finish", "after:idem"]
)
CHARGE_ARGS = {"amount": 3, "text": "draft 3 after 'more (pass 2)'"}
CHARGE_KEY = default_key(tasks.charge, (), CHARGE_ARGS)
LAST_UNIT = ("h.step", canonical({"name": "finish"}))  # the node that ends the run


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    return launch.compile_to("crashy.yaml", tmp_path_factory.mktemp("plans"))[1]


@pytest.fixture(scope="module")
def reference_units() -> Counter[Unit]:
    result, store = launch.reference_run(PLAN, tasks.TASKS, {})
    return checks.committed_units(store, PLAN, result.execution_id)


def _crash_then_resume(url: str, plan_file: str, folder: Path,
                       spec: str) -> tuple[str, launch.Exit, launch.Exit, Checkpointer,
                                           Counter[Unit], dict[str, Any]]:
    """Run with ``spec`` armed (must be killed), snapshot the store, resume in a new process."""
    eid = str(uuid.uuid4())
    effects = folder / "effects.jsonl"
    first = launch.run_fresh({"url": url, "action": "run", "plan": plan_file,
                              "execution_id": eid, "crash": spec, "effects": str(effects)},
                             folder)
    assert first.killed, f"the crash at {spec} did not fire: {first.describe()}"
    store = open_checkpointer(url)
    committed = checks.committed_units(store, PLAN, eid)
    resumable = store.latest_resumable(eid)
    before = {"counters": dict(resumable.iteration_counters) if resumable else {},
              "rows": checks.describe(store, eid),
              "charge_cached": store.get_idempotent(eid, CHARGE_KEY) is not None}
    second = launch.run_fresh({"url": url, "action": "resume", "execution_id": eid,
                               "effects": str(effects)}, folder)
    assert second.returncode == 0, second.describe()
    return eid, first, second, store, committed, before


@pytest.mark.slow
@pytest.mark.parametrize("spec", BOUNDARIES)
def test_crash_at_any_boundary_resumes_to_the_uninterrupted_result_without_redoing_work(
        shared_url: str, plan_file: str, reference_units: Counter[Unit], tmp_path: Path,
        spec: str) -> None:
    """SIGKILL before/after every checkpoint write, inside tasks, before run_end; a new
    process resumes: same state and output as the uninterrupted run; committed units never
    run again; uncommitted ones run exactly once more; the guarded branch stays skipped; the
    loop continues at its stored pass and stops at max_iterations; the idempotent charge's
    body runs once (twice only when the kill hit inside that very body, before its result
    was cached); exactly one run_end."""
    eid, _, second, store, committed, before = _crash_then_resume(
        shared_url, plan_file, tmp_path, spec)
    try:
        context = f"crash {spec}; rows at the crash:\n{before['rows']}\nresult: {second.result}"
        result = second.result
        assert result is not None, context
        if spec in ("after:run_end#1", "after:finish#1"):
            # The run had finished (its last node's row and its end are one write): resume
            # refuses and changes nothing.
            assert result["outcome"] == "error" and result["error_type"] == "AlreadyResumed", \
                context
            last = store.get_last(eid)
            assert last is not None and last.state_snapshot == REFERENCE.state
        else:
            assert result["outcome"] == "completed", context
            assert result["state"] == REFERENCE.state, context
            assert result["output"] == REFERENCE.output, context
        assert checks.run_ends(store, eid) == ["completed"], context
        assert store.get_pending(eid) is None
        run = store.get_run(eid)
        assert run is not None and run.status == "completed" and run.owner is None

        effects = read_effects(tmp_path / "effects.jsonl")
        resumer = {second.result["pid"]} if "pid" in second.result else set()
        again = checks.executions(effects, pids=resumer)
        crashed = checks.executions(effects, exclude=resumer)
        everything = checks.executions(effects)
        cached = before["charge_cached"]
        charge_unit = ("h.charge", canonical(CHARGE_ARGS))

        # Nothing outside the uninterrupted run's units ran: no guarded-off node, no 4th pass.
        assert set(everything) <= set(reference_units), (context, everything)
        # The killed process ran each unit at most once.
        assert all(n == 1 for n in crashed.values()), (context, crashed)
        for unit in reference_units:
            if unit in committed:
                # Committed before the kill: never again.
                assert again[unit] == 0, (f"{unit} was committed but ran again", context)
                assert everything[unit] == 1, (unit, context)
            elif unit == charge_unit and cached:
                # Not committed, but the idempotent result was: the body is not re-run.
                assert again[unit] == 0, context
            else:
                assert again[unit] == 1, (f"{unit} should run once in the resumer", context)
        # The idempotent body ran once, or twice only when killed inside it before caching.
        assert everything[charge_unit] == (2 if spec == "task:charge" else 1), context

        # The branch not taken stays not taken.
        for node in ("never", "never_child"):
            assert not any(json.loads(args).get("name") == node for (_, args) in everything)
        # The loop resumed at the pass stored with the last checkpoint and ran 3 passes.
        stored_pass = int(before["counters"].get("judge", 1))
        passes = [json.loads(args)["attempt"] for (task, args) in again
                  if task in ("h.draft", "h.judge")]
        assert all(p >= stored_pass for p in passes), (stored_pass, passes, context)
        assert {json.loads(a)["attempt"] for (t, a) in everything if t == "h.judge"} == {1, 2, 3}
        # for_each elements committed before the kill were not redone.
        items_again = {json.loads(a)["index"] for (t, a) in again if t == "h.item"}
        items_done = {json.loads(a)["index"] for (t, a) in committed if t == "h.item"}
        assert not items_again & items_done, context
        # A kill after the last node's checkpoint: the resumer runs no task body at all.
        # That checkpoint is written with the run's end, in one transaction: a kill before
        # that write leaves neither row (as a kill before the node's own write did), and the
        # resumer runs the last node alone again.
        if spec in ("after:run_end#1", "after:finish#1"):
            assert not again, (again, context)
        if spec in ("before:run_end#1", "before:finish#1"):
            assert LAST_UNIT not in committed, context
            assert again == Counter({LAST_UNIT: 1}), (again, context)
    finally:
        store.close()


def test_every_checkpoint_boundary_of_the_workflow_is_covered() -> None:
    """The boundary list is the uninterrupted run's checkpoints: every node, item, loop pass,
    and run_end (so "kill at every boundary" is not a sample)."""
    assert ADDRESSES[-1] == "run_end#1"
    assert {"fan/item:0#1", "fan/item:2#1", "judge#3", "draft#3", "charge#1", "fan#1",
            "left#1", "right#1"} <= set(ADDRESSES)
    assert len(ADDRESSES) == len(set(ADDRESSES)) == 16


# -- crash while paused, at the claim, and while holding the run --------------------------------
APPROVAL = tether.compile(WORKFLOWS / "approval.yaml")
ANSWER = {"approved": True, "by": "ada"}
ASK_UNIT = ("h.ask", canonical({"answer": ANSWER, "subject": "invoice"}))
APPLY_UNIT = ("h.apply", canonical({"decision": {"subject": "invoice", **ANSWER}}))


class Approval:
    """One run of the approval workflow driven by fresh child processes."""

    def __init__(self, url: str, folder: Path, plan_file: str, plan: Plan = APPROVAL) -> None:
        self.url = url
        self.folder = folder
        self.plan_file = plan_file
        self.plan = plan
        self.eid = str(uuid.uuid4())
        self.effects = folder / "effects.jsonl"

    def job(self, action: str, value: dict[str, Any] | None = None,
            crash: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"url": self.url, "action": action, "plan": self.plan_file,
                "execution_id": self.eid, "value": value, "crash": crash,
                "effects": str(self.effects), **extra}

    def run(self, action: str, value: dict[str, Any] | None = None,
            crash: str | None = None, **extra: Any) -> launch.Exit:
        done = launch.run_fresh(self.job(action, value, crash, **extra), self.folder)
        if crash is not None and not crash.startswith("block:"):
            assert done.killed, f"{crash} did not fire: {done.describe()}"
        else:
            assert done.returncode == 0 and done.result is not None, done.describe()
        return done

    def paused(self) -> None:
        """Start the run in this (the test's) process; it pauses at ``ask``."""
        tasks.EFFECTS = self.effects
        try:
            with self.store() as store:
                result = Runner(self.plan, store, tasks.TASKS).run({}, execution_id=self.eid)
        finally:
            tasks.EFFECTS = None
        assert result.status == "paused", result

    def counts(self) -> Counter[Unit]:
        return checks.executions(read_effects(self.effects))

    def store(self) -> Checkpointer:
        return open_checkpointer(self.url)


@pytest.fixture(scope="module")
def approval_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    return launch.compile_to("approval.yaml", tmp_path_factory.mktemp("plans"))[1]


@pytest.fixture(scope="module")
def approval_reference() -> Any:
    return launch.reference_run(APPROVAL, tasks.TASKS, {}, ANSWER)[0]


def _assert_finished(flow: Approval, result: dict[str, Any] | None, reference: Any) -> None:
    assert result is not None and result["outcome"] == "completed", result
    assert result["state"] == reference.state and result["output"] == reference.output
    with flow.store() as store:
        assert checks.run_ends(store, flow.eid) == ["completed"]
        assert store.get_pending(flow.eid) is None
        runner = Runner(None, store, tasks.TASKS)
        for value in (Resume(**ANSWER), None):
            with pytest.raises(AlreadyResumed):
                runner.resume(flow.eid, value)


def test_kill_while_pausing_before_the_interrupt_is_written_asks_again(
        shared_url: str, approval_file: str, approval_reference: Any, tmp_path: Path) -> None:
    """Killed right before record_interrupt: nothing is pending, so a resume without a value
    re-runs the node, which pauses again; answering it completes the run."""
    flow = Approval(shared_url, tmp_path, approval_file)
    flow.run("run", crash="before:ask")
    with flow.store() as store:
        assert store.get_pending(flow.eid) is None
    asked = flow.run("resume")
    assert asked.result is not None and asked.result["outcome"] == "paused", asked.result
    done = flow.run("resume", ANSWER)
    _assert_finished(flow, done.result, approval_reference)
    assert flow.counts()[ASK_UNIT] == 1 and flow.counts()[APPLY_UNIT] == 1


def test_kill_right_after_the_pause_is_written_leaves_a_normal_paused_run(
        shared_url: str, approval_file: str, approval_reference: Any, tmp_path: Path) -> None:
    """Killed right after record_interrupt committed: the run is paused like any other
    (a resume without a value is a ResumeError and changes nothing); Resume completes it."""
    flow = Approval(shared_url, tmp_path, approval_file)
    flow.run("run", crash="after:ask")
    refused = flow.run("resume")
    assert refused.result is not None and refused.result["error_type"] == "ResumeError"
    with flow.store() as store:
        assert store.get_pending(flow.eid) is not None
    done = flow.run("resume", ANSWER)
    _assert_finished(flow, done.result, approval_reference)
    assert flow.counts()[ASK_UNIT] == 1


RESUMER_CRASHES = ["after:claim", "task:ask", "before:ask", "after:ask", "before:apply",
                   "after:idem", "task:apply", "after:apply", "before:run_end"]
ASK_COMMITTED = set(RESUMER_CRASHES[3:])


@pytest.mark.parametrize("later_value", [None, ANSWER], ids=["no-value", "same-value"])
@pytest.mark.parametrize("spec", RESUMER_CRASHES)
def test_kill_a_resumer_after_its_claim_then_a_new_process_completes_the_run(
        shared_url: str, approval_file: str, approval_reference: Any, tmp_path: Path,
        spec: str, later_value: dict[str, Any] | None) -> None:
    """The resumer that claimed the interrupt is killed (right after the claim, inside the
    resumed node, around its checkpoint, in the next node, before run_end); a later resume
    from a new process, with or without the value, completes the run with the claimed
    answer: never stuck between "needs a Resume" and "AlreadyResumed". The code after
    interrupt() runs again only if its node was not committed; the idempotent apply once.
    (A kill after apply's checkpoint is a kill after the run's end: the two are one write.)"""
    flow = Approval(shared_url, tmp_path, approval_file)
    flow.paused()
    flow.run("resume", ANSWER, crash=spec)
    with flow.store() as store:
        assert store.get_pending(flow.eid) is None  # the claim is gone with the killed process
        ask_committed = any(row.node_id == "ask" and row.status == "completed"
                            for row in store.rows(flow.eid))
    done = flow.run("resume", later_value)
    if spec == "after:apply":
        # apply is the last node: its checkpoint and the run's end are one write, so the
        # killed resumer had finished the run: the later resume refuses and changes nothing.
        assert done.result is not None and done.result["error_type"] == "AlreadyResumed"
        with flow.store() as store:
            last = store.get_last(flow.eid)
            assert last is not None and last.state_snapshot == approval_reference.state
        _assert_finished(flow, {**done.result, "outcome": "completed",
                                "state": approval_reference.state,
                                "output": approval_reference.output}, approval_reference)
    else:
        _assert_finished(flow, done.result, approval_reference)
    counts = flow.counts()
    # The killed resumer ran the code after interrupt() unless it died right after the claim;
    # it runs again in the new process unless its node's checkpoint was committed.
    assert (spec in ASK_COMMITTED) == ask_committed
    assert counts[ASK_UNIT] == (1 if spec == "after:claim" or ask_committed else 2), counts
    assert counts[APPLY_UNIT] == (2 if spec == "task:apply" else 1), counts
    assert counts[("h.step", canonical({"name": "prepare"}))] == 1


@pytest.mark.parametrize("paused", [False, True], ids=["crashed-run", "paused-run"])
def test_a_live_holder_keeps_the_run_and_a_dead_one_is_replaced_at_once(
        shared_url: str, approval_file: str, approval_reference: Any, tmp_path: Path,
        paused: bool) -> None:
    """A resumer blocked inside a node holds the run (lease 300 s): a second resumer gets
    AlreadyResumed. SIGKILL the holder: a third process on the same host takes the run over
    at once (dead owner, not lease expiry) and completes it with the holder's answer."""
    flow = Approval(shared_url, tmp_path, approval_file)
    if paused:
        flow.paused()
        spec, value = "block:ask", ANSWER
    else:
        flow.run("run", crash="before:prepare")  # a crashed run, recovered without a value
        spec, value = "block:prepare", None
    gate = tmp_path / "gate"
    holder, _ = launch.start_fresh(flow.job("resume", value, spec, gate=str(gate),
                                            lease_seconds=300), tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (gate / "blocked").exists():
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the holder never reached its node"
            time.sleep(0.05)
        second = launch.run_fresh(flow.job("resume", value, lease_seconds=300), tmp_path)
        assert second.result is not None, second.describe()
        assert second.result["error_type"] == "AlreadyResumed", second.result
    finally:
        holder.kill()  # SIGKILL
        holder.communicate()
    assert holder.returncode == -9
    # The holder is provably dead (SIGKILL), so the take-over does not wait for its 300 s lease:
    # a resumer that waited would outlive this timeout and fail.
    third = launch.run_fresh(flow.job("resume", None, lease_seconds=300), tmp_path, timeout=60)
    if paused:
        _assert_finished(flow, third.result, approval_reference)
    else:
        assert third.result is not None and third.result["outcome"] == "paused", third.result


APPROVAL_NODE = tether.compile(WORKFLOWS / "approval_node.yaml")


@pytest.mark.parametrize("later_value", [None, ANSWER], ids=["no-value", "same-value"])
@pytest.mark.parametrize("spec", ["after:claim", "before:review", "after:review",
                                  "task:apply"])
def test_kill_a_resumer_of_an_approval_node_then_a_new_process_completes_the_run(
        shared_url: str, tmp_path: Path, spec: str, later_value: dict[str, Any] | None) -> None:
    """The same for the built-in approval node: killed right after the claim, right before
    or after the approval's completed checkpoint, or in the next (idempotent) node, a later
    resume from a new process, with or without the value, completes with the claimed
    answer, and the idempotent apply ran once (twice only when killed inside its body)."""
    plan_file = launch.compile_to("approval_node.yaml", tmp_path / "plans")[1]
    flow = Approval(shared_url, tmp_path, plan_file, APPROVAL_NODE)
    flow.paused()
    flow.run("resume", ANSWER, crash=spec)
    done = flow.run("resume", later_value)
    reference = launch.reference_run(APPROVAL_NODE, tasks.TASKS, {}, ANSWER)[0]
    _assert_finished(flow, done.result, reference)
    apply_unit = ("h.apply", canonical({"decision": ANSWER}))
    assert flow.counts()[apply_unit] == (2 if spec == "task:apply" else 1), flow.counts()


# -- a fork killed mid-way ----------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["after:#1", "before:#2", "after:#4", "before:run_end"])
def test_kill_a_fork_then_resume_the_branch_from_a_new_process(
        shared_url: str, plan_file: str, reference_units: Counter[Unit], tmp_path: Path,
        spec: str) -> None:
    """A fork of a finished run (from its first judge checkpoint) is killed right after its
    fork_origin row, or later; the branch is resumed from a new process: it ends with the
    uninterrupted run's state and one run_end, the nodes committed before the fork point do
    not run in the branch, the branch's own committed units are not redone, and the original
    run is untouched."""
    effects = tmp_path / "effects.jsonl"
    with open_checkpointer(shared_url) as store:
        original = Runner(PLAN, store, tasks.TASKS).run({}).execution_id
        rows_before = [(r.checkpoint_id, r.node_id) for r in store.rows(original)]
        origin = next(r for r in store.rows(original) if r.node_id == "judge")
        before_origin = checks.committed_units(store, PLAN, original) - Counter(
            u for u in (checks.unit_of(PLAN, r) for r in store.rows(original)
                        if r.checkpoint_id > origin.checkpoint_id) if u is not None)
    killed = launch.run_fresh({"url": shared_url, "action": "fork", "execution_id": original,
                               "checkpoint_id": origin.checkpoint_id, "crash": spec,
                               "effects": str(effects)}, tmp_path)
    assert killed.killed, killed.describe()
    with open_checkpointer(shared_url) as store:
        (branch,) = [r.execution_id for r in store.list_runs()
                     if r.parent_execution_id == original]
        committed = checks.committed_units(store, PLAN, branch)
    resumed = launch.run_fresh({"url": shared_url, "action": "resume", "execution_id": branch,
                                "effects": str(effects)}, tmp_path)
    result = resumed.result
    assert result is not None and result["outcome"] == "completed", resumed.describe()
    assert result["state"] == REFERENCE.state and result["output"] == REFERENCE.output
    lines = read_effects(effects)
    ran = checks.executions(lines, eid=branch)
    again = checks.executions(lines, eid=branch, pids={result["pid"]})
    assert not set(ran) & set(before_origin), ran
    assert set(ran) == set(reference_units) - set(before_origin)
    assert all(again[unit] == 0 for unit in committed), (committed, again)
    with open_checkpointer(shared_url) as store:
        assert checks.run_ends(store, branch) == ["completed"]
        assert [(r.checkpoint_id, r.node_id) for r in store.rows(original)] == rows_before
        fork_rows = [r for r in store.rows(branch) if r.step_type == "fork_origin"]
        assert [r.parent_checkpoint_id for r in fork_rows] == [origin.checkpoint_id]
