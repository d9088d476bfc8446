"""The JSON API under ``/api/``: every list and action the pages have, for integrations.

Auth: with ``--auth token``, ``Authorization: Bearer <token>`` (no CSRF token needed), or the
session cookie of a signed-in browser plus ``X-CSRF-Token`` on writes; without it (loopback
only), none. Writes take ``application/json`` only (a cross-site form cannot send that
without the browser asking first, and this API never says yes). Status codes: 401 no or
unknown credentials, 403 CSRF, origin or role, 404 unknown run, pause or checkpoint, 409 the
pause was already answered (``answered_by``, ``answered_at``) or the run's state forbids the
action, 422 values that do not fit (``errors``: ``[{field, message}]``), 503 no worker.

Starting a run (``POST /api/workflows/{name}/runs``) answers 201 with the new run, or 200
with the run an ``Idempotency-Key`` already named (``starts.py``); it needs the role
``approver`` or ``submitter``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from tether.runtime.history import History
from tether.stores.queueing import CancelOutcome
from tether.stores.records import Decision, PendingInterrupt, RunRecord
from tether.trigger import Trigger, TriggerKind
from tether.web.app import web_of
from tether.web.auth import CSRF_HEADER, Forbidden, Identity, Unauthenticated
from tether.web.console import AlreadyAnswered, Invalid, Recorded, Step, timeline
from tether.web.forms import Decision as Button
from tether.web.forms import Form
from tether.web.starts import Start, manual_refusal
from tether.web.tool_form import ToolForm
from tether.web.urls import approval_url, run_url

router = APIRouter(prefix="/api")


# -- models -------------------------------------------------------------------------------------
class DecisionOut(BaseModel):
    checkpoint_id: str
    node_id: str
    agent_path: str
    value: dict[str, Any]
    resolver: str | None
    comment: str | None
    answered_at: datetime

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        return cls(checkpoint_id=d.checkpoint_id, node_id=d.node_id, agent_path=d.agent_path,
                   value=d.value, resolver=d.resolver, comment=d.comment,
                   answered_at=d.created_at)


class PendingOut(BaseModel):
    execution_id: str
    checkpoint_id: str
    workflow: str | None = None
    node_id: str
    agent_path: str
    address: str = Field(description="where the run waits (an agent's tool call: "
                         "agent:<node>/tool:<name>); what --node and the console show")
    reason: str
    context: Any
    waiting_since: datetime
    url: str = Field(description="the approval page")
    api: str = Field(description="GET it for the form, POST an answer to it")

    @classmethod
    def of(cls, p: PendingInterrupt, workflow: str | None = None) -> PendingOut:
        page = approval_url(p.execution_id, p.checkpoint_id)
        return cls(execution_id=p.execution_id, checkpoint_id=p.checkpoint_id,
                   workflow=workflow, node_id=p.node_id, agent_path=p.agent_path,
                   address=p.address, reason=p.reason, context=p.context,
                   waiting_since=p.created_at, url=page,
                   api="/api" + page)


class PendingList(BaseModel):
    items: list[PendingOut]
    next: str | None = Field(description="pass as ?before= for the next page")


class TriggerOut(BaseModel):
    """What started a run (docs/triggers.md, *What started a run*)."""

    kind: str = Field(description="cli, python, api, manual, webhook, schedule or unknown")
    actor: str | None = Field(description="who: the OS user, the console or API user, "
                              "webhook:PATH or schedule:NAME")
    delivery: str | None
    verify: str | None
    tick: str | None
    received_at: str
    headers: dict[str, str] = Field(description="only the headers the webhook lists")
    payload: Any = Field(description="a webhook's JSON body (in a run's own view only; null "
                         "in lists)")
    description: str = Field(description="one line for people, e.g. `manual by alice`")

    @classmethod
    def of(cls, trigger: Trigger, *, payload: bool = False) -> TriggerOut:
        data = trigger.as_dict()
        if not payload:
            data["payload"] = None
        return cls(**data, description=trigger.describe())


class RunOut(BaseModel):
    execution_id: str
    workflow: str
    status: str
    created_at: datetime
    updated_at: datetime
    parent_execution_id: str | None
    parent_checkpoint_id: str | None
    error: Any
    url: str
    trigger: TriggerOut | None = Field(
        None, description="what started the run (null for runs stored before it was kept)")

    @classmethod
    def of(cls, r: RunRecord) -> RunOut:
        return cls(execution_id=r.execution_id, workflow=r.workflow, status=r.status,
                   created_at=r.created_at, updated_at=r.updated_at,
                   parent_execution_id=r.parent_execution_id,
                   parent_checkpoint_id=r.parent_checkpoint_id, error=r.error,
                   url=run_url(r.execution_id),
                   trigger=TriggerOut.of(r.trigger) if r.trigger else None)


class RunList(BaseModel):
    items: list[RunOut]
    next: str | None


class CheckpointOut(BaseModel):
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
    decision: DecisionOut | None = None

    @classmethod
    def of(cls, c: Step, decision: Decision | None) -> CheckpointOut:
        return cls(checkpoint_id=c.checkpoint_id, parent_checkpoint_id=c.parent_checkpoint_id,
                   node_id=c.node_id, node_index=c.node_index, step_type=c.step_type,
                   status=c.status, agent_path=c.agent_path, created_at=c.created_at,
                   node_input=c.node_input, node_output=c.node_output,
                   interrupt_reason=c.interrupt_reason, interrupt_context=c.interrupt_context,
                   decision=DecisionOut.of(decision) if decision else None)


class CheckpointList(BaseModel):
    items: list[CheckpointOut]
    next: str | None = Field(description="pass as ?after= for the next page")


class RunDetail(RunOut):
    inputs: Any
    output: Any
    nodes: dict[str, str] = Field(description="each node's status")
    pending: list[PendingOut]
    decisions: list[DecisionOut]


class FieldOut(BaseModel):
    name: str
    type: str
    required: bool
    default: Any
    description: str | None
    enum: list[Any] | None = None


class ToolCallOut(BaseModel):
    """An agent's tool call waiting for approval (``approve_tools``)."""

    tool: str
    arguments: Any = Field(description="the arguments the model gave")
    parameters: Any = Field(description="the tool's JSON Schema, which edited arguments "
                            "must match (None for pauses made before tether recorded it)")
    reasoning: str | None = Field(description="the text the model wrote with the call")


