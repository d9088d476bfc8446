"""The resume protocol: what ``aresume`` does, decided from one reading of the run.

==============================  ================  ===========================================
the run                         the caller passes  result
==============================  ================  ===========================================
finished (completed run_end)    anything          ``AlreadyResumed``, nothing written
a unit waits (pending row)      ``Resume``        claim that row (atomic; ``node=`` picks one
                                                  when several wait); the unit runs again with
                                                  the answer, other runnable work goes on
paused, nothing answered        nothing           ``ResumeError``, nothing changed
failed / crashed / answered     nothing           take the lease; run what is not committed,
                                                  applying every claimed answer
held by another live attempt    anything          ``AlreadyResumed`` (a claimed answer stays
                                                  recorded: the holder applies it)
==============================  ================  ===========================================

A worker's claimed run (:class:`Claimed`) is decided by the same table from fewer reads: the
claim's ``UPDATE ... RETURNING`` already wrote the lease (owner = the claim's token), counted
the attempt and returned the run row, so the run row is not read again, the lease is not
taken again, and the attempt number comes from that row; the pending rows are read once (for
a due approval and for the decision), and a submitted run's first claim (``Claimed.fresh``)
reads no checkpoints, pending rows or decisions at all: it has none. Nobody else writes the
run's checkpoints, pending rows or status while the claim's lease holds (every such write is
fenced on its token), so the checkpoint rows read after the claim answer "finished?" as the
acquire-then-check of an unclaimed resume does.

A value given for a unit that no longer waits is matched against what happened: the same
answer a claimer recorded before it died recovers the run (as without a value); a unit that
failed after its answer gets the new answer in place of the old; anything else is
``AlreadyResumed`` (someone answered first) or ``ResumeError`` (nothing is waiting). An
approval whose deadline answered it (resolver ``timeout``) keeps that answer: a later value
is ``ResumeError`` ("timed out at T"), whether its ``on_timeout`` failed the run, skipped it
or answered it; resuming without a value applies the timeout again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tether.errors import AlreadyResumed, ResumeError, ResumeValueError
from tether.kinds import NodeKind
from tether.paths import StatePath
from tether.runtime.agent.answers import approval_problems
from tether.runtime.answers import adopt_waits, apply_decisions
from tether.runtime.attempt import Attempt
from tether.runtime.context import Resume
from tether.runtime.execution import Readiness
from tether.runtime.invoke import check_values
from tether.runtime.journal import Journal
from tether.runtime.pinning import check_compatible
from tether.runtime.plans import PlanSource, check_tasks, stored_plan
from tether.runtime.renaming import address_after, rename_state
from tether.runtime.results import RunResult
from tether.runtime.state import RunState, split_address
from tether.runtime.timer_answers import TIMEOUT_RESOLVER, refuse_after_timeout, timed_out
from tether.runtime.timer_rules import not_due, refuse_human_answer, wake_sleeps
from tether.runtime.values import to_json
from tether.status import RUN_END, RunStatus, UnitStatus
from tether.stores.base import Checkpointer
from tether.stores.events import AnswerChannel
from tether.stores.owners import describe_owner, provably_dead
from tether.stores.records import Decision, PendingInterrupt, RunRecord

if TYPE_CHECKING:
    from tether.compiler.plan import ApprovalNode, Plan
    from tether.runtime.runner import Runner


@dataclass(frozen=True)
class Claimed:
    """A run a worker's claim already holds (see the module docstring).

    Attributes:
        token: the owner token the claim wrote into the run row.
        run: the run row as the claim's ``UPDATE ... RETURNING`` left it (running, owned by
            ``token``, ``attempt`` counted).
        valid_until: when the claim's lease runs out by this process's monotonic clock
            (measured from before the claim was sent, as a renewal's is).
        on_lost: called with the reason, from whichever thread finds it out, once the
            attempt's lease is lost (``Attempt.watch_lost``).
        worker: the claiming worker's id (``tether workers``), for the run's history.
        fresh: the claim took the run from the queue before any attempt ever held it (its
            row's ``attempt`` was 0: a submitted run's first claim). No attempt has written
            for it, so it has no checkpoints, pending rows or decisions, and nobody else
            can write one while the claim holds it (every such write is fenced on the
            holder's token, and answers need a pending row): resume reads none of them.
    """

    token: str
    run: RunRecord
    valid_until: float
    on_lost: Callable[[str], None] | None = None
    worker: str | None = None
    fresh: bool = False


def first_claim(reason: str, run: RunRecord) -> bool:
    """Whether a claim (its ``reason`` and the run row it returned) took a submitted run
    that no attempt ever held: taken from the queue, its ``attempt`` counted from 0 to 1
    (every other way to hold a run counts its attempt: ``run``, ``fork``, a lease's
    takeover, an earlier claim). Its claim is :attr:`Claimed.fresh`."""
    return reason == "queued" and run.attempt == 1


@dataclass
class Prepared:
    """A run this attempt now holds, ready to drive."""

    plan: Plan
    state: RunState
    journal: Journal
    attempt: Attempt
    run: RunRecord


def approval_node(plan: Plan, pending: PendingInterrupt) -> ApprovalNode | None:
    """The approval node (in its sub-plan) that asked for ``pending``; None when the unit
    that asked is not an approval (a task's or a tool's ``interrupt()``), or not in ``plan``.
    Its ``approval.form`` is what an answer is checked against (:func:`check_values`)."""
    try:
        level, _ = RunState({}).locate(plan, pending.agent_path, pending.node_id)
    except KeyError:
        return None
    node = level.by_id.get(split_address(pending.node_id)[0])  # None: an agent's pause
    return node if node is not None and node.kind is NodeKind.APPROVAL else None


def answer_of(resume: Resume | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON form of a resume value."""
    value, _ = to_json(dict(resume), "the resume values")
    return dict(value)


class Resumption:
    """One call of ``aresume`` (see the module docstring)."""

    def __init__(self, runner: Runner, store: Checkpointer, run: RunRecord,
                 resume: Resume | Mapping[str, Any] | None, node: str | None,
                 plan: PlanSource | None, resolver: str | None = None,
                 comment: str | None = None, *, claimed: Claimed | None = None,
                 pending: list[PendingInterrupt] | None = None, fired: bool = False,
                 channel: str | None = None) -> None:
        self.runner = runner
        self.store = store
        self.run = run
        self.execution_id = run.execution_id
        self.answer = answer_of(resume) if resume is not None else None
        self.node = node
        self.explicit_plan = plan
        self.resolver = resolver
        self.comment = comment
        self.attempt = Attempt(store, run.execution_id, runner.lease_seconds,
                               token=claimed.token if claimed else None,
                               number=claimed.run.attempt if claimed else 1)
        self.owned = claimed is not None  # the claim took the lease: no acquire
        if claimed is not None:
            self.attempt.valid_until = claimed.valid_until
            self.attempt.watch_lost = claimed.on_lost
            self.attempt.claimed = True
            started = claimed.run.started_at  # set to the claim's time when it was queued
            self.attempt.first = started is not None and \
                abs(started - claimed.run.updated_at.timestamp()) < 0.001
        else:
            self.attempt.first = False
        self.fired = fired  # the value is a due timer's answer (fire_due), not a human's
        self.channel = channel or (AnswerChannel.TIMER if fired else AnswerChannel.PYTHON)
        """Through which door the answer came (recorded with the claim, for the history)."""
        self.attempt.reason = "answered" if resume is not None else (
            "claimed" if claimed is not None else "resumed")
        self.attempt.worker = claimed.worker if claimed is not None else None
        self.claimed = claimed is not None  # a worker's claim already holds the run
        self.fresh = claimed is not None and claimed.fresh  # nothing to read (Claimed)
        self.pending: list[PendingInterrupt] = []
        self._pending_read = pending  # the pending rows, when the caller read them already

    def prepare(self) -> Prepared | RunResult:
        """Decide; take the run (and claim the answer) or raise; RunResult when the answer
        was recorded for a run another attempt executes."""
        store, eid = self.store, self.execution_id
        if self.run.status == RunStatus.COMPLETED:
            raise self._finished()
        if self.run.status == RunStatus.CANCELLED:
            raise ResumeError(eid, "it was cancelled; a cancelled run never runs again "
                              "(fork it to start over from a checkpoint)")
        last, checkpoint = store.resume_point(eid, self.run.inputs) if not self.fresh \
            else (None, None)
        if last is not None and last.node_id == RUN_END and last.status == "completed":
            raise AlreadyResumed(eid)
        plan = self.runner.plan_for(self.run, self.explicit_plan)
        check_tasks(plan, frozenset(self.runner.tasks))
        state = RunState.from_snapshot(checkpoint.state_snapshot) if checkpoint is not None \
            else RunState.new(dict(self.run.inputs or {}))
        if plan.fingerprint != self.run.plan_fingerprint:
            check_compatible(eid, stored_plan(store, self.run), plan, state.data)
        renamed = rename_state(plan, state.data)  # a run `tether upgrade` moved (issue 24)
        pending = self._pending_read if self._pending_read is not None else \
            store.list_pending(eid)
        self.pending = pending
        decisions = store.decisions(eid) if not self.fresh else []
        adopt_waits(plan, state, pending, decisions)
        if self.answer is not None:
            outcome = self._answer(plan, state, pending, decisions)
            if outcome is not None:
                return outcome
        changed = None
        if self.answer is None and pending:
            changed = self._reenter(plan, state, decisions)
            if Readiness(plan, state).take() is None and self.claimed:
                # A worker's recovery where nothing can run: the owner died after recording
                # a pause, before marking the run paused. Pause it under the claim, as the
                # driver would have (fenced; answers claimed meanwhile are applied instead).
                answered = store.pause_run(eid, self.attempt.token, list(state.waiting(plan)))
                if not answered:
                    return RunResult(RunStatus.PAUSED, eid, None, state.data, tuple(pending))
                changed += apply_decisions(plan, state, answered)
            if Readiness(plan, state).take() is None:
                not_due(eid, plan, pending)
                first = pending[0]
                raise ResumeError(eid, f"it is paused at node '{first.address}' waiting for "
                                  f"input ({first.reason}); resume it with Resume(...)",
                                  node_id=first.node_id)
        self._take()
        if plan.fingerprint != self.run.plan_fingerprint:
            store.set_run_plan(eid, plan.fingerprint, plan.to_json(), self.attempt.token)
        journal = Journal(store, eid, state.data, snapshot_every=self.runner.snapshot_every,
                          last_id=last.checkpoint_id if last else None, attempt=self.attempt)
        if changed is None:
            fresh = store.decisions(eid) if self.answer is not None else decisions
            changed = self._reenter(plan, state, fresh)
        for path in changed:
            journal.mark(path)
        if renamed:  # rewritten whole: the old ids gone from the next snapshot's base
            journal.mark(("nodes",))
            journal.mark(("counters",))
        return Prepared(plan, state, journal, self.attempt, self.run)

    def record(self) -> PendingInterrupt:
        """Only claim the answer (checked against the approval's form), taking no lease and
        running nothing: the continuation is left to another process (a worker)."""
        assert self.answer is not None
        if self.run.status == RunStatus.COMPLETED:
            raise self._finished()
        if self.run.status == RunStatus.CANCELLED:
            raise AlreadyResumed(self.execution_id, f"it is {self.run.status}")
        plan = self.runner.plan_for(self.run, self.explicit_plan)
        self._readdress(plan)
        target = self._target(self.store.list_pending(self.execution_id))
        if target is None and self.fired:
            raise AlreadyResumed(self.execution_id, "the timer was already fired")
        if target is None:
            for decision in self.store.decisions(self.execution_id):
                if self._names(decision):
                    refuse_after_timeout(decision)
            self._refuse_late()
            raise ResumeError(self.execution_id, "it is not waiting for input")
        if not self.fired:
            refuse_human_answer(self.execution_id, plan, target)
            self._validate(plan, target)
        claim = self.store.claim(target, self.answer, resolver=self.resolver,
                                 comment=self.comment, channel=self.channel)
        if claim is None:
            raise self._answered_first(target)
        return claim.pending

    def _reenter(self, plan: Plan, state: RunState,
                 decisions: list[Decision]) -> list[StatePath]:
        """Failed units runnable again, answered units given their answers, waiting sleeps
        re-entered (due ones only when timers park): changed paths."""
        return [*state.reopen(plan, forget_answers=False),
                *apply_decisions(plan, state, decisions),
                *wake_sleeps(plan, state, self.pending, park=self.runner.park_timers)]

    # -- with a value ------------------------------------------------------------------------
    def _answer(self, plan: Plan, state: RunState, pending: list[PendingInterrupt],
                decisions: list[Decision]) -> RunResult | None:
        assert self.answer is not None
        self._readdress(plan)
        target = self._target(pending)
        if self.fired:
            if target is None:
                raise AlreadyResumed(self.execution_id, "the timer was already fired")
        elif target is None:
            self._late_answer(plan, state, decisions)
            return None
        else:
            refuse_human_answer(self.execution_id, plan, target)
            self._validate(plan, target)
        now = time.time()
        claim = self.store.claim(target, self.answer, owner=self.attempt.token,
                                 until=self.attempt.until(), now=now,
                                 steal_from=self._dead_holder(), resolver=self.resolver,
                                 comment=self.comment, channel=self.channel)
        if claim is None:
            raise self._answered_first(target)
        if claim.owned:
            self._taken()
            return None
        fresh = self.store.get_run(self.execution_id)
        holder = describe_owner(fresh.owner if fresh else None)
        return RunResult(RunStatus.RUNNING, self.execution_id, None, state.data,
                         message=f"answer recorded for '{target.address}'; the run is being "
                         f"executed by {holder}, which applies it")

    def _readdress(self, plan: Plan) -> None:
        """An address written before ``tether upgrade`` moved the run to a plan that renamed
        its node names the pause by its new id (links and commands sent before the deploy
        keep working)."""
        if self.node is not None:
            self.node = address_after(plan, self.node)

    def _target(self, pending: list[PendingInterrupt]) -> PendingInterrupt | None:
        """The pending row the value answers (by ``node=`` when several wait)."""
        if self.node is None:
            if len(pending) > 1:
                names = ", ".join(p.address for p in pending)
                raise ResumeError(self.execution_id, f"{len(pending)} interrupts are pending "
                                  f"({names}); say which one to answer (node=..., --node)")
            return pending[0] if pending else None
        for candidate in pending:
            if candidate.names(self.node):
                return candidate
        return None

    def _validate(self, plan: Plan, target: PendingInterrupt) -> None:
        assert self.answer is not None
        problems = approval_problems(self.runner.tasks, target, self.answer)
        if problems:
            raise ResumeValueError(self.execution_id, target.node_id, problems)
        node = approval_node(plan, target)
        if node is not None and node.approval.form is not None:
            _, wrong = check_values(node.approval.form, self.answer, "field")
            if wrong:
                raise ResumeValueError(self.execution_id, node.id, wrong)

    def _answered_first(self, target: PendingInterrupt) -> AlreadyResumed:
        for decision in self.store.decisions(self.execution_id):
            if decision.checkpoint_id == target.checkpoint_id:
                who = decision.resolver or "another resumer"
                moment = decision.created_at.astimezone(UTC).isoformat(timespec="seconds")
                return AlreadyResumed(
                    self.execution_id, f"'{target.address}' was already answered by {who} at "
                    f"{moment}", answered_by=decision.resolver,
                    answered_at=decision.created_at)
        return AlreadyResumed(self.execution_id, "another resumer answered it first")

    def _late_answer(self, plan: Plan, state: RunState, decisions: list[Decision]) -> None:
        """A value for a unit with no pending row: recover, re-answer, or refuse."""
        assert self.answer is not None
        waiting = state.waiting(plan)
        claimed = [d for d in decisions if d.checkpoint_id in waiting and self._names(d)]
        if claimed:
            decision = claimed[-1]
            refuse_after_timeout(decision)
            if decision.value == self.answer:
                return  # the claimer died: continue as a resume without a value would
            fresh = self.store.get_run(self.execution_id) or self.run
            if self._held_by_other(fresh):
                raise self._answered_first(PendingInterrupt(
                    self.execution_id, decision.checkpoint_id, decision.node_id,
                    decision.agent_path, "", None, decision.created_at))
            self._take()  # the claimer died before its node committed: the new answer wins
            self._replace(decision)
            return
        if any(d.value == self.answer and self._names(d) and d.resolver != TIMEOUT_RESOLVER
               for d in decisions):
            return  # the answer its claimer gave, given again after the claimer died: recover
        failed = self._failed_answered(plan, state, decisions)
        if failed is not None:
            refuse_after_timeout(failed[1])
            self._take()
            unit_state, decision = failed
            unit_state.replace_answer(self.answer)
            self._replace(decision)
            return
        for decision in decisions:
            if self._names(decision):
                refuse_after_timeout(decision)
        self._refuse_late()

    def _finished(self) -> AlreadyResumed:
        """A finished run; for a value, saying so when the approval it names timed out."""
        if self.answer is not None:
            for decision in self.store.decisions(self.execution_id):
                reason = timed_out(decision) if self._names(decision) else None
                if reason is not None:
                    return AlreadyResumed(self.execution_id, f"it has already finished; "
                                          f"{reason}", answered_by=decision.resolver,
                                          answered_at=decision.created_at)
        return AlreadyResumed(self.execution_id)

    def _replace(self, decision: Decision) -> None:
        assert self.answer is not None
        self.store.replace_decision(Decision(
            decision.execution_id, decision.checkpoint_id, decision.node_id,
            decision.agent_path, self.answer, datetime.now(UTC), self.resolver, self.comment),
            self.attempt.token)

    def _names(self, decision: Decision) -> bool:
        return self.node is None or decision.names(self.node)

    def _failed_answered(self, plan: Plan, state: RunState, decisions: list[Decision],
                         ) -> tuple[Any, Decision] | None:
        """The unit that failed after it was answered, with the decision it got."""
        for decision in reversed(decisions):
            if not self._names(decision):
                continue
            try:
                _, path = state.locate(plan, decision.agent_path, decision.node_id)
            except KeyError:
                continue
            unit = state.find(path)
            if unit is not None and unit.status == UnitStatus.FAILED and unit.answers:
                return unit, decision
        return None

    def _refuse_late(self) -> None:
        fresh = self.store.get_run(self.execution_id) or self.run
        if self._held_by_other(fresh):
            raise AlreadyResumed(self.execution_id,
                                 f"it is being executed by {describe_owner(fresh.owner)}")
        if fresh.status == RunStatus.COMPLETED or self.store.finished(self.execution_id):
            raise AlreadyResumed(self.execution_id)
        raise ResumeError(self.execution_id, "it is not waiting for input; resume it without "
                          "a value")

    # -- taking the run ------------------------------------------------------------------------
    def _dead_holder(self) -> str | None:
        holder = self.run.owner
        return holder if holder and provably_dead(holder) else None

    def _held_by_other(self, run: RunRecord) -> bool:
        return bool(run.owner) and run.owner != self.attempt.token and not (
            run.lease_until is not None and run.lease_until < time.time()) and not \
            provably_dead(run.owner)

    def _taken(self) -> None:
        """This attempt holds the run now: read once the attempt number the store counted
        for it in the run row (``run.attempt``; nobody else can change it while we hold)."""
        self.owned = True
        taken = self.store.get_run(self.execution_id)
        if taken is not None:
            self.attempt.number = taken.attempt

    def _take(self) -> None:
        """Acquire the lease for this attempt, or AlreadyResumed naming the holder."""
        if self.owned:
            return
        store, eid = self.store, self.execution_id
        if not store.acquire(eid, self.attempt.token, self.attempt.until(), time.time(),
                             steal_from=self._dead_holder()):
            fresh = store.get_run(eid)
            raise AlreadyResumed(eid, "it is being executed by "
                                 f"{describe_owner(fresh.owner if fresh else None)}")
        self._taken()
        if store.finished(eid):
            self.attempt.release()
            raise AlreadyResumed(eid)
