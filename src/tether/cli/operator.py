"""The operator commands: run, resume, fork, runs, show, pending, prune.

Exit codes of run, resume and fork: 0 completed, 1 failed (or any error), 4 paused (the
command prints how to resume). Progress goes to stderr, results to stdout (``--json`` prints
one JSON object), so scripts can read stdout while a person watches stderr.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tether.cli.options import db_option, load_tasks_or_exit, tasks_option
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.runtime.execution import Event
    from tether.runtime.runner import Runner, RunResult
    from tether.stores.base import Checkpointer

EXIT_PAUSED = 4

json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the result as one JSON object on stdout.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="Do not show live progress.")


def register(group: click.Group) -> None:
    """Add the operator commands to ``group``."""
    for command in (run, resume, fork, runs, show, pending, prune):
        group.add_command(command)


# --------------------------------------------------------------------------- helpers


def open_store(url: str) -> Checkpointer:
    from tether.stores.open import open_checkpointer

    return open_checkpointer(url)


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s``, ``2w`` as a timedelta."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*", text)
    if match is None:
        raise click.BadParameter(f"{text!r} is not a duration like 7d, 12h, 30m")
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    return timedelta(**{unit[match.group(2)]: float(match.group(1))})


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"{what} is not valid JSON: {exc.msg} (column {exc.colno})") from None


def coerce_input(plan: Plan, name: str, raw: str) -> Any:
    """An ``--input name=value`` value read by the input's declared type."""
    spec = next((i for i in plan.inputs if i.name == name), None)
    if spec is None or spec.type == "string":
        return raw
    return parse_json(raw, f"--input {name} ({spec.type})")


