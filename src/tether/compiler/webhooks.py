"""A workflow's ``on: webhook``: its path, secret, options and input templates (E230-E235).

The inputs are templates over ``trigger`` only (the request: ``payload``, ``headers``,
``delivery``, ``kind``): nothing else exists when ``tether serve`` renders them, before the
run does. Whatever inputs they give must be declared, and every required input given.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tether.compiler.context import Context
from tether.compiler.references import strings
from tether.dsl.ast import Workflow
from tether.dsl.expressions import analyse
from tether.dsl.patterns import SECRET_PATTERN
from tether.durations import DurationError, parse_duration
from tether.suggest import did_you_mean
from tether.templating import has_markup
from tether.trigger import TRIGGER_FIELDS

if TYPE_CHECKING:
    from tether.compiler.plan import PlanManual, PlanWebhook
    from tether.dsl.document import WebhookSpec

PATH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
HEADER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,99}$")
DEFAULT_TOLERANCE = 300.0
_HMAC_ONLY = ("header", "timestamp_header", "delivery_header")


def check_webhook(ctx: Context) -> None:
    """Report what is wrong with the workflow's webhook, if it has one."""
    spec = _spec(ctx.workflow)
    if spec is None:
        return
    at = ("on", "webhook")
    if spec.path is not None and not PATH_RE.match(spec.path):
        ctx.report("E230", f"webhook path `{spec.path[:100]}` is not a plain path segment",
                   ctx.span(*at, "path"), help="letters, digits, `.`, `_` and `-` (the "
                   "hook is served at /hooks/PATH)")
    if not re.match(SECRET_PATTERN, spec.secret):
        ctx.report("E231", f"webhook secret `{spec.secret[:100]}` is not an environment "
                   "variable name", ctx.span(*at, "secret"),
                   help="name the variable that holds it, e.g. `GITHUB_WEBHOOK_SECRET`; "
                   "never the secret itself")
    _check_options(ctx, spec)
    for number, name in enumerate(spec.headers or ()):
        if not HEADER_RE.match(name):
            ctx.report("E232", f"`{name[:100]}` is not an HTTP header name",
                       ctx.span(*at, "headers", number))
    _check_inputs(ctx, spec)


def _spec(workflow: Workflow) -> WebhookSpec | None:
    on = workflow.doc.on
    return on.webhook if on is not None else None


def _check_options(ctx: Context, spec: WebhookSpec) -> None:
    at = ("on", "webhook")
    if spec.verify != "hmac":
        for key in _HMAC_ONLY:
            if getattr(spec, key) is not None:
                ctx.report("E233", f"`{key}` applies to `verify: hmac` only, not "
                           f"`{spec.verify}`", ctx.key_span(*at, key),
                           help=f"{spec.verify} fixes its own headers; remove `{key}`")
    for key in _HMAC_ONLY:
        value = getattr(spec, key)
        if value is not None and not HEADER_RE.match(value):
            ctx.report("E232", f"`{value[:100]}` is not an HTTP header name",
                       ctx.span(*at, key))
    if spec.tolerance is not None:
        try:
            if parse_duration(spec.tolerance) <= 0:
                raise DurationError("must be above zero")
        except DurationError as exc:
            ctx.report("E233", f"webhook tolerance: {exc}", ctx.span(*at, "tolerance"),
                       help="a duration such as `5m`")
        if spec.verify == "github" or (spec.verify == "hmac" and not spec.timestamp_header):
            ctx.report("E233", "`tolerance` needs a signed timestamp (`verify: stripe`, or "
                       "`hmac` with `timestamp_header`)", ctx.key_span(*at, "tolerance"))