class ApprovalOut(BaseModel):
    execution_id: str
    checkpoint_id: str
    workflow: str
    state: Literal["pending", "answered"]
    pending: PendingOut | None
    decision: DecisionOut | None
    form: list[FieldOut] | None = Field(description="the declared form (None: any answer)")
    buttons: bool = Field(description="whether decision approve/reject sets 'approved'")
    tool_call: ToolCallOut | None = Field(
        default=None, description="an agent's tool approval: answer with values "
        "{approved: true}, {arguments: {...}} (approved with edited arguments) or "
        "{approved: false, message: '...'} (denied; the message is the call's result), or "
        "with decision approve (values.arguments: edited) / reject (values.message)")


class AnswerIn(BaseModel):
    decision: Literal["approve", "reject"] | None = Field(
        default=None, description="sets the boolean 'approved' when the form has one "
        "(or declares no form)")
    values: dict[str, Any] = Field(default_factory=dict, description="the form's fields")
    comment: str | None = None


class AnswerOut(BaseModel):
    status: Literal["recorded"] = "recorded"
    decision: DecisionOut
    continued: bool = Field(description="whether a worker of this console continues the "
                            "run (otherwise any process sharing the store does)")


class LinkIn(BaseModel):
    recipient: str | None = None


class LinkOut(BaseModel):
    url: str
    expires_at: datetime


class ForkIn(BaseModel):
    checkpoint_id: str | None = None
    patch: dict[str, Any] | None = None


class Accepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    execution_id: str | None = None
    detail: str


class Problem(BaseModel):
    detail: str
    errors: list[dict[str, str]] | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem} for code in (401, 403, 404, 409, 422, 503)}


# -- auth ---------------------------------------------------------------------------------------
async def reader(request: Request) -> Identity:
    """The caller (a dependency: no I/O, so it runs on the event loop)."""
    return _reader(request)


def _reader(request: Request) -> Identity:
    who = web_of(request).guard.identify(request)
    if who is None:
        raise Unauthenticated("send Authorization: Bearer <token>")
    return who


