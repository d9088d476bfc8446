"""The operator commands that execute runs: run, resume, fork.

Exit codes: 0 completed, 1 failed (or any error), 2 usage (a bad option value), 4 paused (the
command prints how to resume). Progress goes to stderr, results to stdout (``--json`` prints
one JSON object), so scripts can read stdout while a person watches stderr. These commands
import and run task code (``--tasks``, else ``[tool.tether] tasks`` of the nearest
``pyproject.toml``); the read-only commands live in ``inspect.py``. Everything printed from a
run is data and goes through ``terminal.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from tether.cli.inputs import check_value, parse_json, parse_object, read_inputs_file
from tether.cli.options import (
    check_id_option,
    db_option,
    load_tasks_or_exit,
    open_store,
    run_tasks_option,
)
from tether.cli.terminal import dumps, printable, shell_quote
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanInput
    from tether.runtime.execution import Event
    from tether.runtime.runner import Runner, RunResult
    from tether.stores.base import Checkpointer

EXIT_PAUSED = 4

json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the result as one JSON object on stdout.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="Do not show live progress.")
execution_id_argument = click.argument(
    "execution_id", callback=check_id_option("an execution id"))


def register(group: click.Group) -> None:
    """Add the commands that execute runs to ``group``."""
    for command in (run, resume, fork):
        group.add_command(command)


# --------------------------------------------------------------------------- inputs


def coerce_input(plan: Plan, name: str, raw: str) -> Any:
    """An ``--input name=value`` value read by the input's declared type."""
    spec = next((i for i in plan.inputs if i.name == name), None)
    if spec is None or spec.type == "string":
        return raw
    return parse_json(raw, f"--input {name} ({spec.type})")


def read_inputs(plan: Plan, pairs: tuple[str, ...], inputs_file: str | None) -> dict[str, Any]:
    """The run's inputs: the file's mapping, then each ``--input`` over it."""
    values: dict[str, Any] = {}
    if inputs_file is not None:
        values.update(read_inputs_file(inputs_file))
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{printable(pair)[:80]!r} is not NAME=VALUE",
                                     param_hint="--input")
        values[name.strip()] = coerce_input(plan, name.strip(), raw)
    check_value(values, "--input")
    return values


# --------------------------------------------------------------------------- output


def progress(enabled: bool) -> Callable[[Event], None] | None:
    """A listener printing each unit as it starts and finishes (to stderr)."""
    if not enabled:
        return None
    marks = {"completed": "✓", "failed": "✗", "interrupted": "⏸", "skipped": "↷"}

    def show(event: Event) -> None:
        where = printable(f"{event.agent_path}/{event.node_id}" if event.agent_path
                          else event.node_id)
        if event.title:
            where = f"{printable(event.title)} ({where})"
        if event.kind == "started":
            click.echo(f"  ▶ {where}", err=True)
        else:
            mark = marks.get(event.status, "·")
            click.echo(f"  {mark} {where} {printable(event.status)} "
                       f"({event.seconds * 1000:.0f} ms)", err=True)

    return show


def make_runner(plan_source: str | None, store: Checkpointer, tasks: tuple[str, ...],
                quiet: bool) -> Runner:
    from tether.runtime.runner import Runner
    from tether.workers.claims import lease_seconds

    registry = load_tasks_or_exit(tasks, from_pyproject=not tasks)
    return Runner(plan_source, store, registry if registry is not None else {},
                  on_event=progress(not quiet), lease_seconds=lease_seconds())


def report(result: RunResult, as_json: bool, store: Checkpointer | None = None) -> None:
    """Print a run's outcome and exit with its code (0 completed, 1 failed, 4 paused)."""
    run_id = printable(result.execution_id)
    if as_json:
        click.echo(dumps({
            "status": result.status, "execution_id": result.execution_id,
            "output": result.output,
            "pending_interrupt": first.as_dict() if (first := result.pending_interrupt)
            else None,
            "pending": [p.as_dict() for p in result.pending],
            "error": result.error.to_json() if result.error else None,
            "message": result.message}, indent=2))
    elif result.status == "completed":
        click.echo(f"completed run {run_id}")
        click.echo(dumps(result.output, indent=2))
    elif result.status == "paused":
        _report_paused(result, store)
    elif result.status == "running":
        click.echo(printable(result.message or f"run {result.execution_id} continues "
                             "elsewhere"))
    else:
        error = result.error
        where = f" at node '{printable(error.node_id)}'" if error and error.node_id else ""
        kind, message = (error.type, error.message) if error else ("Error", "")
        click.echo(f"failed run {run_id}{where}: {printable(kind)}: {printable(message)}")
        click.echo(f"fix the cause, then: tether resume {shell_quote(result.execution_id)}",
                   err=True)
    code = {"completed": 0, "running": 0, "paused": EXIT_PAUSED}.get(result.status, 1)
    raise click.exceptions.Exit(code)


