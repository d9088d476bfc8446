"""A workflow's ``schedule`` (or ``on: schedule``, the same): its cron expression, time zone
and inputs (E870-E872); both at once is E236."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tether.compiler.context import Context
from tether.dsl.ast import Workflow
from tether.jsontypes import article, json_type_name, matches_type
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    from tether.compiler.plan import PlanSchedule
    from tether.dsl.document import Catchup, ScheduleSpec

DEFAULT_TIMEZONE = "UTC"
DEFAULT_CATCHUP: Catchup = "latest"


def schedule_of(workflow: Workflow) -> tuple[ScheduleSpec, tuple[str, ...]] | None:
    """The workflow's schedule and where it is: ``schedule:``, else ``on: schedule``."""
    doc = workflow.doc
    if doc.schedule is not None:
        return doc.schedule, ("schedule",)
    if doc.on is not None and doc.on.schedule is not None:
        return doc.on.schedule, ("on", "schedule")
    return None


def check_schedule(ctx: Context) -> None:
    """Report what is wrong with the workflow's schedule, if it has one."""
    found = schedule_of(ctx.workflow)
    if found is None:
        return
    from tether.cron import cron_problem, zone_names, zone_problem  # (a workflow with one)

    spec, at = found
    on = ctx.workflow.doc.on
    if at == ("schedule",) and on is not None and on.schedule is not None:
        ctx.report("E236", "the workflow has two schedules: `schedule` and `on.schedule`",
                   ctx.key_span("on", "schedule"), help="keep one of them (they mean the "
                   "same)")
    problem = cron_problem(spec.cron)
    if problem is not None:
        ctx.report("E870", problem.message,
                   ctx.at_offset((*at, "cron"), spec.cron, problem.offset,
                                 problem.length),
                   help="five fields: minute hour day-of-month month day-of-week, "
                   "e.g. `0 3 * * *`")
    if spec.timezone is not None and (message := zone_problem(spec.timezone)) is not None:
        ctx.report("E871", message, ctx.span(*at, "timezone"),
                   help=did_you_mean(spec.timezone, zone_names())
                   or "an IANA name such as `Europe/Paris` or `UTC`")
    _check_inputs(ctx, spec.inputs, at)


def _check_inputs(ctx: Context, inputs: dict[str, Any] | None,
                  base: tuple[str, ...]) -> None:
    declared = ctx.workflow.inputs
    given = inputs or {}
    for name, value in given.items():
        spec = declared.get(name)
        where = ctx.span(*base, "inputs", name)
        if spec is None:
            ctx.report("E872", f"the schedule gives input `{name}`, which is not declared",
                       ctx.key_span(*base, "inputs", name),
                       help=did_you_mean(name, declared) or "declared inputs: " + (
                           ", ".join(f"`{n}`" for n in declared) or "none"))
        elif isinstance(value, str) and ("{{" in value or "{%" in value):
            ctx.report("E872", f"schedule input `{name}` is a template", where,
                       help="schedule inputs are values; nothing renders them")
        elif value is not None and not matches_type(value, spec.type):
            ctx.report("E872", f"schedule input `{name}` must be {article(spec.type)}, not "
                       f"{json_type_name(value)}", where)
        elif value is not None and spec.enum is not None and not _listed(value, spec.enum):
            allowed = ", ".join(json.dumps(a, ensure_ascii=False)[:60] for a in spec.enum[:20])
            ctx.report("E872", f"schedule input `{name}` must be one of {allowed}", where)
    at = (*base, "inputs") if inputs is not None else base
    for name, spec in declared.items():
        if not spec.has_default and name not in given:
            ctx.report("E872", f"the schedule does not give required input `{name}`",
                       ctx.key_span(*at),
                       help=f"add it under `{'.'.join(base)}.inputs`, or give input `{name}` "
                       "a default")


def _listed(value: Any, allowed: list[Any]) -> bool:
    """Whether ``value`` is one of ``allowed`` (``True`` is not ``1``)."""
    if isinstance(value, bool):
        return any(a is value for a in allowed)
    return any(value == a and not isinstance(a, bool) for a in allowed)


def plan_schedule(workflow: Workflow) -> PlanSchedule | None:
    """The plan's schedule: the document's, with the defaults filled in."""
    from tether.compiler.plan import PlanSchedule

    found = schedule_of(workflow)
    if found is None:
        return None
    spec = found[0]
    return PlanSchedule(cron=spec.cron, timezone=spec.timezone or DEFAULT_TIMEZONE,
                        inputs=dict(spec.inputs or {}), catchup=spec.catchup or DEFAULT_CATCHUP)


__all__ = ["DEFAULT_CATCHUP", "DEFAULT_TIMEZONE", "check_schedule", "plan_schedule"]
