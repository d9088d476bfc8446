"""``tether compat`` and ``tether upgrade``: a new version of a workflow against its live runs.

Thin: parse options, one library call (:mod:`tether.runtime.compat`), format the report.
Diagnostics carry C1xx codes and carets into the NEW file. Exit 0 when every live run can
move, 1 when some cannot (they stay pinned), 2 on usage errors.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from tether.cli.options import color_option, db_option, format_option, open_store
from tether.cli.terminal import use_color

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.diagnostics import Diagnostic
    from tether.runtime.compat import Report

_SHOWN = 5  # run ids listed per finding
_STATUSES = ("queued", "running", "paused", "failed")


def register(group: click.Group) -> None:
    """Add ``compat`` and ``upgrade`` to ``group``."""
    group.add_command(compat)
    group.add_command(upgrade)


def _options(command: Any) -> Any:
    for option in reversed((
        click.argument("new_file", metavar="NEW_FILE",
                       type=click.Path(exists=True, dir_okay=False)),
        db_option,
        click.option("--status", "statuses", multiple=True, type=click.Choice(_STATUSES),
                     help="Only runs with this status (repeatable; default: all four)."),
        format_option("text", "json", "sarif", "github"),
        click.option("--json", "as_json", is_flag=True, help="Same as --format json."),
        color_option,
    )):
        command = option(command)
    return command


@click.command()
@_options
def compat(new_file: str, db: str, statuses: tuple[str, ...], output_format: str,
           as_json: bool, color: str) -> None:
    """Say which live runs of NEW_FILE's workflow can move to its plan, and why not.

    Live runs are those queued, running, paused or failed. Each change a run cannot follow is
    a C1xx diagnostic at its place in NEW_FILE, with the runs it pins. Exit 0 when every live
    run can move, 1 when some cannot.
    """
    from tether.runtime.compat import check

    plan, store = _load(new_file, db)
    report = check(store, plan, statuses=statuses or _STATUSES)
    _emit(report, plan, new_file, "json" if as_json else output_format.lower(), color)
    raise click.exceptions.Exit(1 if report.pinned else 0)


@click.command()
@_options
@click.option("--run", "runs", multiple=True, metavar="ID",
              help="Only this run (an id or a unique prefix of 8+ characters); repeatable.")
@click.option("--dry-run", is_flag=True, help="Move nothing; print what `compat` prints.")
def upgrade(new_file: str, db: str, statuses: tuple[str, ...], output_format: str,
            as_json: bool, color: str, runs: tuple[str, ...], dry_run: bool) -> None:
    """Move every live run of NEW_FILE's workflow that can follow its plan onto it.

    Each run moves atomically, only while no worker holds it (a held run is listed and
    left for a later `upgrade`); runs that cannot move stay pinned to their plan and are
    listed. Exit 0 when no run stays pinned, 1 otherwise.
    """
    from tether.runtime.compat import check
    from tether.runtime.compat import upgrade as move

    plan, store = _load(new_file, db)
    act = check if dry_run else move
    report = act(store, plan, statuses=statuses or _STATUSES, runs=runs or None)
    _emit(report, plan, new_file, "json" if as_json else output_format.lower(), color)
    raise click.exceptions.Exit(1 if report.pinned else 0)


def _load(new_file: str, db: str) -> tuple[Plan, Any]:
    import tether

    return tether.compile(new_file), open_store(db)


def _diagnostics(report: Report, new_file: str) -> list[Diagnostic]:
    from tether.diagnostics import make
    from tether.dsl.loader import load

    workflow = load(new_file)  # compiled already: its spans give the carets
    found = []
    for blocked in report.blocked:
        finding = blocked.finding
        if finding.node_id is not None:
            span = workflow.key_span("nodes", finding.node_id)
        elif finding.input_name is not None:
            span = workflow.key_span("inputs", finding.input_name)
        else:
            span = workflow.key_span("nodes")
        count = len(blocked.runs)
        shown = ", ".join(blocked.runs[:_SHOWN]) + (", ..." if count > _SHOWN else "")
        runs = f"{count} runs stay" if count != 1 else "1 run stays"
        found.append(make(finding.code, f"{finding.message} ({runs} pinned: {shown})", span,
                          help=finding.help, node_id=finding.node_id))
    return found


def _summary(report: Report) -> str:
    total = len(report.movable) + len(report.moved) + len(report.held) + \
        len(report.pinned) + len(report.current)
    parts = [f"{total} live run{'s' * (total != 1)} of `{report.workflow}`"]
    if report.moved:
        parts.append(f"{len(report.moved)} moved to the new plan")
    if report.movable:
        parts.append(f"{len(report.movable)} can move")
    if report.held:
        parts.append(f"{len(report.held)} held by a worker now (will be retried by the next "
                     "`tether upgrade`)")
    pinned = len(report.pinned)
    parts.append(f"{pinned} {'stays' if pinned == 1 else 'stay'} pinned")
    if report.current:
        parts.append(f"{len(report.current)} already on it")
    return ": ".join(parts[:1]) + ": " + ", ".join(parts[1:])


def _emit(report: Report, plan: Plan, new_file: str, output_format: str, color: str) -> None:
    from tether.diagnostics import render

    diags = _diagnostics(report, new_file)
    if output_format == "json":
        document: dict[str, Any] = json.loads(render.render_json(diags, 1))
        document["compat"] = {
            "workflow": report.workflow, "fingerprint": report.fingerprint,
            "movable": report.movable, "moved": report.moved, "held": report.held,
            "current": report.current,
            "pinned": {run: [f.code for f in found] for run, found in report.pinned.items()},
            "notes": report.notes}
        click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
        return
    if output_format in ("sarif", "github"):
        write = render.render_sarif if output_format == "sarif" else render.render_github
        click.echo(write(diags), nl=False)
        click.echo(_summary(report), err=True)
        return
    colored = use_color(color)
    if diags:
        click.echo(render.render_text(diags, color=colored), nl=False, color=colored)
        click.echo()
    for note in report.notes:
        click.echo(f"info: {note}")
    for run_id in report.held:
        click.echo(f"info: run {run_id} is held by a worker now: will be retried")
    click.echo(_summary(report))