def _report_paused(result: RunResult, store: Checkpointer | None) -> None:
    for interrupt in result.pending:
        node = interrupt.address
        click.echo(f"paused run {printable(result.execution_id)} at node '{printable(node)}' "
                   f"({printable(interrupt.reason)})")
        click.echo("context: " + dumps(interrupt.context))
        example = dumps({"approved": True})
        form = _form_of(store, result.execution_id, interrupt) if store else None
        if form is not None:  # an empty form takes `{}`, not an example of another form
            example = dumps({f.name: _example(f) for f in form if f.required}
                            or {f.name: _example(f) for f in form})
        which = f" --node {shell_quote(node)}" if len(result.pending) > 1 else ""
        click.echo(f"resume with: tether resume {shell_quote(result.execution_id)}{which} "
                   f"--value {shell_quote(example)}")


def _example(field: PlanInput) -> Any:
    if field.enum:
        return field.enum[0]
    return {"boolean": True, "number": 0, "integer": 0, "string": "...", "object": {},
            "array": []}.get(field.type)


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


# --------------------------------------------------------------------------- commands


@click.command("run")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "-i", "pairs", multiple=True, metavar="NAME=VALUE",
              help="An input value (read as JSON unless the input is a string); repeatable.")
@click.option("--inputs-file", type=click.Path(exists=True, dir_okay=False),
              help="A JSON (.json) or YAML file with the inputs (at most 10 MB).")
@click.option("--execution-id", callback=check_id_option("an execution id", new=True),
              help="Use this execution id (1 to 200 of A-Z a-z 0-9 - _ . : @ + =, not "
              "starting with '.', no '..') instead of a new one.")
@run_tasks_option
@db_option
@json_option
@quiet_option
def run(source: str, pairs: tuple[str, ...], inputs_file: str | None,
        execution_id: str | None, tasks: tuple[str, ...], db: str, as_json: bool,
        quiet: bool) -> None:
    """Run a workflow file or a compiled plan (.json) to completion or its first pause.

    Imports and runs the task modules (--tasks, else [tool.tether] tasks in the nearest
    pyproject.toml).
    """
    store = open_store(db, create=True)
    runner = make_runner(source, store, tasks, quiet)
    assert runner.plan is not None
    inputs = read_inputs(runner.plan, pairs, inputs_file)
    if not quiet and not as_json:
        click.echo(f"running {printable(runner.plan.name)} ({runner.plan.fingerprint[:12]})",
                   err=True)
    report(runner.run(inputs, execution_id), as_json, store)


@click.command()
@execution_id_argument
@click.option("--value", metavar="JSON", help='The answer, a JSON object: \'{"approved": true}\'.')
@click.option("--node", metavar="NODE", help="The pending interrupt to answer, when several are "
              "pending (its address as `tether pending` shows it, or its node id).")
@click.option("--plan", "plan_source", type=click.Path(exists=True, dir_okay=False),
              help="Switch the run to this (compatible) workflow or plan.")
@click.option("--enqueue", is_flag=True, help="Record the answer (or the request to "
              "continue) and leave the run to the workers (tether worker); exit 0.")
@click.option("--queue", default=None, metavar="NAME", help="With --enqueue: the workers' "
              "queue (default: the run's own, else default).")
