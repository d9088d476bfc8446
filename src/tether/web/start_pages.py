"""The console's "start a run" pages: the workflows it may start (``--workflows``) and, for
each, a form built from the workflow's inputs (the approval form's widgets: a choice for an
``enum``, true/false for a boolean, JSON for objects and arrays), with queue and priority.

A start is the API's (``starts.py``): the inputs are checked as every run's are, and each
problem is shown at its field (422) with nothing started; a started run's page follows (303).
It needs the role ``approver`` or ``submitter``, and a workflow that may be started by hand:
one whose file declares no ``on:``, or lists ``manual`` there (and, with ``on.manual.users``,
names the user); any other is refused with 403 and listed without a form.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from tether.trigger import Trigger, TriggerKind
from tether.web.app import web_of
from tether.web.auth import Forbidden, Identity
from tether.web.forms import Form, typed
from tether.web.pages import checked_form, identify
from tether.web.starts import Start, manual_refusal
from tether.web.urls import run_url

router = APIRouter(include_in_schema=False)


def starter(request: Request) -> Identity:
    who = identify(request)
    if not who.may_submit:
        raise Forbidden(f"{who.name} may not start runs (role {who.role.value})")
    return who


@router.get("/workflows", response_class=HTMLResponse)
def workflows(request: Request) -> Response:
    who = identify(request)
    web = web_of(request)
    plans = [plan for _, plan in sorted(web.catalog.plans.items())]
    refusals = {plan.name: manual_refusal(plan, who.name) for plan in plans}
    return web.page(request, "workflows.html", {"plans": plans, "refusals": refusals},
                    who=who)


@router.get("/workflows/{name}/start", response_class=HTMLResponse)
def start_page(request: Request, name: str) -> Response:
    who = starter(request)
    web = web_of(request)
    plan = web.catalog.manual_plan(name, who.name)
    return web.page(request, "start.html", {"plan": plan, "fields": Form(plan.inputs).fields,
                                            "errors": {}, "values": {}}, who=who)


@router.post("/workflows/{name}/start", response_class=HTMLResponse)
async def start(request: Request, name: str) -> Response:
    who = starter(request)
    posted = {k: v for k, v in (await checked_form(request)).items() if isinstance(v, str)}
    web = web_of(request)
    plan = web.catalog.manual_plan(name, who.name)
    form = Form(plan.inputs)
    values = form.read_post(posted)
    _, errors = form.answer(None, values)
    priority = typed("integer", posted.get("priority", "0") or "0")
    queue = (posted.get("queue") or "default").strip()
    if not isinstance(priority, int):
        errors["priority"] = ["the priority must be a whole number"]
    if not queue:
        errors["queue"] = ["a queue name cannot be empty"]
    if errors:
        return web.page(request, "start.html", {"plan": plan, "fields": form.fields,
                                                "errors": errors, "values": posted},
                        status=422, who=who)
    done = await run_in_threadpool(web.catalog.start, web.console.store, name,
                                   Start(values, queue, int(priority),
                                         trigger=Trigger(TriggerKind.MANUAL, who.name)))
    return RedirectResponse(run_url(done.execution_id), status_code=303)
