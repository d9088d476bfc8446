"""The fleet commands: submit, worker, workers, cancel.

``tether submit`` enqueues a run and prints its execution id (nothing executes here, so no
task module is imported). ``tether worker`` is the long-lived process that executes queued,
crashed and answered runs (``tether.workers``); SIGTERM or SIGINT stops it gracefully: it
stops claiming, lets the nodes in flight finish and checkpoint, hands its runs back and
exits 0. ``tether workers`` lists the live workers; ``tether cancel`` cancels a run (at once
when nothing executes it, else at its holder's next node boundary). See ``docs/workers.md``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tether.cli.operator import EXIT_CANCELLED, execution_id_argument, read_inputs
from tether.cli.options import (
    check_id_option,
    checking_tasks,
    db_option,
    import_tasks_option,
    load_tasks_or_exit,
    open_store,
    run_tasks_option,
)
from tether.cli.terminal import printable, shell_quote
from tether.errors import RunNotFound
from tether.gc_pause import paused_gc

if TYPE_CHECKING:  # annotations only: the CLI imports the compiler when a command needs it
    from tether.compiler.plan import Plan
    from tether.stores.base import Checkpointer

# What a submission did: (execution id, created, status, why a run that cancel_new stored
# cancelled was dropped, or None).
Submitted = tuple[str, bool, str, str | None]

queue_option = click.option("--queue", default="default", show_default=True, metavar="NAME",
                            help="The workers' queue.")


def register(group: click.Group) -> None:
    """Add the fleet commands to ``group``."""
    from tether.cli import queues

    for command in (submit, worker, workers, cancel):
        group.add_command(command)
    queues.register(group)


@click.command()
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "-i", "pairs", multiple=True, metavar="NAME=VALUE",
              help="An input value (read as JSON unless the input is a string); repeatable.")
@click.option("--inputs-file", type=click.Path(exists=True, dir_okay=False),
              help="A JSON (.json) or YAML file with the inputs (at most 10 MB).")
@queue_option
@click.option("--priority", type=int, default=0, show_default=True,
              help="Higher is claimed first within the queue.")
@click.option("--id", "execution_id",
              callback=check_id_option("an execution id", new=True),
              help="The run's execution id and dedup key (1 to 200 of A-Z a-z 0-9 - _ . : "
              "@ + =, not starting with '.', no '..'): when a run of this workflow already "
              "has it, nothing is submitted and its id is printed (exit 0).")
@db_option
@click.option("--tasks", "tasks", multiple=True, metavar="MODULE",
              help="Import task modules (dotted names or .py paths) to record their "
              "signatures with the plan; repeatable. Workers whose tasks no longer fit them "
              "leave the run queued. Without --tasks or --import-tasks no user code is "
              "imported.")
@import_tasks_option
def submit(source: str, pairs: tuple[str, ...], inputs_file: str | None, queue: str,
           priority: int, execution_id: str | None, db: str, tasks: tuple[str, ...],
           import_tasks: bool) -> None:
    """Enqueue a run of a workflow file or plan for the workers; print its execution id.

    With --id, submitting again returns the first run (said on stderr) instead of starting
    another, however many submissions race."""
    if not queue.strip():
        raise click.BadParameter("a queue name cannot be empty", param_hint="--queue")
    # Short and bounded (nothing executes here): the collector is paused throughout, as
    # importing the store and the runtime leaves no cyclic garbage for it to find.
    with paused_gc():
        done = None
        if not tasks and not import_tasks:  # (signatures need the full store)
            done = _submit_on_sqlite(source, pairs, inputs_file, queue, priority,
                                     execution_id, db)
        if done is None:
            done = _submit(source, pairs, inputs_file, queue, priority, execution_id, db,
                           checking_tasks(tasks, import_tasks) or {})
    execution, created, status, dropped = done
    click.echo(printable(execution))
    if not created:
        click.echo(f"run {printable(execution)} already existed ({status}); "
                   "nothing was submitted", err=True)
    elif dropped is not None:  # cancel_new: stored cancelled, as `tether run` exits 6
        click.echo(f"error: run {printable(execution)} was {printable(dropped)}", err=True)
        raise click.exceptions.Exit(EXIT_CANCELLED)


def _submit(source: str, pairs: tuple[str, ...], inputs_file: str | None, queue: str,
            priority: int, execution_id: str | None, db: str,
            registry: Mapping[str, Callable[..., Any]]) -> Submitted:
    """Submit through the full store and the Runner: (execution id, created, status, why
    a run cancel_new stored cancelled was dropped)."""
    from tether.runtime.runner import Runner
    from tether.trigger import TriggerKind, local_trigger

    store = open_store(db, create=True)
    runner = Runner(source, store, registry)
    assert runner.plan is not None
    inputs = read_inputs(runner.plan, pairs, inputs_file)
    done = runner.submit_run(inputs, dedup_key=execution_id, queue=queue,
                             priority=priority, trigger=local_trigger(TriggerKind.CLI))
    dropped = store.get_run(done.execution_id) if done.created and \
        done.status == "cancelled" else None
    reason = None
    if dropped is not None:
        error = dropped.error if isinstance(dropped.error, dict) else {}
        reason = str(error.get("message") or "cancelled by its concurrency key")
    return done.execution_id, done.created, done.status.value, reason


def _submit_on_sqlite(source: str, pairs: tuple[str, ...], inputs_file: str | None,
                      queue: str, priority: int, execution_id: str | None,
                      db: str) -> Submitted | None:
    """Submit to a current SQLite file with ``sqlite3`` (no SQLAlchemy, no runtime; see
    ``stores/sqlite_submit.py``); None when the full store must do it. Writes the rows
    :func:`_submit` writes, and raises the errors it raises."""
    from tether.stores.sqlite_submit import insert_queued, open_current

    if "opentelemetry.trace" in sys.modules:
        return None  # the Runner stores the submitter's span when one is active
    connection = open_current(db)
    if connection is None:
        return None
    try:
        from tether.runtime.submission import queued_run
        from tether.trigger import TriggerKind, local_trigger

        if Path(source).suffix.lower() == ".json":
            return None  # a plan file: read (and validated) by the Runner
        from tether.compiler import compile as compile_workflow

        plan: Plan = compile_workflow(Path(source))
        if plan.concurrency is not None:
            return None  # a concurrency key decides under the key's lock: the full store
        inputs = read_inputs(plan, pairs, inputs_file)
        run = queued_run(plan, inputs, execution_id=None, queue=queue, priority=priority,
                         dedup_key=execution_id, trigger=local_trigger(TriggerKind.CLI))
        done = insert_queued(connection, run, plan.to_json(),
                             deduplicate=execution_id is not None)
    finally:
        connection.close()
    # (no concurrency key here, so never a run cancel_new dropped)
    return None if done is None else (done.execution_id, done.created, done.status, None)


@click.command()
@run_tasks_option
@click.option("--concurrency", type=click.IntRange(1, 1000), default=4, show_default=True,
              help="Runs executed at once.")
@click.option("--queue", "queues", multiple=True, metavar="NAME",
              help="A queue to serve (repeatable; default: default).")
@click.option("--lease", type=click.FloatRange(0, 86400, min_open=True), default=None,
              help="Lease seconds of each claimed run (default: $TETHER_LEASE_SECONDS, "
              "else 30): how long a crashed worker holds its runs.")
@click.option("--poll", type=click.FloatRange(0.01, 60), default=None,
              help="Seconds between looks for work without a wake-up (default 1 on "
              "PostgreSQL, 0.2 on SQLite).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve Prometheus metrics at http://HOST:PORT/metrics.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="The address --metrics-port binds.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one JSON object per log line, with the trace "
              "and span ids of what it is about.")
@click.option("--workflows", "workflows", multiple=True, metavar="PATH",
              help="A workflow file, plan or directory of workflows (repeatable) whose "
              "schedules (`schedule:`, `on: schedule`) this worker registers, or updates, "
              "when it starts, as tether deploy does.")
@click.option("--group-commit", is_flag=True,
              help="PostgreSQL: the slots' checkpoint writes that overlap go in one "
              "statement and one commit, one statement of this worker at a time: less "
              "database CPU per step, fewer steps/s per worker (docs/workers.md, "
              "\"Checkpoint commits\").")
@click.option("--cpu", type=click.IntRange(0), default=None, metavar="N",
              help="Linux: run this worker's threads on CPU N only. Its Python runs on one "
              "core at a time anyway; kept on one, its slots hand the interpreter lock "
              "over without crossing cores (docs/workers.md, \"One CPU per worker\").")
@db_option
def worker(tasks: tuple[str, ...], concurrency: int, queues: tuple[str, ...],
           lease: float | None, poll: float | None, metrics_port: int | None,
           metrics_host: str, log_format: str, workflows: tuple[str, ...],
           group_commit: bool, cpu: int | None, db: str) -> None:
    """Execute queued, crashed and answered runs until SIGTERM or SIGINT (then exit 0).

    Imports the task modules (--tasks, else [tool.tether] tasks in the nearest
    pyproject.toml). With --workflows, first puts the schedules of those files into effect
    (registered once however many workers start with them; a changed schedule is updated).
    """
    from tether.workers import LEASE_ENV, Worker

    if cpu is not None:
        _keep_to_cpu(cpu)
    plans = _workflow_plans(workflows)
    registry = load_tasks_or_exit(tasks, from_pyproject=not tasks)
    from tether.observability.logs import configure_logging

    configure_logging(log_format)
    if lease is not None:  # the stores' session timeouts derive from it (pg_sessions.py)
        os.environ[LEASE_ENV] = repr(lease)
    store = open_store(db, create=bool(plans))  # (a deploy's first worker may create it)
    _declare_schedules(store, plans, (queues or ("default",))[0])
    fleet = Worker(store, registry if registry is not None else {}, queues or ("default",),
                   concurrency, lease_seconds=lease, poll_seconds=poll,
                   connect=lambda: open_store(db), group_commit=group_commit)
    if metrics_port is not None:
        _serve_metrics(fleet, metrics_port, metrics_host, db, lease)

    def stop(signum: int, _frame: object) -> None:
        click.echo(f"worker: {signal.Signals(signum).name}: stopping (runs in flight stop at "
                   "their next node boundary)", err=True)
        fleet.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    click.echo(f"worker {printable(fleet.worker_id.partition('@')[0][:12])} serving "
               f"{', '.join(printable(q) for q in fleet.queues)} (concurrency {concurrency})",
               err=True)
    try:
        fleet.run_forever()
    finally:
        store.close()
    click.echo("worker: stopped", err=True)


def _keep_to_cpu(cpu: int) -> None:
    """Confine every thread of this process, and those it starts later, to CPU ``cpu``
    (``--cpu``; exit 2 when this process may not run there, or off Linux)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not allowed:
        raise click.BadParameter("confining a process to a CPU is not supported here",
                                 param_hint="--cpu")
    if cpu not in allowed:
        raise click.BadParameter(f"this process may run on CPU(s) "
                                 f"{', '.join(map(str, allowed))}, not {cpu}",
                                 param_hint="--cpu")
    for task in os.listdir("/proc/self/task"):  # threads started already (the kernel's
        with contextlib.suppress(ProcessLookupError):  # mask is per thread; new ones
            os.sched_setaffinity(int(task), {cpu})    # inherit it); one may have ended


