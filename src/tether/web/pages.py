"""The HTML pages: inbox, approval (and its signed-link twin), runs, run, login.

GET handlers are plain functions (FastAPI runs them in its thread pool); POST handlers read
the form asynchronously, check the CSRF token, then call the console in the thread pool.
Every state-changing form is a POST with a CSRF token; a successful action redirects (303)
so a reload never repeats it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from tether.status import RunStatus
from tether.web.app import Web, web_of
from tether.web.auth import CSRF_FIELD, SESSION_COOKIE, Forbidden, Identity, Unauthenticated
from tether.web.config import SESSION_MAX_AGE, AuthMode, Role
from tether.web.console import AlreadyAnswered, ApprovalView, BadRequest, Invalid, Recorded
from tether.web.forms import Decision as Button
from tether.web.links import Link
from tether.web.urls import approval_url, quote_id, run_url

router = APIRouter(include_in_schema=False)

DONE = {
    "answered": "Your answer was recorded.",
    "resumed": "The run was handed to the worker to resume.",
    "cancelled": "Cancellation was requested.",
}


def identify(request: Request) -> Identity:
    who = web_of(request).guard.identify(request)
    if who is None:
        raise Unauthenticated("sign in first")
    return who


def actor(request: Request) -> Identity:
    who = identify(request)
    if not who.may_act:
        raise Forbidden(f"{who.name} may look but not act (role {who.role.value})")
    return who


async def checked_form(request: Request) -> FormData:
    form = await request.form()
    token = form.get(CSRF_FIELD)
    web_of(request).guard.check_csrf(request, token if isinstance(token, str) else None)
    return form


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _posted(form: FormData) -> dict[str, str]:
    return {k: v for k, v in form.items() if isinstance(v, str)}


def _button(form: FormData) -> Button | None:
    try:
        return Button(_text(form, "decision") or "")
    except ValueError:
        return None


# -- inbox and runs -----------------------------------------------------------------------------
@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/inbox", status_code=303)


@router.get("/inbox", response_class=HTMLResponse)
def inbox(request: Request, before: str | None = None) -> Response:
    who = identify(request)
    web = web_of(request)
    page = web.console.inbox(before)
    return web.page(request, "inbox.html", {"page": page}, who=who)


@router.get("/runs", response_class=HTMLResponse)
def runs(request: Request, status: str | None = None, workflow: str | None = None,
         before: str | None = None) -> Response:
    who = identify(request)
    web = web_of(request)
    page = web.console.runs(status or None, workflow or None, before)
    return web.page(request, "runs.html", {
        "page": page, "status": status or "", "workflow": workflow or "",
        "statuses": [s.value for s in RunStatus]}, who=who)


# -- approvals ----------------------------------------------------------------------------------
def _approval_page(web: Web, request: Request, view: ApprovalView, who: Identity | None, *,
                   action: str, errors: dict[str, list[str]] | None = None,
                   values: dict[str, Any] | None = None, comment: str = "",
                   status: int = 200, link: Link | None = None,
                   confirm_decline: bool = False) -> Response:
    return web.page(request, "approval.html", {
        "view": view, "action": action, "errors": errors or {}, "values": values or {},
        "comment": comment, "link": link, "minted": None,
        "confirm_decline": confirm_decline}, status=status, who=who)


@router.get("/runs/{execution_id:id}/approvals/{checkpoint_id:id}",
            response_class=HTMLResponse)
def approval(request: Request, execution_id: str, checkpoint_id: str,
             decline: str | None = None) -> Response:
    """An approval's page; ``?decline=1`` asks to confirm cancelling the run (the way to
    decline a form that has no field for it)."""
    who = identify(request)
    web = web_of(request)
    view = web.console.approval(execution_id, checkpoint_id)
    return _approval_page(web, request, view, who,
                          action=approval_url(execution_id, checkpoint_id),
                          confirm_decline=bool(decline))


async def _act(request: Request, execution_id: str, checkpoint_id: str, who: Identity,
               link: Link | None, action: str) -> Response:
    form = await checked_form(request)
    web = web_of(request)
    view = await run_in_threadpool(web.console.approval, execution_id, checkpoint_id)
    values = view.form.read_post(_posted(form))
    comment = _text(form, "comment") or ""
    outcome = await run_in_threadpool(web.console.answer, execution_id, checkpoint_id, who,
                                      _button(form), values, comment)
    match outcome:
        case Recorded():
            if link is not None:
                return web.page(request, "answered.html", {"outcome": outcome}, who=None)
            return RedirectResponse(f"{run_url(execution_id)}?done=answered",
                                    status_code=303)
        case AlreadyAnswered():
            fresh = await run_in_threadpool(web.console.approval, execution_id,
                                            checkpoint_id)
            return _approval_page(web, request, fresh, who, action=action, link=link)
        case Invalid(errors=errors):
            shown = {k: v for k, v in _posted(form).items() if k.startswith("field.")}
            return _approval_page(web, request, view, who, action=action, errors=errors,
                                  values=shown, comment=comment, status=422, link=link)


@router.post("/runs/{execution_id:id}/approvals/{checkpoint_id:id}",
             response_class=HTMLResponse)
async def answer(request: Request, execution_id: str, checkpoint_id: str) -> Response:
    who = actor(request)
    return await _act(request, execution_id, checkpoint_id, who, None,
                      approval_url(execution_id, checkpoint_id))


@router.post("/runs/{execution_id:id}/approvals/{checkpoint_id:id}/link",
             response_class=HTMLResponse)
async def mint_link(request: Request, execution_id: str, checkpoint_id: str) -> Response:
    who = actor(request)
    form = await checked_form(request)
    web = web_of(request)
    minted = await run_in_threadpool(web.console.mint_link, execution_id, checkpoint_id,
                                     _text(form, "recipient"))
    view = await run_in_threadpool(web.console.approval, execution_id, checkpoint_id)
    return web.page(request, "approval.html", {
        "view": view, "action": approval_url(execution_id, checkpoint_id), "errors": {},
        "values": {}, "comment": "", "link": None, "minted": minted,
        "confirm_decline": False}, who=who)


# -- signed links -------------------------------------------------------------------------------
@router.get("/a/{token}", response_class=HTMLResponse)
def link_page(request: Request, token: str) -> Response:
    web = web_of(request)
    link = web.console.links.read(token)
    view = web.console.approval(link.execution_id, link.checkpoint_id)
    return _approval_page(web, request, view, None, action=f"/a/{quote_id(token)}",
                          link=link)


@router.post("/a/{token}", response_class=HTMLResponse)
async def link_answer(request: Request, token: str) -> Response:
    web = web_of(request)
    link = web.console.links.read(token)
    who = Identity(link.resolver, Role.APPROVER, "link")
    return await _act(request, link.execution_id, link.checkpoint_id, who, link,
                      f"/a/{quote_id(token)}")


# -- a run --------------------------------------------------------------------------------------
@router.get("/runs/{execution_id:id}/live", response_class=HTMLResponse)
def live(request: Request, execution_id: str, after: str | None = None) -> Response:
    """The live part of the run page; 304 when it has not changed (ETag)."""
    identify(request)
    web = web_of(request)
    view = web.console.run_view(execution_id, after or None)
    html = web.env.get_template("run_live.html").render(view=view)
    tag = '"' + hashlib.sha256(html.encode()).hexdigest()[:32] + '"'
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers={"ETag": tag})
    return HTMLResponse(html, headers={"ETag": tag})


@router.post("/runs/{execution_id:id}/resume")
async def resume(request: Request, execution_id: str) -> Response:
    actor(request)
    await checked_form(request)
    await run_in_threadpool(web_of(request).console.resume, execution_id)
    return RedirectResponse(f"{run_url(execution_id)}?done=resumed", status_code=303)


@router.post("/runs/{execution_id:id}/cancel")
async def cancel(request: Request, execution_id: str) -> Response:
    who = actor(request)
    await checked_form(request)
    await run_in_threadpool(web_of(request).console.cancel, execution_id, who)
    return RedirectResponse(f"{run_url(execution_id)}?done=cancelled", status_code=303)


@router.post("/runs/{execution_id:id}/fork")
async def fork(request: Request, execution_id: str) -> Response:
    actor(request)
    form = await checked_form(request)
    web = web_of(request)
    patch_text = (_text(form, "patch") or "").strip()
    try:
        patch = json.loads(patch_text) if patch_text else None
    except ValueError as exc:
        view = await run_in_threadpool(web.console.run_view, execution_id)
        return web.page(request, "run.html", {
            "view": view, "done": None, "fork_checkpoint": _text(form, "checkpoint_id"),
            "fork_patch": patch_text, "fork_error": f"the patch is not JSON: {exc}"},
            status=422, who=identify(request))
    try:
        branch = await run_in_threadpool(web.console.fork, execution_id,
                                         _text(form, "checkpoint_id"), patch)
    except BadRequest as exc:  # shown on the fork form, which keeps what was typed
        view = await run_in_threadpool(web.console.run_view, execution_id)
        return web.page(request, "run.html", {
            "view": view, "done": None, "fork_checkpoint": _text(form, "checkpoint_id"),
            "fork_patch": patch_text, "fork_error": str(exc)}, status=422,
            who=identify(request))
    target = run_url(branch) if branch else f"{run_url(execution_id)}"
    return RedirectResponse(target, status_code=303)


@router.get("/runs/{execution_id:id}", response_class=HTMLResponse)
def run_page(request: Request, execution_id: str, after: str | None = None,
             done: str | None = None, fork: str | None = None) -> Response:
    who = identify(request)
    web = web_of(request)
    view = web.console.run_view(execution_id, after or None)
    return web.page(request, "run.html", {
        "view": view, "done": DONE.get(done or ""), "fork_checkpoint": fork or "",
        "fork_patch": "", "fork_error": None}, who=who)


# -- signing in ---------------------------------------------------------------------------------
def _safe_next(target: str | None) -> str:
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/inbox"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str | None = None) -> Response:
    web = web_of(request)
    if web.config.auth == AuthMode.NONE:
        return RedirectResponse(_safe_next(next), status_code=303)
    return web.page(request, "login.html", {"next": _safe_next(next), "error": None})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await checked_form(request)
    web = web_of(request)
    target = _safe_next(_text(form, "next"))
    found = web.guard.login(_text(form, "token") or "")
    if found is None:
        return web.page(request, "login.html", {"next": target,
                                                "error": "That token is not known."},
                        status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, found[1], max_age=SESSION_MAX_AGE, httponly=True,
                        samesite="lax", path="/")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    await checked_form(request)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
