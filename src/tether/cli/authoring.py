"""The authoring and CI commands: check, compile, graph, schema, fmt, explain.

Each command parses its options, makes one library call, and formats the result. Library
modules are imported inside the commands so that ``tether --help`` stays fast.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from tether.cli.fast import CHECK_FORMATS, CheckArgs, run_check
from tether.cli.options import (
    checking_tasks,
    color_option,
    format_option,
    import_tasks_option,
    strict_option,
    tasks_option,
)
from tether.cli.terminal import use_color
from tether.errors import TetherError, WorkflowError

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.diagnostics import Diagnostic
    from tether.dsl.convert import Target

SCHEMA_ID = "urn:tether:schema:workflow:1"

ExistingFile = click.Path(exists=True, dir_okay=False, path_type=str)
OutputFile = click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=str)

output_option = click.option(
    "-o", "--output", type=OutputFile, metavar="FILE",
    help="Write to FILE instead of standard output.",
)


def register(group: click.Group) -> None:
    """Add the authoring commands to ``group``."""
    for command in (check, compile_command, graph, schema, fmt, explain):
        group.add_command(command)


# --------------------------------------------------------------------------- helpers


def write_output(output: str | None, text: str) -> None:
    """Write ``text`` to the file ``output``, or to stdout when it is None or ``-``."""
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8", newline="")
    except OSError as exc:
        raise TetherError(f"cannot write {output}: {exc.strerror or exc}") from exc


def replace_file(path: str, text: str) -> None:
    """Rewrite ``path`` atomically (a temporary file beside it, then a rename)."""
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise TetherError(f"cannot write {path}: {exc.strerror or exc}") from exc


def report_diagnostics(diags: list[Diagnostic], color: str) -> None:
    """Print diagnostics as text, then a summary line, on stderr."""
    from tether.diagnostics.render import render_text, summary

    colored = use_color(color, sys.stderr)
    # click.echo strips ANSI codes from output that is not a terminal unless told otherwise
    click.echo(render_text(diags, color=colored), err=True, nl=False, color=colored)
    click.echo(f"\n{summary(diags)}", err=True)


def compile_or_exit(
    file: str, color: str, tasks: Mapping[str, Callable[..., Any]] | None = None
) -> Plan:
    """Compile ``file``; print warnings on stderr; on errors print them and exit 1."""
    from tether.compiler.compile import compile_with_warnings

    try:
        plan, warnings = compile_with_warnings(file, tasks=tasks)
    except WorkflowError as exc:
        report_diagnostics(exc.diagnostics, color)
        raise click.exceptions.Exit(1) from exc
    if warnings:
        report_diagnostics(warnings, color)
    return plan


def read_plan(file: str) -> Plan:
    """A plan JSON file written by ``tether compile`` (its fingerprint is checked)."""
    from tether.compiler.plan import Plan

    try:
        data = Path(file).read_bytes()
    except OSError as exc:
        raise TetherError(f"cannot read {file}: {exc.strerror or exc}") from exc
    return Plan.from_json(data)


# --------------------------------------------------------------------------- check


@click.command()
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=str))
@format_option(*CHECK_FORMATS)
@strict_option
@tasks_option
@import_tasks_option
@color_option
@click.option(
    "--skip-non-workflows", is_flag=True,
    help="Skip files named on the command line that are not workflows (YAML files whose "
    "first key is not `tether:`) instead of reporting them. For pre-commit.",
)
def check(paths: tuple[str, ...], output_format: str, strict: bool, tasks: tuple[str, ...],
          import_tasks: bool, color: str, skip_non_workflows: bool) -> None:
    """Check workflow files without running them (for CI).

    PATHS are files or directories; in a directory, *.flow files and YAML files whose first
    key is `tether:` are checked. Exit 0 when clean (warnings allowed), 1 when errors are
    found (or warnings, with --strict). No user code is imported unless --tasks or
    --import-tasks asks for it.
    """
    args = CheckArgs(paths=paths, output_format=output_format, strict=strict, color=color,
                     skip_non_workflows=skip_non_workflows)
    raise click.exceptions.Exit(run_check(args, lambda: checking_tasks(tasks, import_tasks)))


# --------------------------------------------------------------------------- compile, graph


@click.command("compile")
@click.argument("file", type=ExistingFile)
@output_option
@tasks_option
@import_tasks_option
@color_option
def compile_command(file: str, output: str | None, tasks: tuple[str, ...], import_tasks: bool,
                    color: str) -> None:
    """Compile a workflow file to its plan (JSON).

    On errors, the diagnostics are printed on stderr and the exit code is 1. No user code is
    imported unless --tasks or --import-tasks asks for it.
    """
    registry = checking_tasks(tasks, import_tasks)
    plan = compile_or_exit(file, color, registry)
    write_output(output, plan.to_json())


@click.command()
@click.argument("file", type=ExistingFile)
@format_option("mermaid", "dot", help="Drawing language.")
@output_option
@color_option
def graph(file: str, output_format: str, output: str | None, color: str) -> None:
    """Draw a workflow's graph as Mermaid or Graphviz DOT.

    FILE is a workflow file, or a plan written by `tether compile` (a .json file). Approvals
    are hexagons, sub-workflows double-framed boxes; loops are dashed back-edges labelled
    with their condition and bound.
    """
    from tether.compiler.graph_render import to_dot, to_mermaid

    plan = read_plan(file) if file.lower().endswith(".json") else compile_or_exit(file, color)
    draw = to_dot if output_format.lower() == "dot" else to_mermaid
    write_output(output, draw(plan))


# --------------------------------------------------------------------------- schema


def workflow_schema() -> dict[str, Any]:
    """The JSON Schema of workflow files (YAML), with an ``$id`` and a title for editors."""
    from tether.dsl.document import WorkflowDoc

    schema = WorkflowDoc.model_json_schema(by_alias=True)
    schema["$id"] = SCHEMA_ID
    schema.setdefault("title", "tether workflow")
    return schema


@click.command()
@output_option
def schema(output: str | None) -> None:
    """Print the JSON Schema of workflow files, for editors.

    For example, with the YAML language server, put
    `# yaml-language-server: $schema=tether.schema.json` at the top of a workflow.
    """
    text = json.dumps(workflow_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_output(output, text)


# --------------------------------------------------------------------------- fmt


def _check_fmt_options(file: str, to: str | None, output: str | None, write: bool,
                       check_only: bool) -> None:
    from tether.dsl.loader import syntax_of

    if output is not None and write:
        raise click.UsageError("-o/--output and --write cannot be used together")
    if check_only and (to is not None or output is not None or write):
        raise click.UsageError("--check cannot be combined with --to, -o/--output or --write")
    if write and to is not None and to != syntax_of(file):
        raise click.UsageError(
            f"--write would put {to} text into {file}; use -o to write a new file"
        )


@click.command()
@click.argument("file", type=ExistingFile)
@click.option("--to", type=click.Choice(["yaml", "flow"]), default=None,
              help="Convert to this syntax (default: keep the file's own).")
@output_option
@click.option("--write", "-w", is_flag=True, help="Rewrite FILE in place.")
@click.option("--check", "check_only", is_flag=True,
              help="Exit 1 if FILE is not formatted; change nothing.")
@click.option("--drop-comments", is_flag=True,
              help="Let --write rewrite a file whose comments would be lost.")
@color_option
def fmt(file: str, to: str | None, output: str | None, write: bool, check_only: bool,
        drop_comments: bool, color: str) -> None:
    """Format a workflow file, or convert it between YAML and .flow.

    Comments are not preserved: --write refuses a file that has some unless
    --drop-comments is given; other modes say how many were dropped.
    """
    _check_fmt_options(file, to, output, write, check_only)
    from tether.dsl.convert import count_comments, format_file
    from tether.dsl.loader import syntax_of

    try:
        text = format_file(file, to=cast("Target | None", to))
    except WorkflowError as exc:
        report_diagnostics(exc.diagnostics, color)
        raise click.exceptions.Exit(1) from exc
    source = Path(file).read_bytes()
    unchanged = source == text.encode("utf-8")
    comments = count_comments(source.decode("utf-8", "replace"), syntax_of(file) or "yaml")
    if comments and write and not drop_comments:
        raise TetherError(f"formatting would drop {comments} comment{'s' * (comments != 1)} "
                          f"from {file} (comments are not preserved); pass --drop-comments "
                          "to rewrite it anyway, or write elsewhere with -o")
    if comments and not check_only:
        click.echo(f"note: {comments} comment{'s' * (comments != 1)} of {file} dropped "
                   "(comments are not preserved)", err=True)
    if check_only:
        if not unchanged:
            click.echo(f"would reformat {file}", err=True)
        raise click.exceptions.Exit(0 if unchanged else 1)
    if write:
        if not unchanged:
            replace_file(file, text)
            click.echo(f"reformatted {file}", err=True)
        return
    write_output(output, text)


# --------------------------------------------------------------------------- explain


def _unknown_code(code: str) -> click.UsageError:
    from tether.diagnostics.codes import CODES

    names = [*CODES, *(c.slug for c in CODES.values())]
    wanted = code.strip()
    close = difflib.get_close_matches(wanted.upper(), list(CODES), n=1, cutoff=0.6)
    close = close or difflib.get_close_matches(wanted.lower(), names, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return click.UsageError(
        f"unknown diagnostic code '{code}'{hint} (`tether explain --list` lists them)"
    )


@click.command()
@click.argument("code", required=False)
@click.option("--list", "list_codes", is_flag=True, help="List every code with its title.")
def explain(code: str | None, list_codes: bool) -> None:
    """Explain a diagnostic code (E302, e302 or its name, cycle)."""
    from tether.diagnostics.codes import CODES, lookup

    if list_codes == (code is not None):
        raise click.UsageError("give either a CODE or --list")
    if code is None:
        width = max(len(c.slug) for c in CODES.values())
        for known in CODES.values():
            click.echo(f"{known.code}  {known.slug:<{width}}  {known.title}")
        return
    found = lookup(code)
    if found is None:
        raise _unknown_code(code)
    click.echo(f"{found.code} ({found.slug}): {found.title}\n\n{found.explanation}")
