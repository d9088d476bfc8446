"""The operator commands that execute runs: run, resume, fork.

Exit codes: 0 completed (or left to live workers), 1 failed (or any error), 2 usage (a bad
option value), 4 paused (the command prints how to resume), 5 not continued (``resume``:
neither this process nor a live worker of the run's queue can continue it; it prints what to
run). The resume policy itself is the runtime's (``runtime/lifecycle.py``). Progress goes to
stderr, results to stdout (``--json`` prints one JSON object), so scripts can read stdout
while a person watches stderr. These commands import and run task code (``--tasks``, else
``[tool.tether] tasks`` of the nearest ``pyproject.toml``); the read-only commands live in
``inspect.py``. Everything printed from a run is data and goes through ``terminal.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

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
from tether.gc_pause import paused_gc
from tether.kinds import NodeKind

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanInput
    from tether.errors import NotContinued
    from tether.runtime.execution import Event
    from tether.runtime.runner import Runner, RunResult
    from tether.stores.base import Checkpointer
    from tether.stores.records import PendingInterrupt

EXIT_PAUSED = 4
EXIT_CANCELLED = 6  # cancelled by its concurrency key (the code of a refused submission too)
EXIT_NOT_CONTINUED = 5

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
                quiet: bool, *, load: bool = True) -> Runner:
    """A Runner with the task modules of ``tasks`` (else the pyproject's); ``load=False``:
    with none (a command that leaves the run to the workers)."""
    from tether.runtime.runner import Runner
    from tether.workers.claims import lease_seconds

    registry = load_tasks_or_exit(tasks, from_pyproject=not tasks) if load else {}
    return Runner(plan_source, store, registry if registry is not None else {},
                  on_event=progress(not quiet), lease_seconds=lease_seconds())


def report(result: RunResult, as_json: bool, store: Checkpointer | None = None,
           extra: str = "") -> None:
    """Print a run's outcome and exit with its code (0 completed, 1 failed, 4 paused, 6
    cancelled; 0 for a run left to the workers or another attempt). ``extra``: the options
    every printed command needs (:func:`hint_options`)."""
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
        _report_paused(result, store, extra)
    elif result.status in ("running", "queued"):
        click.echo(printable(result.message or f"run {result.execution_id} continues "
                             "elsewhere"))
    elif result.status == "cancelled":
        message = result.error.message if result.error else result.message or ""
        click.echo(f"cancelled run {run_id}: {printable(message)}")
    else:
        error = result.error
        where = f" at node '{printable(error.node_id)}'" if error and error.node_id else ""
        kind, message = (error.type, error.message) if error else ("Error", "")
        click.echo(f"failed run {run_id}{where}: {printable(kind)}: {printable(message)}")
        click.echo(f"fix the cause, then: tether resume {shell_quote(result.execution_id)}"
                   f"{extra}", err=True)
    code = {"completed": 0, "running": 0, "queued": 0, "paused": EXIT_PAUSED,
            "cancelled": EXIT_CANCELLED}.get(result.status, 1)
    raise click.exceptions.Exit(code)


def _report_paused(result: RunResult, store: Checkpointer | None, extra: str) -> None:
    for interrupt in result.pending:
        node = interrupt.address
        click.echo(f"paused run {printable(result.execution_id)} at node '{printable(node)}' "
                   f"({printable(interrupt.reason)})")
        click.echo("context: " + dumps(interrupt.context))
        example = answer_example(store, interrupt)
        which = f" --node {shell_quote(node)}" if len(result.pending) > 1 else ""
        click.echo(f"resume with: tether resume {shell_quote(result.execution_id)}{which} "
                   f"--value {shell_quote(example)}{extra}")


def answer_example(store: Checkpointer | None, interrupt: PendingInterrupt) -> str:
    """A ``--value`` that answers ``interrupt`` (its form's required fields, else all of
    them, ``{}`` for an empty form, ``{"approved": true}`` when it has no form), as JSON
    text."""
    form = _form_of(store, interrupt.execution_id, interrupt) if store else None
    if form is not None:  # an empty form takes `{}`, not an example of another form
        return dumps({f.name: _example(f) for f in form if f.required}
                     or {f.name: _example(f) for f in form})
    return dumps({"approved": True})


def _example(field: PlanInput) -> Any:
    if field.enum:
        return field.enum[0]
    return {"boolean": True, "number": 0, "integer": 0, "string": "...", "object": {},
            "array": []}.get(field.type)


def _form_of(store: Checkpointer, execution_id: str, interrupt: Mapping[str, Any]) -> Any:
    from tether.compiler.plan import Plan
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
    return node.approval.form if node.kind is NodeKind.APPROVAL else None


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
@click.option("--queue", default="default", show_default=True, metavar="NAME",
              help="The queue the run belongs to: its workers continue the run once it is "
              "answered elsewhere, or if this process dies.")
@run_tasks_option
@db_option
@json_option
@quiet_option
def run(source: str, pairs: tuple[str, ...], inputs_file: str | None,
        execution_id: str | None, queue: str, tasks: tuple[str, ...], db: str,
        as_json: bool, quiet: bool) -> None:
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
    if not queue.strip():
        raise click.BadParameter("a queue name cannot be empty", param_hint="--queue")
    from tether.trigger import TriggerKind, local_trigger

    report(runner.run(inputs, execution_id, queue=queue,
                      trigger=local_trigger(TriggerKind.CLI)), as_json, store,
           hint_options(tasks, db))


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
    """Resume a paused run with --value, or continue a failed, crashed or answered run.

    Imports and runs the task modules (--tasks, else [tool.tether] tasks in the nearest
    pyproject.toml) and continues the run here when they define every task it calls;
    otherwise the answer is recorded and the live workers of the run's queue continue it.
    When none is live, says what to run and exits 5. With --enqueue the run is always left
    to the workers (exit 0).
    """
    given = parse_object(value, "--value", '\'{"approved": true}\'') \
        if value is not None else None
    if queue is not None and not queue.strip():
        raise click.BadParameter("a queue name cannot be empty", param_hint="--queue")
    if enqueue and plan_source is not None:
        raise click.UsageError("--plan cannot be used when the workers continue the run")
    if given is not None and plan_source is None and (enqueue or not (tasks or _configured())):
        _answer_on_sqlite(db, execution_id, given, node, queue, as_json, leave=enqueue)
    from tether.errors import NotContinued, TimerNotDue
    from tether.runtime.context import Resume

    answer = Resume(**given) if given is not None else None
    # The start-up (imports, opening the store) with the collector paused: importing leaves
    # no cyclic garbage. The resume's own modules are imported here for that reason.
    with paused_gc():
        import tether.runtime.resume
        if not enqueue:
            import tether.runtime.driver  # noqa: F401  (it continues the run here)

        store = open_store(db)
        execution_id = store.resolve_execution_id(execution_id)
        _read_plan(store, execution_id)
        runner = make_runner(None, store, () if enqueue else tasks, quiet, load=not enqueue)
    try:
        result = runner.resume(execution_id, answer, node=node, plan=plan_source,
                               leave=enqueue, queue=queue, channel="cli")
    except TimerNotDue as exc:
        click.echo(printable(exc), err=True)
        raise click.exceptions.Exit(EXIT_PAUSED) from None
    except NotContinued as exc:
        _report_not_continued(exc, hint_options(tasks, db))
    report(result, as_json, store, hint_options(tasks, db))


def _read_plan(store: Checkpointer, execution_id: str) -> None:
    """Read the run's stored plan (validated and kept for the resume: ``plans.stored_plan``)
    before any task module is imported, light: by pydantic-core alone into the classes of
    ``compiler/plan_light.py``, so that the resume imports no pydantic and builds no model
    (docs/decisions.md, "Fast start, seventh pass"). What goes wrong here is left for the
    resume to report, at the place it reads the plan."""
    from tether.runtime.plans import stored_plan

    run = store.get_run(execution_id)
    if run is None:
        return
    with contextlib.suppress(TetherError):
        stored_plan(store, run, light=True)


def _configured() -> bool:
    """Whether the nearest pyproject.toml lists task modules (or cannot be read: the full
    path says why)."""
    from tether.cli.options import configured_tasks, find_pyproject

    pyproject = find_pyproject()
    try:
        return pyproject is not None and bool(configured_tasks(pyproject))
    except TetherError:
        return True


def _answer_on_sqlite(db: str, execution_id: str, answer: dict[str, Any], node: str | None,
                      queue: str | None, as_json: bool, *, leave: bool) -> None:
    """Record the answer and leave the run to the workers on a current SQLite file with
    ``sqlite3`` (no SQLAlchemy, no runtime: ``stores/sqlite_answer.py``), printing what the
    full path prints and exiting as it does; return (writing nothing) when the full path
    must act. ``leave``: --enqueue; else this process has no task modules."""
    import sys

    if "opentelemetry.trace" in sys.modules:
        return  # the full path records its spans
    with paused_gc():
        from tether.stores.sqlite_answer import record_answer
    done = record_answer(db, execution_id, answer, node, queue, leave=leave)
    if done is None:
        return
    if done.not_continued is not None:
        _report_not_continued(done.not_continued, hint_options((), db))
    if as_json:
        click.echo(dumps({"status": done.status, "execution_id": done.execution_id,
                          "output": None, "pending_interrupt": None, "pending": [],
                          "error": None, "message": done.message}, indent=2))
    else:
        click.echo(printable(done.message))
    raise click.exceptions.Exit(0)


def _report_not_continued(exc: NotContinued, extra: str) -> NoReturn:
    """Say why nothing continues the run and what would; exit 5."""
    click.echo(f"error: {printable(exc)}", err=True)
    if exc.missing:
        click.echo("the run calls: " + ", ".join(printable(m) for m in exc.missing), err=True)
    for command in exc.commands:
        click.echo(f"continue it with: {printable(command)}{extra}", err=True)
    raise click.exceptions.Exit(EXIT_NOT_CONTINUED)


def hint_options(tasks: tuple[str, ...], db: str) -> str:
    """The options a printed command needs to work as printed in a fresh shell in this
    directory: the task modules given with --tasks, and the store when --db named one on the
    command line (not a URL holding a password: a hint is not where a secret is printed)."""
    from tether.cli.options import DEFAULT_DB

    parts = [f" --tasks {shell_quote(t)}" for t in tasks]
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source("db") if ctx is not None else None
    if db != DEFAULT_DB and source == click.core.ParameterSource.COMMANDLINE \
            and not _has_password(db):
        parts.append(f" --db {shell_quote(db)}")
    return "".join(parts)


def _has_password(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password is not None
    except ValueError:
        return True


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
    report(result, as_json, store, hint_options(tasks, db))
