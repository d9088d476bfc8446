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

from tether.cli.operator import execution_id_argument, json_option
from tether.cli.options import check_id_option, db_option, open_store
from tether.cli.terminal import console, dumps, printable, shell_quote, shorten, text, when
from tether.status import RunStatus

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer
    from tether.stores.records import Checkpoint, RunRecord

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


def _run_json(record: RunRecord, rows: list[Checkpoint], next_after: str | None,
              titles: dict[str, str]) -> str:
    return dumps({
        "execution_id": record.execution_id, "workflow": record.workflow,
        "status": record.status, "plan_fingerprint": record.plan_fingerprint,
        "inputs": record.inputs, "error": record.error,
        "parent_execution_id": record.parent_execution_id,
        "checkpoints": [{
            "checkpoint_id": c.checkpoint_id, "node_id": c.node_id,
            "node_index": c.node_index, "step_type": c.step_type, "status": c.status,
            "agent_path": c.agent_path, "created_at": c.created_at.isoformat(),
            "node_input": c.node_input,
            "title": titles.get(c.node_id.partition("/")[0]) if not c.agent_path else None,
            "node_output": c.node_output, "iteration_counters": c.iteration_counters,
            "interrupt_reason": c.interrupt_reason,
            "parent_checkpoint_id": c.parent_checkpoint_id,
        } for c in rows],
        "next_after": next_after}, indent=2)


def _print_header(record: RunRecord) -> None:
    from rich.text import Text

    out = console()
    out.print(Text.assemble("run ", text(record.execution_id), "  workflow ",
                            text(record.workflow), "  status ", text(record.status, "bold"),
                            f"  plan {printable(record.plan_fingerprint[:12])}"))
    out.print(text("inputs: " + shorten(record.inputs, 100)))
    if record.parent_execution_id:
        out.print(text(f"forked from {record.parent_execution_id} at "
                       f"{record.parent_checkpoint_id}"))


def _titles(store: Checkpointer, record: RunRecord) -> dict[str, str]:
    """The ``title`` of each node of the run's stored plan that has one."""
    from tether.compiler.plan import Plan

    text = store.get_plan(record.plan_fingerprint)
    if text is None:
        return {}
    try:
        plan = Plan.model_validate_json(text)
    except ValueError:
        return {}
    return {node.id: node.title for node in plan.nodes if node.title is not None}


def _print_timeline(record: RunRecord, rows: list[Checkpoint],
                    titles: dict[str, str] | None = None) -> None:
    from rich.table import Table

    titles = titles or {}
    table = Table(box=None, pad_edge=False)
    for title in ("time", "checkpoint", "node", "step", "status", "where"):
        table.add_column(title, no_wrap=True)
    table.add_column("output", no_wrap=True, overflow="ellipsis", max_width=48)
    for c in rows:
        offset = (c.created_at - record.created_at).total_seconds() * 1000
        named = titles.get(c.node_id.partition("/")[0]) if not c.agent_path else None
        shown = f"{c.node_id} ({named})" if named else c.node_id
        table.add_row(f"+{offset:,.0f} ms", text(c.checkpoint_id[-12:]), text(shown),
                      text(c.step_type), text(c.status), text(c.agent_path),
                      text(_described(c) or ""))
    console().print(table)
    usage = rows[-1].state_snapshot.get("usage") if rows else None
    if isinstance(usage, dict):
        console().print(text(f"tokens: {usage.get('input_tokens', 0):,} in, "
                             f"{usage.get('output_tokens', 0):,} out (every model call "
                             "of the run so far)"))


def _described(c: Checkpoint) -> str | None:
    """What the output column says of a checkpoint: agents' turns and tool calls readably."""
    if c.status == "interrupted":
        return c.interrupt_reason
    if c.step_type == "llm_call":
        messages = c.state_snapshot.get("messages")
        count = len(messages) if isinstance(messages, list) else 0
        what = "model call failed: turns used up" if c.status == "failed" else "model call"
        return f"{what} with {count} messages"
    if c.step_type == "tool_call":
        return "arguments " + shorten(c.node_input, 40)
    if c.step_type == "handoff" and isinstance(c.node_output, dict):
        return f"handed over to {c.node_output.get('to')}"
    return shorten(c.node_output, 48)


def read_page(store: Checkpointer, execution_id: str, after: str | None,
              limit: int) -> tuple[list[Checkpoint], str | None]:
    """One page of checkpoints and the ``--after`` of the next page (None on the last)."""
    rows = store.page(execution_id, after, limit + 1)
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1].checkpoint_id
    return rows, None


@click.command()
@execution_id_argument
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=SHOW_PAGE,
              show_default=True, help="Show at most this many checkpoints.")
@click.option("--after", metavar="CHECKPOINT_ID", callback=check_id_option("a checkpoint id"),
              help="Start after this checkpoint (the next page).")
@db_option
@json_option
def show(execution_id: str, limit: int, after: str | None, db: str, as_json: bool) -> None:
    """Show a run and its checkpoint timeline, a page at a time."""
    from tether.errors import RunNotFound

    store = open_store(db)
    record = store.get_run(store.resolve_execution_id(execution_id))
    if record is None:
        raise RunNotFound(execution_id)
    execution_id = record.execution_id
    if after is not None:
        after = store.resolve_checkpoint_id(execution_id, after)
    rows, next_after = read_page(store, execution_id, after, limit)
    if as_json:
        click.echo(_run_json(record, rows, next_after, _titles(store, record)))
        return
    _print_header(record)
    _print_timeline(record, rows, _titles(store, record))
    if record.error:
        click.echo(f"error: {shorten(record.error, 200)}")
    if next_after is not None:
        click.echo(f"more checkpoints: tether show {shell_quote(execution_id)} --after "
                   f"{shell_quote(next_after)}", err=True)


# --------------------------------------------------------------------------- pending


@click.command()
@db_option
@json_option
def pending(db: str, as_json: bool) -> None:
    """List paused runs with the frozen context each is waiting on."""
    rows = open_store(db).list_pending()
    if as_json:
        click.echo(dumps([{
            "execution_id": p.execution_id, "node_id": p.node_id, "agent_path": p.agent_path,
            "address": p.address, "reason": p.reason, "context": p.context,
            "since": p.created_at.isoformat(),
            "checkpoint_id": p.checkpoint_id} for p in rows], indent=2))
        return
    if not rows:
        click.echo("no paused runs")
        return
    for p in rows:
        click.echo(f"{printable(p.execution_id)}  {printable(p.address)}  {printable(p.reason)}  "
                   f"since {when(p.created_at)}")
        click.echo("    context: " + dumps(p.context))


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
