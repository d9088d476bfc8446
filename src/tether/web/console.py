"""The console's operations over the store, as typed values the pages and the API render.

Reading: the inbox, one approval, runs, one run. Acting: answering a pause (the store's atomic
claim, so of any number of people or bots answering one pause exactly one decision is
recorded, with its resolver and comment; everyone else learns who answered and when), minting
an approval link, and asking the fleet to resume, fork or cancel. Nothing here runs a task.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tether.compiler.plan import Plan
from tether.errors import (
    CheckpointNotFound,
    ForkError,
    InputError,
    NotFoundError,
    ResumeError,
    RunStateError,
    TetherError,
    UsageError,
)
from tether.runtime.agent.answers import is_tool_approval
from tether.runtime.fork_patch import refuse_ineffective_fork
from tether.runtime.plans import stored_plan
from tether.runtime.resume import approval_node
from tether.runtime.timer_answers import refuse_after_timeout
from tether.runtime.timer_rules import refuse_human_answer
from tether.status import RUN_END, RunStatus
from tether.stores.base import Checkpointer
from tether.stores.queueing import CancelOutcome
from tether.stores.records import (
    CheckpointRow,
    Decision,
    PendingCursor,
    PendingInterrupt,
    RunCursor,
    RunRecord,
    utc,
)
from tether.web.auth import Identity
from tether.web.fleet import Fleet
from tether.web.forms import Decision as Button
from tether.web.forms import Form
from tether.web.links import Links, MintedLink
from tether.web.tool_form import ToolForm, reasoning_of

log = logging.getLogger("tether.web.console")

MAX_COMMENT = 4000
MAX_ANSWER_BYTES = 64 * 1024
TIMELINE_PAGE = 100


class NotFound(NotFoundError):
    """No such run, approval or checkpoint (HTTP 404)."""


class Conflict(RunStateError):
    """The run is not in a state that allows the action (HTTP 409)."""


class BadRequest(UsageError):
    """A request value that cannot be used (HTTP 422), naming its field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# -- cursors in URLs ----------------------------------------------------------------------------