def _check_inputs(ctx: Context, spec: WebhookSpec) -> None:
    declared = ctx.workflow.inputs
    given = spec.inputs or {}
    for name, value in given.items():
        if name not in declared:
            ctx.report("E234", f"the webhook gives input `{name}`, which is not declared",
                       ctx.key_span("on", "webhook", "inputs", name),
                       help=did_you_mean(name, declared) or "declared inputs: " + (
                           ", ".join(f"`{n}`" for n in declared) or "none"))
        for problem in _template_problems(value) + _unkept_headers(value, spec):
            ctx.report("E235", f"webhook input `{name}`: {problem}",
                       ctx.span("on", "webhook", "inputs", name),
                       help="the templates read `trigger.payload`, `trigger.headers`, "
                       "`trigger.delivery` or `trigger.kind`")
    at = ("on", "webhook", "inputs") if spec.inputs is not None else ("on", "webhook")
    for name, input_spec in declared.items():
        if not input_spec.has_default and name not in given:
            ctx.report("E234", f"the webhook does not give required input `{name}`",
                       ctx.key_span(*at), help=f"map it from the request, e.g. `{name}: "
                       f"\"{{{{ trigger.payload.{name} }}}}\"`, or give it a default")


def _template_problems(value: Any) -> list[str]:
    """What is wrong with the templates in ``value``: syntax, or a read of another name
    than ``trigger``."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _template_problems(v)]
    if isinstance(value, list):
        return [p for v in value for p in _template_problems(v)]
    if not isinstance(value, str) or not has_markup(value):
        return []
    from jinja2 import TemplateSyntaxError, meta, nodes

    from tether.templating import ENV

    try:
        tree = ENV.parse(value)
    except TemplateSyntaxError as exc:
        return [f"the template cannot be read: {exc.message}"]
    names = meta.find_undeclared_variables(tree)
    fields = {n.attr for n in tree.find_all(nodes.Getattr)
              if isinstance(n.node, nodes.Name) and n.node.name == "trigger"}
    return [f"reads `{n}`, which does not exist when a request arrives (only `trigger`)"
            for n in sorted(names - {"trigger"})] + [
        f"`trigger.{f}` does not exist (known: " + ", ".join(TRIGGER_FIELDS) + ")"
        for f in sorted(fields - set(TRIGGER_FIELDS))]


def _unkept_headers(value: Any, spec: WebhookSpec) -> list[str]:
    """Reads of ``trigger.headers[NAME]`` for a header the webhook does not list (it is
    never kept, so the input would always be missing)."""
    kept = {h.lower() for h in spec.headers or ()}
    return [f"`trigger.headers` never holds `{ref.attrs[1]}` (add it to `headers`)"
            for _, text in strings(value, ()) if has_markup(text)
            for ref in analyse(text).references
            if ref.root == "trigger" and ref.attrs[:1] == ("headers",) and len(ref.attrs) > 1
            and ref.attrs[1].lower() not in kept]


def plan_manual(workflow: Workflow) -> PlanManual | None:
    """Who may start the workflow by hand: None without ``on:`` (anyone who may start
    runs), else what ``on.manual`` says (not allowed when it is absent or ``false``)."""
    from tether.compiler.plan import PlanManual

    on = workflow.doc.on
    if on is None:
        return None
    manual = on.manual
    if "manual" not in on.model_fields_set or manual is False:
        return PlanManual(allowed=False)
    if manual is not None and not isinstance(manual, bool):  # (a ManualSpec)
        return PlanManual(users=tuple(dict.fromkeys(manual.users or ())))
    return PlanManual()


def plan_webhook(workflow: Workflow) -> PlanWebhook | None:
    """The plan's webhook: the document's, with the defaults filled in."""
    from tether.compiler.plan import PlanWebhook

    spec = _spec(workflow)
    if spec is None:
        return None
    return PlanWebhook(
        path=spec.path or workflow.name, verify=spec.verify, secret=spec.secret,
        inputs=dict(spec.inputs or {}),
        headers=tuple(h.lower() for h in spec.headers or ()),
        header=(spec.header or "x-signature").lower(),
        timestamp_header=spec.timestamp_header.lower() if spec.timestamp_header else None,
        delivery_header=spec.delivery_header.lower() if spec.delivery_header else None,
        tolerance=parse_duration(spec.tolerance) if spec.tolerance else DEFAULT_TOLERANCE)
