"""``tether schedules``: register, list and remove the schedules the workers fire."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from tether.cli.authoring import ExistingFile, compile_or_exit
from tether.cli.operator import json_option
from tether.cli.options import color_option, db_option, open_store
from tether.cli.terminal import console, dumps, printable, text
from tether.stores.schedule_records import ScheduleRecord

if TYPE_CHECKING:  # annotations only: the CLI imports the compiler when a command needs it
    from tether.compiler.plan import Plan
    from tether.stores.base import Checkpointer


def register(group: click.Group) -> None:
    """Add ``tether schedules`` (and its subcommands) to ``group``."""
    group.add_command(schedules)
    group.add_command(deploy)


def _moment(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_json(record: ScheduleRecord) -> dict[str, object]:
    return {"name": record.name, "cron": record.cron, "timezone": record.timezone,
            "catchup": record.catchup, "inputs": record.inputs, "queue": record.queue,
            "plan_fingerprint": record.plan_fingerprint,
            "last_tick": _moment(record.last_tick), "next_tick": _moment(record.next_tick)}


@click.group(invoke_without_command=True)
@db_option
@json_option
@click.pass_context
def schedules(ctx: click.Context, db: str, as_json: bool) -> None:
    """List the registered schedules with their last and next tick (times in UTC).

    `tether schedules add FILE` registers a workflow's schedule; `tether schedules remove
    NAME` removes one. Workers (`tether worker`) start one run per tick.
    """
    if ctx.invoked_subcommand is not None:
        return
    records = open_store(db).list_schedules()
    if as_json:
        click.echo(dumps([_as_json(r) for r in records], indent=2))
        return
    if not records:
        click.echo("no schedules")
        return
    from rich.table import Table

    table = Table("name", "cron", "timezone", "catchup", "queue", "last tick", "next tick",
                  box=None, pad_edge=False)
    for r in records:
        table.add_row(text(r.name), text(r.cron), text(r.timezone), text(r.catchup),
                      text(r.queue or ""), text(_moment(r.last_tick) or ""),
                      text(_moment(r.next_tick) or "never"))
    console().print(table)


@schedules.command("add")
@click.argument("file", type=ExistingFile)
@db_option
@click.option("--queue", metavar="NAME", help="The queue the schedule's runs are submitted to "
              "(an update without it keeps the queue).")
@color_option
def add(file: str, db: str, queue: str | None, color: str) -> None:
    """Register FILE's schedule (or update the one of its workflow's name).

    FILE is compiled as `tether check` does (errors are printed, exit 1); it must have a
    `schedule:`. The plan is stored with the schedule. Updating keeps the ticks already
    handled; a new schedule fires from the next tick after now.
    """
    plan = compile_or_exit(file, color)
    if plan.schedule is None:
        click.echo(f"error: {printable(file)} has no `schedule:`; nothing to register",
                   err=True)
        raise click.exceptions.Exit(1)
    click.echo(register_schedule(plan, open_store(db, create=True), queue))


def register_schedule(plan: Plan, store: Checkpointer, queue: str | None) -> str:
    """Register (or update) ``plan``'s schedule in ``store``; the line saying so."""
    from tether.workers.schedules import declare_schedule

    assert plan.schedule is not None
    declared = declare_schedule(store, plan, queue)
    return schedule_line(plan, declared.change, declared.schedule)


def schedule_line(plan: Plan, change: str, record: ScheduleRecord) -> str:
    """``registered schedule NAME: CRON (TZ), next tick T`` (or updated, unchanged)."""
    assert plan.schedule is not None
    shown = _moment(record.next_tick) or "never"
    return (f"{change} schedule {printable(plan.name)}: {printable(plan.schedule.cron)} "
            f"({printable(plan.schedule.timezone)}), next tick {shown}")


@schedules.command("remove")
@click.argument("name")
@db_option
def remove(name: str, db: str) -> None:
    """Remove the schedule of the workflow NAME (runs already started are not touched)."""
    if not open_store(db).remove_schedule(name):
        click.echo(f"error: no schedule named {printable(name)}", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"removed schedule {printable(name)}")


@click.command()
@click.argument("files", nargs=-1, required=True, type=ExistingFile)
@db_option
@click.option("--queue", metavar="NAME", help="The queue scheduled runs are submitted to "
              "(an update without it keeps the queue).")
@color_option
def deploy(files: tuple[str, ...], db: str, queue: str | None, color: str) -> None:
    """Put the triggers of workflow FILES into effect: register each schedule (`schedule:`
    or `on: schedule`, as `tether schedules add`) and say where each webhook is received.

    Every file is compiled first (errors are printed, exit 1, nothing registered). Webhooks
    are served by `tether serve --workflows FILE`; deploy names their path and secret.
    """
    plans = [(file, compile_or_exit(file, color)) for file in files]
    store = open_store(db, create=True)
    for file, plan in plans:
        said = False
        if plan.schedule is not None:
            click.echo(register_schedule(plan, store, queue))
            said = True
        if plan.webhook is not None:
            hook = plan.webhook
            click.echo(f"webhook {printable(plan.name)}: POST /hooks/{printable(hook.path)} "
                       f"({hook.verify}, secret from ${hook.secret}), served by tether serve "
                       f"--workflows {printable(file)}")
            said = True
        if not said:
            click.echo(f"{printable(file)}: no schedule or webhook; runs start with tether "
                       "submit or POST /api/workflows/NAME/runs")


__all__ = ["deploy", "register", "schedules"]