def _acting(request: Request, allowed: Callable[[Identity], bool], refusal: str) -> Identity:
    """A caller whose request may change something: same origin, a CSRF token with a
    session, ``allowed`` by its role (else :class:`Forbidden`: ``refusal``, formatted with
    ``name`` and ``role``), and JSON unless it came with a bearer token."""
    who = _reader(request)
    guard = web_of(request).guard
    guard.check_origin(request)
    if who.via == "session":
        guard.check_csrf(request, request.headers.get(CSRF_HEADER))
    if not allowed(who):
        raise Forbidden(refusal.format(name=who.name, role=who.role.value))
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if who.via != "token" and content_type != "application/json":
        raise Forbidden("send the request as application/json (or with a bearer token)")
    return who


async def writer(request: Request) -> Identity:
    """A caller allowed to act, whose request is not a cross-site forgery."""
    return _acting(request, lambda who: who.may_act, "{name} may look but not act (role {role})")


async def submitter(request: Request) -> Identity:
    """A caller allowed to start runs (an approver or a submitter), not a forgery."""
    return _acting(request, lambda who: who.may_submit, "{name} may not start runs (role {role})")


Reader = Depends(reader)
Writer = Depends(writer)
Submitter = Depends(submitter)


# -- lists and reads ----------------------------------------------------------------------------
@router.get("/pending", response_model=PendingList, responses=_ERRORS)
async def pending(request: Request, before: str | None = None,
                  limit: int = Query(50, ge=1, le=500), who: Identity = Reader) -> Response:
    """Pending interrupts (approvals and agent tool pauses), newest first.

    The hot path of integrations that poll: one indexed query, answered on the event loop
    (no thread hop) and serialised once by pydantic."""
    page = web_of(request).console.inbox(before, limit)
    return _json(PendingList(items=[PendingOut.of(e.pending, e.workflow)
                                    for e in page.items], next=page.next))


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


@router.get("/runs", response_model=RunList, responses=_ERRORS)
def runs(request: Request, status: str | None = None, workflow: str | None = None,
         before: str | None = None, limit: int = Query(50, ge=1, le=500),
         who: Identity = Reader) -> RunList:
    """Runs, newest first, filtered by status and workflow."""
    page = web_of(request).console.runs(status, workflow, before, limit)
    return RunList(items=[RunOut.of(r) for r in page.items], next=page.next)


@router.get("/runs/{execution_id:id}/approvals/{checkpoint_id:id}",
            response_model=ApprovalOut, responses=_ERRORS)
def approval(request: Request, execution_id: str, checkpoint_id: str,
             who: Identity = Reader) -> ApprovalOut:
    """One pause: its frozen context and form, or the decision that answered it."""
    view = web_of(request).console.approval(execution_id, checkpoint_id)
    form = view.form
    specs = form.specs if isinstance(form, Form) else None
    tool = ToolCallOut(tool=form.tool, arguments=form.arguments, parameters=form.parameters,
                       reasoning=form.reasoning) if isinstance(form, ToolForm) else None
    return ApprovalOut(
        execution_id=view.run.execution_id, checkpoint_id=view.checkpoint_id,
        workflow=view.run.workflow, tool_call=tool,
        state="pending" if view.pending else "answered",
        pending=PendingOut.of(view.pending, view.run.workflow) if view.pending else None,
        decision=DecisionOut.of(view.decision) if view.decision else None,
        form=None if specs is None else [FieldOut(
            name=s.name, type=s.type, required=s.required, default=s.default,
            description=s.description, enum=list(s.enum) if s.enum is not None else None)
            for s in specs],
        buttons=form.decided_by_buttons)


@router.get("/runs/{execution_id:id}/checkpoints", response_model=CheckpointList,
            responses=_ERRORS)
def checkpoints(request: Request, execution_id: str, after: str | None = None,
                limit: int = Query(100, ge=1, le=1000),
                who: Identity = Reader) -> CheckpointList:
    """The run's checkpoint timeline, oldest first, a page at a time."""
    console = web_of(request).console
    execution_id = console.get_run(execution_id).execution_id
    after = console.checkpoint_id(execution_id, after) if after else None
    steps, nxt = timeline(console.store, execution_id, after, limit,
                          console.store.decisions(execution_id))
    return CheckpointList(items=[CheckpointOut.of(r.step, r.decision) for r in steps],
                          next=nxt)