@run_tasks_option
@db_option
@json_option
@quiet_option
def resume(execution_id: str, value: str | None, node: str | None, plan_source: str | None,
           enqueue: bool, queue: str | None, tasks: tuple[str, ...], db: str, as_json: bool,
           quiet: bool) -> None:
    """Resume a paused run with --value, or continue a failed or crashed run.

    Imports and runs the task modules (--tasks, else [tool.tether] tasks in the nearest
    pyproject.toml). With --enqueue, or when a --value is given where no task module is
    loaded and the run calls tasks, the answer is recorded and the workers continue the run.
    """
    from tether.runtime.context import Resume

    answer = None
    if value is not None:
        answer = Resume(**parse_object(value, "--value", '\'{"approved": true}\''))
    store = open_store(db)
    execution_id = store.resolve_execution_id(execution_id)
    if answer is None:
        _exit_if_timer_not_due(store, execution_id)
    registry = None if enqueue else load_tasks_or_exit(tasks, from_pyproject=not tasks)
    if enqueue or (answer is not None and registry is None
                   and _calls_tasks(store, execution_id)):
        _hand_to_workers(store, execution_id, answer, node, queue, plan_source)
        return
    runner = make_runner(None, store, tasks, quiet)
    report(runner.resume(execution_id, answer, node=node, plan=plan_source), as_json, store)


def _calls_tasks(store: Checkpointer, execution_id: str) -> bool:
    """Whether the run's plan calls any task (a run of approvals and built-in nodes alone
    continues in place even where no task module is loaded)."""
    from tether.runtime.plans import stored_plan, task_names

    run = store.get_run(execution_id)
    if run is None:
        return False
    try:
        return bool(task_names(stored_plan(store, run)))
    except TetherError:
        return True


def _exit_if_timer_not_due(store: Checkpointer, execution_id: str) -> None:
    """A paused run waiting only for sleeps not due yet: say when, exit 4, change nothing."""
    from tether.errors import TimerNotDue
    from tether.runtime.plans import stored_plan
    from tether.runtime.timer_rules import not_due

    run = store.get_run(execution_id)
    if run is None or run.status != "paused":
        return
    try:
        not_due(execution_id, stored_plan(store, run), store.list_pending(execution_id))
    except TimerNotDue as exc:
        click.echo(f"{exc}", err=True)
        raise SystemExit(EXIT_PAUSED) from None


def _hand_to_workers(store: Checkpointer, execution_id: str, answer: Any, node: str | None,
                     queue: str | None, plan_source: str | None) -> None:
    """``resume --enqueue``: record the answer (the atomic claim), queue the run for the
    workers, say so; exit 0."""
    from tether.errors import RunNotFound, TetherError
    from tether.runtime.runner import Runner

    if plan_source is not None:
        raise click.UsageError("--plan cannot be used when the workers continue the run")
    run_record = store.get_run(execution_id)
    if run_record is None:
        raise RunNotFound(execution_id)
    where = queue or run_record.queue or "default"
    if not where.strip():
        raise click.BadParameter("a queue name cannot be empty", param_hint="--queue")
    run_id = printable(execution_id)
    if answer is not None:
        answered = Runner(None, store, {}).answer(execution_id, answer, node=node)
        click.echo(f"answer recorded for '{printable(answered.address)}' of run {run_id}")
    elif run_record.status in ("completed", "cancelled"):
        raise TetherError(f"run {execution_id} is {run_record.status}: nothing to continue")
    if not store.enqueue_run(execution_id, where, run_record.priority):
        raise RunNotFound(execution_id)
    click.echo(f"run {run_id} is left to the workers of queue '{printable(where)}' "
               "(tether worker) to continue")


@click.command()
@execution_id_argument
@click.option("--checkpoint", "checkpoint_id", callback=check_id_option("a checkpoint id"),
              help="Branch from this checkpoint (default: the newest one that is not the "
              "run's end marker).")
@click.option("--patch", metavar="JSON", help="A JSON object merged into the state first.")
@run_tasks_option
@db_option
@json_option
@quiet_option
def fork(execution_id: str, checkpoint_id: str | None, patch: str | None,
         tasks: tuple[str, ...], db: str, as_json: bool, quiet: bool) -> None:
    """Start a new run from a checkpoint of another; the original is left untouched.

    Imports and runs the task modules (--tasks, else [tool.tether] tasks in the nearest
    pyproject.toml).
    """
    state_patch = parse_object(patch, "--patch", "'{\"nodes\": {}}'") \
        if patch is not None else None
    store = open_store(db)
    execution_id = store.resolve_execution_id(execution_id)
    if checkpoint_id is not None:
        checkpoint_id = store.resolve_checkpoint_id(execution_id, checkpoint_id)
    runner = make_runner(None, store, tasks, quiet)
    result = runner.fork(execution_id, checkpoint_id, state_patch)
    if not as_json:
        click.echo(f"forked run {printable(execution_id)} as "
                   f"{printable(result.execution_id)}", err=True)
    report(result, as_json, store)
