"""Webhooks: ``POST /hooks/{path}`` starts a run of the workflow whose ``on: webhook`` has
that path (``tether serve --workflows``).

A request is checked in this order, each failure answered at once and starting nothing: the
hook exists (404), the body is at most 1 MiB (413), the secret's environment variable is set
on the server (503), the signature is the sender's (401: GitHub's ``X-Hub-Signature-256``,
Stripe's ``Stripe-Signature`` ``t=...,v1=...`` over ``TIME.BODY``, or a generic HMAC-SHA256
header), the signed timestamp is within the tolerance (400: a stale or future delivery), the
body is JSON (400), the delivery has its id (400), the inputs render and fit the workflow
(422). Then the run is submitted with the dedup key ``PATH:DELIVERY`` (GitHub's
``X-GitHub-Delivery``, a Stripe event's ``id``, the ``hmac`` scheme's ``delivery_header``): a
delivery seen before starts nothing and is answered 200 with the first run, so a sender's
retries and a replayed request start one run, however many arrive at once. The secret is read
from the environment for each request and never stored or shown; signatures are compared in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from jinja2 import TemplateError
from starlette.concurrency import run_in_threadpool

from tether.compiler.plan import PlanWebhook
from tether.errors import TemplateLimit, TetherError
from tether.runtime.render import Names, trigger_names
from tether.templating import evaluate, has_markup
from tether.trigger import Trigger, TriggerKind
from tether.web.app import status_of, web_of
from tether.web.starts import Start
from tether.web.urls import run_url

MAX_BODY = 1 << 20

router = APIRouter(prefix="/hooks")


@dataclass(frozen=True)
class Refusal:
    """Why a delivery starts nothing: the HTTP status and a message for the sender."""

    status: int
    detail: str


def _refuse(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


@router.post("/{path}", include_in_schema=True, status_code=201)
async def deliver(request: Request, path: str) -> JSONResponse:
    """A signed delivery: 201 and the run it started, 200 and the run of a delivery already
    seen, else 4xx saying why nothing was started (see the module docstring)."""
    web = web_of(request)
    found = web.catalog.hooks.get(path)
    if found is None:
        return _refuse(404, f"no webhook at /hooks/{path[:100]}")
    plan, hook = found
    body = await request.body()
    if len(body) > MAX_BODY:
        return _refuse(413, f"the body is over {MAX_BODY:,} bytes")
    secret = os.environ.get(hook.secret, "")
    if not secret:
        return _refuse(503, f"this server has no webhook secret: ${hook.secret} is not set")
    headers = {k.lower(): v for k, v in request.headers.items()}
    outcome = check_delivery(hook, headers, body, secret.encode(), time.time())
    if isinstance(outcome, Refusal):
        return _refuse(outcome.status, outcome.detail)
    payload, delivery = outcome
    trigger = Trigger(TriggerKind.WEBHOOK, f"webhook:{hook.path}", payload,
                      {h: headers[h] for h in hook.headers if h in headers}, delivery,
                      hook.verify)
    try:
        names = trigger_names(trigger)
        inputs = {name: render(value, names) for name, value in hook.inputs.items()}
    except (TemplateError, TemplateLimit) as exc:
        return _refuse(422, f"the webhook's inputs cannot be rendered: {exc}")
    start = Start(inputs, dedup_key=f"{hook.path}:{delivery}" if delivery else None,
                  trigger=trigger)
    try:
        done = await run_in_threadpool(web.catalog.start, web.console.store, plan.name, start)
    except TetherError as exc:
        return _refuse(status_of(exc), str(exc))
    return JSONResponse({"execution_id": done.execution_id, "workflow": plan.name,
                         "status": done.status.value, "created": done.created,
                         "url": run_url(done.execution_id)},
                        status_code=201 if done.created else 200)


def check_delivery(hook: PlanWebhook, headers: Mapping[str, str], body: bytes, secret: bytes,
                   now: float) -> Refusal | tuple[Any, str | None]:
    """The delivery's JSON payload and its id, or why it is refused."""
    refused = _verify(hook, headers, body, secret, now)
    if refused is not None:
        return refused
    try:
        payload = json.loads(_json_text(headers, body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return Refusal(400, "the body is not JSON (send the payload as application/json, "
                       "or as the form field payload=)")
    delivery = _delivery_id(hook, headers, payload)
    if isinstance(delivery, Refusal):
        return delivery
    return payload, delivery


def _verify(hook: PlanWebhook, headers: Mapping[str, str], body: bytes, secret: bytes,
            now: float) -> Refusal | None:
    match hook.verify:
        case "github":
            given = headers.get("x-hub-signature-256", "")
            return None if _same(given, "sha256=" + _sign(secret, body)) else \
                Refusal(401, "bad or missing X-Hub-Signature-256")
        case "stripe":
            return _verify_stripe(headers.get("stripe-signature", ""), body, secret, now,
                                  hook.tolerance)
        case "hmac":
            return _verify_hmac(hook, headers, body, secret, now)


def _verify_stripe(header: str, body: bytes, secret: bytes, now: float,
                   tolerance: float) -> Refusal | None:
    parts = [p.partition("=") for p in header.split(",")]
    stamps = [v for k, _, v in parts if k.strip() == "t"]
    signatures = [v.strip() for k, _, v in parts if k.strip() == "v1"]
    if len(stamps) != 1 or not stamps[0].strip().isdigit() or not signatures:
        return Refusal(401, "bad or missing Stripe-Signature (expected t=TIME,v1=HEX)")
    expected = _sign(secret, stamps[0].strip().encode() + b"." + body)
    if not any(_same(s, expected) for s in signatures):
        return Refusal(401, "bad Stripe-Signature")
    return _fresh(int(stamps[0]), now, tolerance)


def _verify_hmac(hook: PlanWebhook, headers: Mapping[str, str], body: bytes, secret: bytes,
                 now: float) -> Refusal | None:
    given = headers.get(hook.header, "").strip()
    given = given[len("sha256="):] if given.lower().startswith("sha256=") else given
    stamp = headers.get(hook.timestamp_header, "").strip() if hook.timestamp_header else None
    if stamp is not None and not stamp.isdigit():
        return Refusal(401, f"bad or missing {hook.timestamp_header} (Unix seconds)")
    signed = body if stamp is None else stamp.encode() + b"." + body
    if not given or not _same(given.lower(), _sign(secret, signed)):
        return Refusal(401, f"bad or missing {hook.header}")
    return None if stamp is None else _fresh(int(stamp), now, hook.tolerance)


def _fresh(stamp: int, now: float, tolerance: float) -> Refusal | None:
    if abs(now - stamp) <= tolerance:
        return None
    return Refusal(400, f"the signed timestamp is {abs(now - stamp):,.0f} s from this "
                   f"server's clock (tolerance {tolerance:g} s): a stale or replayed delivery")


def _json_text(headers: Mapping[str, str], body: bytes) -> bytes | str:
    """The JSON text of the body: itself, or the ``payload`` field of a form post (GitHub's
    default content type, application/x-www-form-urlencoded)."""
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return body
    fields = parse_qs(body.decode("utf-8"), max_num_fields=10)
    return fields.get("payload", [""])[0]


def _delivery_id(hook: PlanWebhook, headers: Mapping[str, str],
                 payload: Any) -> str | Refusal | None:
    if hook.verify == "github":
        found: Any = headers.get("x-github-delivery")
        name = "X-GitHub-Delivery"
    elif hook.verify == "stripe":
        found = payload.get("id") if isinstance(payload, dict) else None
        name = "the event's id"
    elif hook.delivery_header is not None:
        found, name = headers.get(hook.delivery_header), hook.delivery_header
    else:
        return None
    if not isinstance(found, str) or not found.strip() or len(found) > 150 \
            or not found.isprintable():
        return Refusal(400, f"missing or unusable {name} (the delivery's id)")
    return found.strip()


def _sign(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def render(value: Any, trigger: Names) -> Any:
    """``value`` with every template rendered against ``trigger``."""
    if isinstance(value, dict):
        return {k: render(v, trigger) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, trigger) for v in value]
    if isinstance(value, str) and has_markup(value):
        return _plain(evaluate(value, {"trigger": trigger}))
    return value


def _plain(value: Any) -> Any:
    """A rendered value with the template views (``trigger``, its headers) made dicts."""
    if isinstance(value, Names):
        return {key: _plain(value[key]) for key in value}
    return value