@router.get("/runs/{execution_id:path}/history", response_model=History, responses=_ERRORS)
def history(request: Request, execution_id: str, after: str | None = None,
            limit: int = Query(200, ge=1, le=100_000), who: Identity = Reader) -> Response:
    """The run's history (``tether show --json``, the same JSON): every node attempt (failed,
    retried, timed out, abandoned, completed), skip with its reason, pause, answer (who,
    through which channel), owner claim, release and lost lease, agent turn and tool call,
    cancel and fork, in order; and each node's state now. Paged by checkpoint: pass
    ``next_after`` back as ``after``."""
    console = web_of(request).console
    console.get_run(execution_id)
    return Response(console.history(execution_id, after or None, limit).to_json(),
                    media_type="application/json")


# -- actions ------------------------------------------------------------------------------------
@router.post("/runs/{execution_id:id}/approvals/{checkpoint_id:id}/link",
             response_model=LinkOut, responses=_ERRORS)
def link(request: Request, execution_id: str, checkpoint_id: str, body: LinkIn,
         who: Identity = Writer) -> LinkOut:
    """Mint a signed one-use approval link (expires after --link-max-age)."""
    minted = web_of(request).console.mint_link(execution_id, checkpoint_id, body.recipient)
    return LinkOut(url=minted.url, expires_at=minted.expires_at)


@router.post("/runs/{execution_id:id}/approvals/{checkpoint_id:id}",
             response_model=AnswerOut, responses=_ERRORS)
def answer(request: Request, execution_id: str, checkpoint_id: str, body: AnswerIn,
           who: Identity = Writer) -> AnswerOut | JSONResponse:
    """Answer a pause. Exactly one of any number of concurrent answers is recorded (200);
    the others get 409 naming who answered and when."""
    outcome = web_of(request).console.answer(
        execution_id, checkpoint_id, who, Button(body.decision) if body.decision else None,
        body.values, body.comment, "api")
    match outcome:
        case Recorded(decision=decision, continued=continued):
            return AnswerOut(decision=DecisionOut.of(decision), continued=continued)
        case AlreadyAnswered(by=by, at=at):
            moment = at.isoformat(timespec="seconds") if at else "an earlier moment"
            return JSONResponse(status_code=409, content=Problem(
                detail=f"already answered by {by or 'someone else'} at {moment}",
                answered_by=by, answered_at=at).model_dump(mode="json"))
        case Invalid(errors=errors):
            listed = [{"field": f, "message": m} for f, ms in errors.items() for m in ms]
            return JSONResponse(status_code=422, content=Problem(
                detail="; ".join(x["message"] for x in listed),
                errors=listed).model_dump(mode="json", exclude_none=True))


@router.post("/runs/{execution_id:id}/resume", response_model=Accepted, responses=_ERRORS,
             status_code=202)
def resume(request: Request, execution_id: str, who: Identity = Writer) -> Accepted:
    """Queue a failed run for the workers of its queue to resume (any process sharing the
    store: ``tether worker``, or ``serve --worker``); ``detail`` says who continues it."""
    web = web_of(request)
    execution_id = web.console.get_run(execution_id).execution_id
    web.console.resume(execution_id)
    run = web.console.get_run(execution_id)
    return Accepted(execution_id=execution_id, detail=web.console.fleet.who_continues(run))


@router.post("/runs/{execution_id:id}/fork", response_model=Accepted, responses=_ERRORS,
             status_code=202)
def fork(request: Request, execution_id: str, body: ForkIn,
         who: Identity = Writer) -> Accepted:
    """Branch a new run from a checkpoint (default: the newest), with a state patch; the
    branch is left to the workers of the original's queue (``detail`` says who)."""
    web = web_of(request)
    branch = web.console.fork(execution_id, body.checkpoint_id, body.patch)
    return Accepted(execution_id=branch,
                    detail=web.console.fleet.who_continues(web.console.get_run(branch)))


@router.post("/runs/{execution_id:id}/cancel", response_model=Accepted, responses=_ERRORS,
             status_code=202)
def cancel(request: Request, execution_id: str, who: Identity = Writer) -> Accepted:
    """Ask for the run to stop at its next node boundary."""
    execution_id = web_of(request).console.get_run(execution_id).execution_id
    outcome = web_of(request).console.cancel(execution_id, who)
    return Accepted(execution_id=execution_id, detail=(
        "cancelled" if outcome == CancelOutcome.CANCELLED else
        "cancellation requested: the worker holding it stops it at its next node boundary"))


