"""The operator commands that read the store (runs, show, pending) and the one that cleans
it (prune).

None of them creates a database: a SQLite file that does not exist is an error naming it
(exit 1). None imports user code. ``show`` pages through a run's checkpoints (``--limit``,
``--after``), so a run with a hundred thousand checkpoints is shown in bounded memory. Every
id, name and value printed is data, shown through ``terminal.py``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from tether.cli.operator import (
    answer_example,
    execution_id_argument,
    hint_options,
    json_option,
)
from tether.cli.options import check_id_option, db_option, open_store
from tether.cli.terminal import console, dumps, printable, shell_quote, shorten, text, when
from tether.status import RunStatus

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer

MAX_LIMIT = 100_000
SHOW_PAGE = 200


def register(group: click.Group) -> None:
    """Add the commands that read or prune the store to ``group``."""
    for command in (runs, show, pending, prune):
        group.add_command(command)


# --------------------------------------------------------------------------- runs


@click.command()
@click.option("--status", type=click.Choice([s.value for s in RunStatus]),
              help="Only runs with this status.")
@click.option("--stuck", is_flag=True,
              help="Only runs of workers' queues that are not making progress, with why: "
              "queued past the queue's start timeout, no live worker serving the queue, no "
              "worker with the run's tasks, a recovery that keeps failing.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True,
              help=f"At most this many runs (1 to {MAX_LIMIT:,}).")
@db_option
@json_option
def runs(status: str | None, stuck: bool, limit: int, db: str, as_json: bool) -> None:
    """List runs, newest first (with --stuck: the stuck ones, oldest first)."""
    store = open_store(db)
    reasons: dict[str, tuple[str, ...]] = {}
    if stuck:
        from tether.workers import lease_seconds
        from tether.workers.stuck import stuck_runs

        found = stuck_runs(store, time.time(), lease_seconds())
        found = [s for s in found if status is None or s.run.status == status][:limit]
        records = [s.run for s in found]
        reasons = {s.run.execution_id: s.reasons for s in found}
    else:
        records = store.list_runs(status, limit)
    if as_json:
        click.echo(dumps([{
            "execution_id": r.execution_id, "workflow": r.workflow, "status": r.status,
            "created_at": r.created_at.isoformat(), "updated_at": r.updated_at.isoformat(),
            "parent_execution_id": r.parent_execution_id, "error": r.error,
            "queue": r.queue, "blocked_reason": r.blocked_reason,
            "concurrency_key": r.concurrency_key,
            **({"reasons": list(reasons.get(r.execution_id, ()))} if stuck else {}),
        } for r in records], indent=2))
        return
    if not records:
        click.echo("no stuck runs" if stuck else "no runs")
        return
    from rich.table import Table

    table = Table("execution id", "workflow", "status", "started", "updated", "forked from",
                  "note", box=None, pad_edge=False)
    for r in records:
        note = "; ".join(reasons[r.execution_id]) if stuck else (r.blocked_reason or "")
        table.add_row(text(r.execution_id), text(r.workflow), text(r.status),
                      when(r.created_at), when(r.updated_at), text(r.parent_execution_id or ""),
                      text(note))
    console().print(table)


# --------------------------------------------------------------------------- show


@click.command()
@execution_id_argument
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=SHOW_PAGE,
              show_default=True, help="Show the events of at most this many checkpoints.")
@click.option("--after", metavar="CHECKPOINT_ID", callback=check_id_option("a checkpoint id"),
              help="Start after this checkpoint (the next page).")
@db_option
@json_option
def show(execution_id: str, limit: int, after: str | None, db: str, as_json: bool) -> None:
    """Show a run's history (every attempt, skip, pause, answer, owner), a page at a time."""
    from tether.cli.history_text import print_history
    from tether.runtime.history_build import build_history

    store = open_store(db)
    execution_id = store.resolve_execution_id(execution_id)
    if after is not None:
        after = store.resolve_checkpoint_id(execution_id, after)
    history = build_history(store, execution_id, after, limit)
    if as_json:
        click.echo(history.to_json())
        return
    print_history(history)
    if history.error:
        click.echo(f"error: {shorten(history.error, 200)}")
    if history.next_after is not None:
        click.echo(f"more checkpoints: tether show {shell_quote(execution_id)} --after "
                   f"{shell_quote(history.next_after)}", err=True)