def _workflow_plans(paths: tuple[str, ...]) -> list[Plan]:
    """The plans of ``--workflows`` (a file that cannot be used: exit 2, naming it)."""
    from tether.errors import UsageError
    from tether.runtime.plans import load_plans

    try:
        return [plan for _, plan in load_plans(paths)]
    except UsageError as exc:
        raise click.BadParameter(printable(exc), param_hint="--workflows") from None


def _declare_schedules(store: Checkpointer, plans: list[Plan], queue: str) -> None:
    """Register or update the schedule of each plan that has one (new ones on ``queue``)."""
    from tether.cli.schedules import schedule_line
    from tether.workers.schedules import declare_schedule

    for plan in plans:
        if plan.schedule is not None:
            declared = declare_schedule(store, plan, new_queue=queue)
            click.echo("worker: " + schedule_line(plan, declared.change, declared.schedule),
                       err=True)


def _serve_metrics(fleet: object, port: int, host: str, db: str, lease: float | None) -> None:
    """Start the worker's metrics endpoint (a clear error when the port is taken)."""
    try:
        from tether.observability import metrics
    except ImportError:
        raise click.UsageError("--metrics-port needs prometheus-client: pip install "
                               "'tether[metrics]'") from None
    from tether.workers import Worker, lease_seconds

    assert isinstance(fleet, Worker)
    try:
        served = metrics.serve(port, host, lambda: open_store(db), lease_seconds(lease))
    except OSError as exc:
        raise click.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 param_hint="--metrics-port") from None
    served.watch_slots(fleet.busy_slots)
    served.watch_write_batches(fleet.write_batch_fallbacks)
    click.echo(f"worker: metrics at http://{host}:{port}/metrics", err=True)


