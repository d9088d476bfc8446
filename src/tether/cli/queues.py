"""``tether queues``: configure the workers' queues' limits, list queues, remove a queue.

``tether queues set NAME [--concurrency N] [--per-workflow N] [--rate-limit N/s|N/m|N/h]
[--start-timeout DURATION]`` replaces the queue's limits (an option not given means no such
limit); ``tether queues`` lists every configured queue and every queue holding runs, with how
many are queued and running; ``tether queues remove NAME`` removes the limits (the queue's
runs stay and are claimed without limits). See ``docs/workers.md``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import click

from tether.cli.operator import json_option
from tether.cli.options import db_option, open_store
from tether.cli.terminal import console, dumps, printable, text

if TYPE_CHECKING:  # (submit registers these commands: it imports no store module)
    from tether.stores.queueing import QueueCounts, QueueRecord

_RATE = re.compile(r"^(\d{1,9}(?:\.\d{1,9})?)\s*/\s*(s|m|h)$")
_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def register(group: click.Group) -> None:
    """Add ``tether queues`` (and its subcommands) to ``group``."""
    group.add_command(queues)


def parse_rate(ctx: click.Context, param: click.Parameter,
               value: str | None) -> tuple[float, float] | None:
    """``--rate-limit N/s|N/m|N/h``: (runs per second, the window in seconds)."""
    if value is None:
        return None
    match = _RATE.match(value.strip())
    if match is None or float(match.group(1)) <= 0:
        raise click.BadParameter(f"{printable(value)!r} is not a rate like 10/s, 100/m or "
                                 "1000/h (a positive count of runs per second, minute or "
                                 "hour)")
    window = _PERIODS[match.group(2)]
    return float(match.group(1)) / window, window


def parse_timeout(ctx: click.Context, param: click.Parameter,
                  value: str | None) -> float | None:
    if value is None:
        return None
    from tether.durations import DurationError, parse_duration

    try:
        return parse_duration(value)
    except DurationError as exc:
        raise click.BadParameter(printable(exc)) from None


def rate_text(queue: QueueRecord) -> str:
    if queue.rate_limit is None:
        return ""
    unit = {1.0: "s", 60.0: "m", 3600.0: "h"}.get(queue.window)
    if unit is None:
        return f"{queue.rate_limit:g}/s"
    return f"{queue.rate_limit * queue.window:g}/{unit}"


def _as_json(queue: QueueRecord | None, name: str, counts: QueueCounts | None,
             ) -> dict[str, object]:
    return {"name": name,
            "concurrency": queue.concurrency if queue else None,
            "per_workflow": queue.per_workflow if queue else None,
            "rate_limit": queue.rate_limit if queue else None,
            "rate_window": queue.window if queue and queue.rate_limit is not None else None,
            "start_timeout": queue.start_timeout if queue else None,
            "queued": counts.queued if counts else 0,
            "running": counts.running if counts else 0}


@click.group(invoke_without_command=True)
@db_option
@json_option
@click.pass_context
def queues(ctx: click.Context, db: str, as_json: bool) -> None:
    """List the queues: their limits and how many runs are queued and running.

    `tether queues set NAME ...` configures a queue's limits; `tether queues remove NAME`
    removes them. Workers enforce the limits fleet-wide when they claim runs.
    """
    if ctx.invoked_subcommand is not None:
        return
    store = open_store(db)
    configured = {q.name: q for q in store.list_queues()}
    counts = {c.queue: c for c in store.queue_counts(time.time())}
    names = sorted(set(configured) | set(counts))
    rows = [_as_json(configured.get(n), n, counts.get(n)) for n in names]
    if as_json:
        click.echo(dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no queues")
        return
    from rich.table import Table

    table = Table("queue", "concurrency", "per workflow", "rate limit", "start timeout",
                  "queued", "running", box=None, pad_edge=False)
    for name, row in zip(names, rows, strict=True):
        config = configured.get(name)
        table.add_row(text(name), str(row["concurrency"] or ""), str(row["per_workflow"] or ""),
                      rate_text(config) if config else "",
                      f"{row['start_timeout']:g} s" if row["start_timeout"] else "",
                      str(row["queued"]), str(row["running"]))
    console().print(table)


@queues.command("set")
@click.argument("name")
@click.option("--concurrency", type=click.IntRange(1, 1_000_000), default=None,
              help="At most this many runs of the queue execute at once, fleet-wide.")
@click.option("--per-workflow", type=click.IntRange(1, 1_000_000), default=None,
              help="Of those, at most this many of one workflow.")
@click.option("--rate-limit", callback=parse_rate, metavar="N/s|N/m|N/h",
              help="At most N runs start in any second, minute or hour, fleet-wide.")
@click.option("--start-timeout", callback=parse_timeout, metavar="DURATION",
              help="A run queued longer (30s, 10m, 2h) is reported by tether runs --stuck.")
@db_option
def set_queue(name: str, concurrency: int | None, per_workflow: int | None,
              rate_limit: tuple[float, float] | None, start_timeout: float | None,
              db: str) -> None:
    """Configure a queue's limits (replacing any it had: an option left out is no limit)."""
    if not name.strip():
        raise click.BadParameter("a queue name cannot be empty", param_hint="NAME")
    from tether.stores.queueing import QueueRecord

    rate, window = rate_limit if rate_limit is not None else (None, None)
    record = QueueRecord(name, concurrency, per_workflow, rate, window, start_timeout,
                         time.time())
    open_store(db, create=True).put_queue(record)
    limits = [f"concurrency {concurrency}" if concurrency else "",
              f"per workflow {per_workflow}" if per_workflow else "",
              f"rate {rate_text(record)}" if rate is not None else "",
              f"start timeout {start_timeout:g} s" if start_timeout else ""]
    shown = ", ".join(x for x in limits if x) or "no limits"
    click.echo(f"queue {printable(name)}: {shown}")


@queues.command("remove")
@click.argument("name")
@db_option
def remove_queue(name: str, db: str) -> None:
    """Remove a queue's limits (its runs stay queued and are claimed without limits)."""
    if not open_store(db).remove_queue(name):
        click.echo(f"no queue {printable(name)} is configured", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"removed the limits of queue {printable(name)}")