@router.get("/runs/{execution_id:id}", response_model=RunDetail, responses=_ERRORS)
def run(request: Request, execution_id: str, who: Identity = Reader) -> RunDetail:
    """A run: status, inputs, output, error, node statuses, pending pauses, decisions."""
    view = web_of(request).console.run_view(execution_id)
    r = view.run
    base = RunOut.of(r).model_dump()
    base["trigger"] = TriggerOut.of(r.trigger, payload=True) if r.trigger else None
    return RunDetail(**base, inputs=r.inputs, output=view.output, nodes=view.statuses,
                     pending=[PendingOut.of(p, r.workflow) for p in view.pending],
                     decisions=[DecisionOut.of(d) for d in view.decisions])


# -- starting runs ------------------------------------------------------------------------------
class WorkflowOut(BaseModel):
    name: str
    fingerprint: str
    inputs: list[FieldOut]
    runs: str = Field(description="POST here to start a run")
    webhook: str | None = Field(default=None, description="where its signed webhook is "
                                "received (on: webhook), e.g. /hooks/deploy")
    manual: bool = Field(default=True, description="whether the caller may start it by hand "
                         "(POST runs): its file has no `on:`, or `on.manual` allows the caller")


class WorkflowList(BaseModel):
    items: list[WorkflowOut]


class StartIn(BaseModel):
    inputs: dict[str, Any] = Field(default_factory=dict, description="the workflow's inputs")
    queue: str = Field(default="default", min_length=1, max_length=200)
    priority: int = Field(default=0, description="higher is claimed first within the queue")


class StartOut(BaseModel):
    execution_id: str
    workflow: str
    status: str
    created: bool = Field(description="false: the Idempotency-Key named an existing run, "
                          "which is returned (HTTP 200) instead of starting another")
    url: str


@router.get("/workflows", response_model=WorkflowList, responses=_ERRORS)
def workflows(request: Request, who: Identity = Reader) -> WorkflowList:
    """The workflows this console may start (``tether serve --workflows``) and their inputs."""
    catalog = web_of(request).catalog
    return WorkflowList(items=[WorkflowOut(
        name=name, fingerprint=plan.fingerprint, runs=f"/api/workflows/{name}/runs",
        webhook=f"/hooks/{plan.webhook.path}" if plan.webhook else None,
        manual=manual_refusal(plan, who.name) is None,
        inputs=[FieldOut(name=i.name, type=i.type, required=i.required, default=i.default,
                         description=i.description,
                         enum=list(i.enum) if i.enum is not None else None)
                for i in plan.inputs])
        for name, plan in sorted(catalog.plans.items())])


@router.post("/workflows/{name}/runs", response_model=StartOut, status_code=201,
             responses={**_ERRORS, 200: {"model": StartOut, "description":
                        "the run the Idempotency-Key already named"}})
async def start(request: Request, name: str, body: StartIn, who: Identity = Submitter,
                idempotency_key: str | None = Header(
                    default=None, description="the dedup key: the same key returns the same "
                    "run (200) for as long as the run is stored; it becomes the run's "
                    "execution id"),
                ) -> JSONResponse:
    """Start (queue) a run of a workflow, as ``tether submit`` does: 201 and the new run, or
    200 and the run an ``Idempotency-Key`` already named (however many requests race).

    (The hot path of ``bench/http_start.py``: only the store's insert leaves the event loop,
    one hop to the app's start threads (``Web.call``), and the answer is written as the
    ``JSONResponse`` of a ``StartOut``, which FastAPI does not validate again in another
    hop.)"""
    web = web_of(request)
    web.catalog.manual_plan(name, who.name)
    done = await web.call(web.catalog.start, web.console.store, name, Start(
        body.inputs, body.queue, body.priority, idempotency_key,
        Trigger(TriggerKind.API, who.name)))
    out = StartOut(execution_id=done.execution_id, workflow=name, status=done.status.value,
                   created=done.created, url=run_url(done.execution_id))
    return JSONResponse(status_code=201 if done.created else 200,
                        content=out.model_dump(mode="json"))


@router.get("/me", responses=_ERRORS)
def me(request: Request, who: Identity = Reader) -> dict[str, str]:
    """Who the credentials name."""
    return {"name": who.name, "role": who.role.value, "via": who.via}


# The start route first: routes are matched in order, one regular expression each, and starts
# are the requests that come by the hundred a second (bench/http_start.py); the sort is stable.
router.routes.sort(key=lambda route: getattr(route, "endpoint", None) is not start)

__all__ = ["router"]