@click.command()
@db_option
def workers(db: str) -> None:
    """List the live workers: host, pid, queues, runs held, last heartbeat, and the
    problems of each (runs it lacks the tasks of, stuck runs of its queues)."""
    from tether.workers import lease_seconds
    from tether.workers.stuck import live_workers, stuck_runs, worker_problems

    store = open_store(db)
    now = time.time()
    lease = lease_seconds()
    live = live_workers(store, now, lease)
    stuck = stuck_runs(store, now, lease, live)
    if not live:
        click.echo("no live workers")
        if stuck:
            click.echo(f"{len(stuck)} stuck run(s): see tether runs --stuck")
        return
    click.echo(f"{'HOST':<20} {'PID':>7}  {'QUEUES':<20} {'RUNS':>5}  LAST HEARTBEAT")
    for one in live:
        queues = ",".join(one.queues)
        click.echo(f"{printable(one.host):<20} {one.pid:>7}  {printable(queues):<20} "
                   f"{one.runs_held:>2}/{one.concurrency:<2}  {now - one.heartbeat_at:.1f} s ago")
        for problem in worker_problems(one, stuck):
            click.echo(f"    problem: {printable(problem)}")


@click.command()
@execution_id_argument
@db_option
def cancel(execution_id: str, db: str) -> None:
    """Cancel a run: at once when nothing executes it (queued, paused, failed), else at its
    worker's next node boundary."""
    from tether.stores.queueing import CancelOutcome

    store = open_store(db)
    execution_id = store.resolve_execution_id(execution_id)
    outcome = store.request_cancel(execution_id, time.time())
    run_id = printable(execution_id)
    if outcome is None:
        raise RunNotFound(execution_id)
    if outcome != CancelOutcome.FINISHED:
        from tether.runtime.run_events import record_cancel

        record_cancel(store, execution_id, outcome, None, "cli")
    if outcome == CancelOutcome.CANCELLED:
        click.echo(f"cancelled run {run_id} (nothing was executing it)")
    elif outcome == CancelOutcome.REQUESTED:
        click.echo(f"cancel requested for run {run_id}: its worker stops it at the next node "
                   f"boundary (see: tether show {shell_quote(execution_id)})")
    else:
        run = store.get_run(execution_id)
        click.echo(f"run {run_id} already ended ({printable(run.status if run else '?')}); "
                   "nothing to cancel")
        raise click.exceptions.Exit(1)