def encode_cursor(parts: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


def decode_cursor(text: str | None, size: int) -> list[Any] | None:
    if not text:
        return None
    try:
        parts = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        parts = None
    if not (isinstance(parts, list) and len(parts) == size and isinstance(parts[0], int | float)
            and all(isinstance(p, str) for p in parts[1:])):
        raise BadRequest("before", "not a page cursor this console made")
    return parts


# -- values -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Page:
    """One page of a list and the cursor of the next (None on the last)."""

    items: list[Any]
    next: str | None


@dataclass(frozen=True)
class ApprovalView:
    """One pause: waiting (``pending``), or answered (``decision``)."""

    run: RunRecord
    checkpoint_id: str
    pending: PendingInterrupt | None
    decision: Decision | None
    form: Form | ToolForm
    is_approval: bool
    timed_out: str | None = None
    """Why no answer is taken any more: the approval's deadline passed (see docs/runtime.md,
    Approval deadlines hold)."""


@dataclass(frozen=True)
class Recorded:
    """The answer was recorded (this request won the claim)."""

    decision: Decision
    continued: bool  # a worker in this console continues the run


@dataclass(frozen=True)
class AlreadyAnswered:
    """Someone else answered first: who and when."""

    by: str | None
    at: datetime | None


@dataclass(frozen=True)
class Invalid:
    """The answer does not fit the form: the problems by field."""

    errors: dict[str, list[str]]
    values: dict[str, Any]


Outcome = Recorded | AlreadyAnswered | Invalid


@dataclass(frozen=True)
class Step:
    """One checkpoint as the timeline shows it: the stored row with its JSON fields read,
    but no state snapshot folded (a run with a large state pages fast)."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    node_id: str
    node_index: int
    step_type: str
    status: str
    agent_path: str
    created_at: datetime
    node_input: Any
    node_output: Any
    interrupt_reason: str | None
    interrupt_context: Any

    @classmethod
    def of(cls, row: CheckpointRow) -> Step:
        return cls(row.checkpoint_id, row.parent_checkpoint_id, row.node_id, row.node_index,
                   row.step_type, row.status, row.agent_path, utc(row.created_at),
                   _loads(row.node_input), _loads(row.node_output), row.interrupt_reason,
                   _loads(row.interrupt_context))


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # shown as it is stored


@dataclass(frozen=True)
class TimelineRow:
    step: Step
    decision: Decision | None


def timeline(store: Checkpointer, execution_id: str, after: str | None, limit: int,
             decisions: list[Decision]) -> tuple[list[TimelineRow], str | None]:
    """A page of the run's steps with the decision each interrupted step got, and the
    ``after`` of the next page (None on the last)."""
    by_checkpoint = {d.checkpoint_id: d for d in decisions}
    rows = store.page_rows(execution_id, after, limit + 1)
    nxt = rows[limit - 1].checkpoint_id if len(rows) > limit else None
    return [TimelineRow(Step.of(r), by_checkpoint.get(r.checkpoint_id))
            for r in rows[:limit]], nxt


@dataclass(frozen=True)
class RunView:
    """Everything the run page shows."""

    run: RunRecord
    plan: Plan | None
    statuses: dict[str, str]
    output: Any
    pending: list[PendingInterrupt]
    decisions: list[Decision]
    timeline: list[TimelineRow]
    timeline_next: str | None
    timeline_after: str | None
    forkable: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.run.status in (RunStatus.COMPLETED, RunStatus.FAILED)

    @property
    def awaiting_worker(self) -> bool:
        """Paused, but answered since: waiting for a worker to continue it."""
        return self.run.status == RunStatus.PAUSED and any(
            d.created_at > self.run.updated_at for d in self.decisions)


class Console:
    """The console's operations (one per app; thread-safe as its store is)."""

    def __init__(self, store: Checkpointer, fleet: Fleet, links: Links) -> None:
        self.store = store
        self.fleet = fleet
        self.links = links

    # -- reading -----------------------------------------------------------------------------
    def inbox(self, before: str | None = None, limit: int = 50) -> Page:
        cursor = decode_cursor(before, 3)
        entries = self.store.pending_page(
            PendingCursor(*cursor) if cursor else None, limit + 1)
        nxt = encode_cursor(PendingCursor.of(entries[limit - 1].pending)) \
            if len(entries) > limit else None
        return Page(entries[:limit], nxt)

    def runs(self, status: str | None = None, workflow: str | None = None,
             before: str | None = None, limit: int = 50) -> Page:
        if status is not None and status not in {s.value for s in RunStatus}:
            raise BadRequest("status", f"unknown status {status[:40]!r} (running, paused, "
                             "completed, failed)")
        cursor = decode_cursor(before, 2)
        found = self.store.find_runs(status=status, workflow=workflow or None,
                                     before=RunCursor(*cursor) if cursor else None,
                                     limit=limit + 1)
        nxt = encode_cursor(RunCursor.created(found[limit - 1])) if len(found) > limit \
            else None
        return Page(found[:limit], nxt)

    def get_run(self, execution_id: str) -> RunRecord:
        """The run an execution id, or a unique prefix of 8 or more characters, names."""
        run = self.store.get_run(self.store.resolve_execution_id(execution_id))
        if run is None:  # pruned since the lookup
            raise NotFound(f"no run {execution_id!r}")
        return run

    def checkpoint_id(self, execution_id: str, text: str) -> str:
        """The checkpoint id of the run that ``text`` gives in full or by a unique prefix or
        suffix."""
        return self.store.resolve_checkpoint_id(execution_id, text)

    def plan_of(self, run: RunRecord) -> Plan | None:
        try:
            return stored_plan(self.store, run)
        except TetherError:
            return None

    def approval(self, execution_id: str, checkpoint_id: str) -> ApprovalView:
        run = self.get_run(execution_id)
        execution_id = run.execution_id
        try:
            checkpoint_id = self.checkpoint_id(execution_id, checkpoint_id)
        except CheckpointNotFound:
            raise NotFound(f"run {execution_id!r} has no pause at checkpoint "
                           f"{checkpoint_id!r}") from None
        pending = next((p for p in self.store.list_pending(execution_id)
                        if p.checkpoint_id == checkpoint_id), None)
        decision = None if pending is not None else next(
            (d for d in self.store.decisions(execution_id) if d.checkpoint_id == checkpoint_id),
            None)
        if pending is None and decision is None:
            raise NotFound(f"run {execution_id!r} has no pause at checkpoint {checkpoint_id!r}")
        plan = self.plan_of(run)
        node = approval_node(plan, pending) if plan is not None and pending is not None \
            else None
        form: Form | ToolForm = Form(node.approval.form if node is not None else None)
        if pending is not None and is_tool_approval(pending):
            form = self._tool_form(pending)
        return ApprovalView(run, checkpoint_id, pending, decision, form, node is not None,
                            self._deadline_passed(run, plan, pending, decision))

    def _tool_form(self, pending: PendingInterrupt) -> ToolForm:
        """The form of a tool approval, with the model's text beside the call."""
        paused = self.store.get(pending.execution_id, pending.checkpoint_id)
        reasoning = reasoning_of(paused.state_snapshot, str(pending.context["call_id"])) \
            if paused is not None else None
        return ToolForm(pending, reasoning)

    @staticmethod
    def _deadline_passed(run: RunRecord, plan: Plan | None, pending: PendingInterrupt | None,
                         decision: Decision | None) -> str | None:
        """The refusal an answer gets after the approval's deadline, or None (the timeout
        wins: answered by it, or still waiting for a worker to apply it)."""
        try:
            if decision is not None:
                refuse_after_timeout(decision)
            if plan is not None and pending is not None:
                refuse_human_answer(run.execution_id, plan, pending)
        except ResumeError as exc:
            return str(exc)
        return None

    def run_view(self, execution_id: str, after: str | None = None) -> RunView:
        run = self.get_run(execution_id)
        execution_id = run.execution_id
        after = self.checkpoint_id(execution_id, after) if after else None
        plan = self.plan_of(run)
        last = self.store.latest_forkable(execution_id)
        nodes = (last.state_snapshot.get("nodes") or {}) if last is not None else {}
        statuses = {k: str(v.get("status", "pending")) for k, v in nodes.items()
                    if isinstance(v, dict)}
        if plan is not None and run.status == RunStatus.RUNNING:
            _mark_running(plan, statuses)
        final = self.store.last_row(execution_id)
        output = _loads(final.node_output) if final is not None and \
            final.node_id == RUN_END and final.status == "completed" else None
        decisions = self.store.decisions(execution_id)
        steps, nxt = timeline(self.store, execution_id, after, TIMELINE_PAGE, decisions)
        return RunView(run, plan, statuses, output, self.store.list_pending(execution_id),
                       decisions, steps, nxt, after)

    # -- acting ------------------------------------------------------------------------------
    def answer(self, execution_id: str, checkpoint_id: str, who: Identity,
               button: Button | None, values: Mapping[str, Any],
               comment: str | None) -> Outcome:
        """Validate and record an answer; exactly one of any number of concurrent callers
        gets :class:`Recorded` (the store's claim), the others :class:`AlreadyAnswered`."""
        view = self.approval(execution_id, checkpoint_id)
        execution_id, checkpoint_id = view.run.execution_id, view.checkpoint_id
        self._refuse_after_deadline(view)
        if view.pending is None:
            return self._answered(view.decision)
        comment = (comment or "").strip() or None
        if comment is not None and len(comment) > MAX_COMMENT:
            return Invalid({"comment": [f"a comment is at most {MAX_COMMENT:,} characters"]},
                           dict(values))
        answer, errors = view.form.answer(button, values)
        if errors:
            return Invalid(errors, dict(values))
        if len(json.dumps(answer, ensure_ascii=False).encode()) > MAX_ANSWER_BYTES:
            return Invalid({"values": [f"an answer is at most {MAX_ANSWER_BYTES:,} bytes of "
                                       "JSON"]}, dict(values))
        claimed = self.store.claim(view.pending, answer, resolver=who.name, comment=comment)
        if claimed is None:
            return self._answered(self._decision(execution_id, checkpoint_id))
        decision = self._decision(execution_id, checkpoint_id)
        assert decision is not None
        self.fleet.answered(execution_id)
        return Recorded(decision, self.fleet.can_run)

    @staticmethod
    def _refuse_after_deadline(view: ApprovalView) -> None:
        """Conflict for an approval whose deadline passed (docs/decisions.md)."""
        if view.timed_out is not None:
            raise Conflict(view.timed_out)

    def _decision(self, execution_id: str, checkpoint_id: str) -> Decision | None:
        return next((d for d in self.store.decisions(execution_id)
                     if d.checkpoint_id == checkpoint_id), None)

    @staticmethod
    def _answered(decision: Decision | None) -> AlreadyAnswered:
        if decision is None:  # the run moved on (pruned, or re-asked): nobody to name
            return AlreadyAnswered(None, None)
        return AlreadyAnswered(decision.resolver, decision.created_at)

    def mint_link(self, execution_id: str, checkpoint_id: str,
                  recipient: str | None) -> MintedLink:
        view = self.approval(execution_id, checkpoint_id)
        self._refuse_after_deadline(view)
        if view.pending is None:
            raise Conflict("this pause was already answered; a link to it would do nothing")
        recipient = (recipient or "").strip() or None
        if recipient is not None and (len(recipient) > 100 or not recipient.isprintable()):
            raise BadRequest("recipient", "a recipient is 1 to 100 printable characters")
        return self.links.mint(view.pending, recipient)

    def resume(self, execution_id: str) -> None:
        run = self.get_run(execution_id)
        execution_id = run.execution_id
        if run.status != RunStatus.FAILED:
            raise Conflict(f"run {execution_id!r} is {run.status}: only a failed run is "
                           "resumed from the console (a paused one is answered)")
        self.fleet.resume(execution_id)

    def fork(self, execution_id: str, checkpoint_id: str | None,
             patch: Any) -> str | None:
        run = self.get_run(execution_id)
        execution_id = run.execution_id
        if patch is not None and not isinstance(patch, dict):
            raise BadRequest("patch", "a state patch is a JSON object (for example "
                             '{"inputs": {"amount": 50}})')
        if checkpoint_id:
            checkpoint_id = self.checkpoint_id(execution_id, checkpoint_id)
            found = self.store.get(execution_id, checkpoint_id)
            if found is None:
                raise NotFound(f"run {execution_id!r} has no checkpoint {checkpoint_id!r}")
            if found.node_id == RUN_END:
                raise BadRequest("checkpoint_id", "that is the run's end marker, not a "
                                 "point to fork from")
        plan = self.plan_of(run)
        try:
            if patch and plan is not None:  # refused here, before a worker is asked
                refuse_ineffective_fork(self.store, run, plan, checkpoint_id or None, patch)
            return self.fleet.fork(execution_id, checkpoint_id or None, patch)
        except (ForkError, InputError) as exc:
            raise BadRequest("patch", str(exc)) from None
        except CheckpointNotFound as exc:
            raise NotFound(str(exc)) from None

    def cancel(self, execution_id: str, who: Identity) -> CancelOutcome:
        """Cancel a run (the workers' cancel request): one nothing executes ends
        ``cancelled`` at once; one a worker holds stops at its next node boundary."""
        run = self.get_run(execution_id)
        execution_id = run.execution_id
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            raise Conflict(f"run {execution_id!r} already ended ({run.status})")
        outcome = self.store.request_cancel(execution_id, time.time())
        if outcome is None:
            raise NotFound(f"no run with execution id {execution_id!r}")
        if outcome == CancelOutcome.FINISHED:
            raise Conflict(f"run {execution_id!r} already ended")
        log.info("run %s: cancel %s by %s", execution_id, outcome, who.name)
        return outcome


def _mark_running(plan: Plan, statuses: dict[str, str]) -> None:
    """In a running run, nodes with no entry whose dependencies all finished are running
    (or about to: a node's first checkpoint is written when it ends)."""
    finished = {"completed", "skipped", "failed", "upstream_failed"}
    for node in plan.nodes:
        if node.id not in statuses and all(statuses.get(d) in finished
                                           for d in node.waits_for):
            statuses[node.id] = "running"