# --------------------------------------------------------------------------- pending


@click.command()
@db_option
@json_option
def pending(db: str, as_json: bool) -> None:
    """List paused runs: those waiting for an answer (with the frozen context and the command
    that answers each), and those answered but not continued yet (with who continues them).
    The same runs as ``tether runs --status paused``."""
    from tether.runtime.lifecycle import awaiting
    from tether.workers.claims import lease_seconds

    store = open_store(db)
    rows = store.list_pending()
    answered = awaiting(store, lease_seconds())
    if as_json:
        click.echo(dumps([*({
            "execution_id": p.execution_id, "node_id": p.node_id, "agent_path": p.agent_path,
            "address": p.address, "reason": p.reason, "context": p.context,
            "since": p.created_at.isoformat(),
            "checkpoint_id": p.checkpoint_id, "state": "waiting"} for p in rows), *({
            "execution_id": a.run.execution_id, "node_id": a.answered[-1].node_id,
            "agent_path": a.answered[-1].agent_path, "address": a.answered[-1].address,
            "state": "answered", "since": a.answered[-1].created_at.isoformat(),
            "queue": a.queue, "continued_by": a.who()} for a in answered)], indent=2))
        return
    if not rows and not answered:
        click.echo("no paused runs")
        return
    for p in rows:
        click.echo(f"{printable(p.execution_id)}  {printable(p.address)}  {printable(p.reason)}  "
                   f"since {when(p.created_at)}")
        click.echo("    context: " + dumps(p.context))
        several = sum(1 for o in rows if o.execution_id == p.execution_id) > 1
        which = f" --node {shell_quote(p.address)}" if several else ""
        click.echo(f"    answer: tether resume {shell_quote(p.execution_id)}{which} "
                   f"--value {shell_quote(answer_example(store, p))}{hint_options((), db)}")
    for a in answered:
        click.echo(f"{printable(a.run.execution_id)}  {printable(a.answered[-1].address)}  "
                   f"answered {when(a.answered[-1].created_at)}, not continued yet")
        click.echo(f"    {printable(a.who())}")


# --------------------------------------------------------------------------- prune


def parse_age(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``--older-than``: a duration as the language writes them (at most 366 days), or zero
    (``0s``: every finished run)."""
    from tether.durations import DURATION_RE, DurationError, parse_duration

    match = DURATION_RE.match(value.strip())
    if match is not None and float(match.group(1)) == 0:
        return timedelta(0)
    try:
        return timedelta(seconds=parse_duration(value))
    except DurationError as exc:
        raise click.BadParameter(printable(exc)) from None


def prune_store(store: Checkpointer, age: timedelta, include_failed: bool) -> Any:
    """The one call into the store's prune."""
    return store.prune(age, include_failed=include_failed)


@click.command()
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              callback=parse_age,
              help="Remove finished runs that ended longer ago than this (7d, 12h, 30m; at "
              "most 366d).")
@click.option("--include-failed", is_flag=True,
              help="Also remove failed runs (which could otherwise still be resumed).")
@db_option
@json_option
def prune(older_than: timedelta, include_failed: bool, db: str, as_json: bool) -> None:
    """Delete old finished runs; paused and running runs are never touched."""
    started = time.time()
    result = prune_store(open_store(db), older_than, include_failed)
    if as_json:
        click.echo(dumps({"runs": result.runs, "checkpoints": result.checkpoints,
                          "idempotency_rows": result.idempotency_rows,
                          "execution_ids": list(result.execution_ids)}, indent=2))
        return
    moment = datetime.fromtimestamp(started - older_than.total_seconds(), tz=UTC)
    click.echo(f"removed {result.runs} runs ({result.checkpoints} checkpoints, "
               f"{result.idempotency_rows} cached results) that finished before {when(moment)}")