def read_inputs(plan: Plan, pairs: tuple[str, ...], inputs_file: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if inputs_file is not None:
        text = Path(inputs_file).read_text(encoding="utf-8")
        import yaml

        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise click.BadParameter(f"{inputs_file} is not JSON or YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise click.BadParameter(f"{inputs_file} must hold a mapping of input names")
        values.update(loaded)
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--input")
        values[name.strip()] = coerce_input(plan, name.strip(), raw)
    return values


def progress(enabled: bool) -> Callable[[Event], None] | None:
    """A listener printing each unit as it starts and finishes (to stderr)."""
    if not enabled:
        return None
    marks = {"completed": "✓", "failed": "✗", "interrupted": "⏸", "skipped": "↷"}

    def show(event: Event) -> None:
        where = f"{event.agent_path}/" if event.agent_path else ""
        if event.kind == "started":
            click.echo(f"  ▶ {where}{event.node_id}", err=True)
        else:
            mark = marks.get(event.status, "·")
            click.echo(f"  {mark} {where}{event.node_id} {event.status} "
                       f"({event.seconds * 1000:.0f} ms)", err=True)

    return show


def make_runner(plan_source: str | None, store: Checkpointer, tasks: tuple[str, ...],
                quiet: bool) -> Runner:
    from tether.runtime.runner import Runner

    registry = load_tasks_or_exit(tasks)
    return Runner(plan_source, store, registry if registry is not None else {},
                  on_event=progress(not quiet))


def report(result: RunResult, as_json: bool, store: Checkpointer | None = None) -> None:
    """Print a run's outcome and exit with its code (0 completed, 1 failed, 4 paused)."""
    if as_json:
        click.echo(json.dumps({
            "status": result.status, "execution_id": result.execution_id,
            "output": result.output,
            "pending_interrupt": first.as_dict() if (first := result.pending_interrupt)
            else None,
            "pending": [p.as_dict() for p in result.pending],
            "error": result.error.to_json() if result.error else None,
            "message": result.message}, indent=2, ensure_ascii=False))
    elif result.status == "completed":
        click.echo(f"completed run {result.execution_id}")
        click.echo(json.dumps(result.output, indent=2, ensure_ascii=False))
    elif result.status == "paused":
        _report_paused(result, store)
    elif result.status == "running":
        click.echo(result.message or f"run {result.execution_id} continues elsewhere")
    else:
        error = result.error
        where = f" at node '{error.node_id}'" if error and error.node_id else ""
        kind, message = (error.type, error.message) if error else ("Error", "")
        click.echo(f"failed run {result.execution_id}{where}: {kind}: {message}")
        click.echo(f"fix the cause, then: tether resume {result.execution_id}", err=True)
    code = {"completed": 0, "running": 0, "paused": EXIT_PAUSED}.get(result.status, 1)
    raise click.exceptions.Exit(code)


def _report_paused(result: RunResult, store: Checkpointer | None) -> None:
    for interrupt in result.pending:
        node = interrupt.address
        click.echo(f"paused run {result.execution_id} at node '{node}' ({interrupt.reason})")
        click.echo("context: " + json.dumps(interrupt.context, ensure_ascii=False))
        example = json.dumps({"approved": True})
        form = _form_of(store, result.execution_id, interrupt) if store else None
        if form:
            example = json.dumps({f.name: _example(f.type) for f in form if f.required}
                                 or {f.name: _example(f.type) for f in form})
        which = f" --node {node}" if len(result.pending) > 1 else ""
        click.echo(f"resume with: tether resume {result.execution_id}{which} "
                   f"--value '{example}'")


def _example(type_name: str) -> Any:
    return {"boolean": True, "number": 0, "integer": 0, "string": "...", "object": {},
            "array": []}.get(type_name)


def _form_of(store: Checkpointer, execution_id: str, interrupt: Mapping[str, Any]) -> Any:
    from tether.compiler.plan import ApprovalNode, Plan
    from tether.runtime.state import locate_unit

    run_record = store.get_run(execution_id)
    text = store.get_plan(run_record.plan_fingerprint) if run_record else None
    if text is None:
        return None
    try:
        level, _ = locate_unit(Plan.from_json(text), {"nodes": {}},
                               str(interrupt.get("agent_path") or ""),
                               str(interrupt.get("node_id")))
        node = level.node(str(interrupt.get("node_id")).partition("/item:")[0])
    except (KeyError, TetherError):
        return None
    return node.approval.form if isinstance(node, ApprovalNode) else None


def wide_console() -> Any:
    """A rich console; when output is not a terminal, wide enough not to wrap table rows."""
    from rich.console import Console

    console = Console(soft_wrap=True)
    return console if console.is_terminal else Console(soft_wrap=True, width=200)


def when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def shorten(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"


# --------------------------------------------------------------------------- commands


@click.command("run")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "-i", "pairs", multiple=True, metavar="NAME=VALUE",
              help="An input value (read as JSON unless the input is a string); repeatable.")
@click.option("--inputs-file", type=click.Path(exists=True, dir_okay=False),
              help="A JSON or YAML file with the inputs.")
@click.option("--execution-id", help="Use this execution id instead of a new one.")
@tasks_option
@db_option
@json_option
@quiet_option
def run(source: str, pairs: tuple[str, ...], inputs_file: str | None,
        execution_id: str | None, tasks: tuple[str, ...], db: str, as_json: bool,
        quiet: bool) -> None:
    """Run a workflow file or a compiled plan (.json) to completion or its first pause."""
    store = open_store(db)
    runner = make_runner(source, store, tasks, quiet)
    assert runner.plan is not None
    inputs = read_inputs(runner.plan, pairs, inputs_file)
    if not quiet and not as_json:
        click.echo(f"running {runner.plan.name} ({runner.plan.fingerprint[:12]})", err=True)
    report(runner.run(inputs, execution_id), as_json, store)


@click.command()
@click.argument("execution_id")
@click.option("--value", metavar="JSON", help='The answer, a JSON object: \'{"approved": true}\'.')
@click.option("--node", metavar="NODE", help="The pending interrupt to answer, when several are "
              "pending (its node id, or agent_path/node_id).")
@click.option("--plan", "plan_source", type=click.Path(exists=True, dir_okay=False),
              help="Switch the run to this (compatible) workflow or plan.")
@tasks_option
@db_option
@json_option
@quiet_option
def resume(execution_id: str, value: str | None, node: str | None, plan_source: str | None,
           tasks: tuple[str, ...], db: str, as_json: bool, quiet: bool) -> None:
    """Resume a paused run with --value, or continue a failed or crashed run."""
    from tether.runtime.context import Resume

    answer = None
    if value is not None:
        parsed = parse_json(value, "--value")
        if not isinstance(parsed, dict):
            raise click.BadParameter("--value must be a JSON object, e.g. '{\"approved\": true}'")
        answer = Resume(**parsed)
    store = open_store(db)
    runner = make_runner(None, store, tasks, quiet)
    report(runner.resume(execution_id, answer, node=node, plan=plan_source), as_json, store)


@click.command()
@click.argument("execution_id")
@click.option("--checkpoint", "checkpoint_id", help="Branch from this checkpoint "
              "(default: the newest one that is not the run's end marker).")
@click.option("--patch", metavar="JSON", help="A JSON object merged into the state first.")
@tasks_option
@db_option
@json_option
@quiet_option
def fork(execution_id: str, checkpoint_id: str | None, patch: str | None,
         tasks: tuple[str, ...], db: str, as_json: bool, quiet: bool) -> None:
    """Start a new run from a checkpoint of another; the original is left untouched."""
    state_patch = parse_json(patch, "--patch") if patch is not None else None
    if state_patch is not None and not isinstance(state_patch, dict):
        raise click.BadParameter("--patch must be a JSON object")
    store = open_store(db)
    runner = make_runner(None, store, tasks, quiet)
    result = runner.fork(execution_id, checkpoint_id, state_patch)
    if not as_json:
        click.echo(f"forked run {execution_id} as {result.execution_id}", err=True)
    report(result, as_json, store)


@click.command()
@click.option("--status", type=click.Choice(["running", "paused", "completed", "failed"]),
              help="Only runs with this status.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@db_option
@json_option
def runs(status: str | None, limit: int, db: str, as_json: bool) -> None:
    """List runs, newest first."""
    records = open_store(db).list_runs(status, limit)
    if as_json:
        click.echo(json.dumps([{
            "execution_id": r.execution_id, "workflow": r.workflow, "status": r.status,
            "created_at": r.created_at.isoformat(), "updated_at": r.updated_at.isoformat(),
            "parent_execution_id": r.parent_execution_id, "error": r.error,
        } for r in records], indent=2, ensure_ascii=False))
        return
    from rich.table import Table

    table = Table("execution id", "workflow", "status", "started", "updated", "forked from",
                  box=None, pad_edge=False)
    for r in records:
        table.add_row(r.execution_id, r.workflow, r.status, when(r.created_at),
                      when(r.updated_at), r.parent_execution_id or "")
    wide_console().print(table if records else "no runs")


@click.command()
@click.argument("execution_id")
@db_option
@json_option
def show(execution_id: str, db: str, as_json: bool) -> None:
    """Show a run and its checkpoint timeline."""
    from tether.errors import RunNotFound

    store = open_store(db)
    record = store.get_run(execution_id)
    if record is None:
        raise RunNotFound(execution_id)
    rows = store.list(execution_id)
    if as_json:
        click.echo(json.dumps({
            "execution_id": record.execution_id, "workflow": record.workflow,
            "status": record.status, "plan_fingerprint": record.plan_fingerprint,
            "inputs": record.inputs, "error": record.error,
            "parent_execution_id": record.parent_execution_id,
            "checkpoints": [{
                "checkpoint_id": c.checkpoint_id, "node_id": c.node_id,
                "node_index": c.node_index, "step_type": c.step_type, "status": c.status,
                "agent_path": c.agent_path, "created_at": c.created_at.isoformat(),
                "node_output": c.node_output, "iteration_counters": c.iteration_counters,
                "interrupt_reason": c.interrupt_reason,
                "parent_checkpoint_id": c.parent_checkpoint_id,
            } for c in rows]}, indent=2, ensure_ascii=False))
        return
    from rich.table import Table

    console = wide_console()
    console.print(f"run {record.execution_id}  workflow {record.workflow}  "
                  f"status [bold]{record.status}[/bold]  plan {record.plan_fingerprint[:12]}",
                  highlight=False)
    console.print("inputs: " + shorten(record.inputs, 100), highlight=False, markup=False)
    if record.parent_execution_id:
        console.print(f"forked from {record.parent_execution_id} at "
                      f"{record.parent_checkpoint_id}", highlight=False)
    table = Table(box=None, pad_edge=False)
    for title in ("time", "checkpoint", "node", "step", "status", "where"):
        table.add_column(title, no_wrap=True)
    table.add_column("output", no_wrap=True, overflow="ellipsis", max_width=48)
    start = rows[0].created_at if rows else record.created_at
    for c in rows:
        offset = (c.created_at - start).total_seconds() * 1000
        output = c.interrupt_reason if c.status == "interrupted" else shorten(c.node_output, 48)
        table.add_row(f"+{offset:,.0f} ms", c.checkpoint_id[-12:], c.node_id, c.step_type,
                      c.status, c.agent_path, output or "")
    console.print(table)
    if record.error:
        console.print(f"error: {shorten(record.error, 200)}", highlight=False, markup=False)


@click.command()
@db_option
@json_option
def pending(db: str, as_json: bool) -> None:
    """List paused runs with the frozen context each is waiting on."""
    rows = open_store(db).list_pending()
    if as_json:
        click.echo(json.dumps([{
            "execution_id": p.execution_id, "node_id": p.node_id, "agent_path": p.agent_path,
            "reason": p.reason, "context": p.context, "since": p.created_at.isoformat(),
            "checkpoint_id": p.checkpoint_id} for p in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo("no paused runs")
        return
    for p in rows:
        where = f"{p.agent_path}/" if p.agent_path else ""
        click.echo(f"{p.execution_id}  {where}{p.node_id}  {p.reason}  since {when(p.created_at)}")
        click.echo("    context: " + json.dumps(p.context, ensure_ascii=False))


@click.command()
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Remove finished runs that ended longer ago than this (7d, 12h, 30m).")
@click.option("--include-failed", is_flag=True,
              help="Also remove failed runs (which could otherwise still be resumed).")
@db_option
@json_option
def prune(older_than: str, include_failed: bool, db: str, as_json: bool) -> None:
    """Delete old finished runs; paused and running runs are never touched."""
    age = parse_duration(older_than)
    cutoff = time.time() - age.total_seconds()
    result = open_store(db).prune(age, include_failed=include_failed)
    if as_json:
        click.echo(json.dumps({"runs": result.runs, "checkpoints": result.checkpoints,
                               "idempotency_rows": result.idempotency_rows,
                               "execution_ids": list(result.execution_ids)}, indent=2))
        return
    moment = datetime.fromtimestamp(cutoff, tz=UTC)
    click.echo(f"removed {result.runs} runs ({result.checkpoints} checkpoints, "
               f"{result.idempotency_rows} cached results) that finished before {when(moment)}")
