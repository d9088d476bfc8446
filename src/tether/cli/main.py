"""The ``tether`` command: the click group, command registration, and error mapping.

:func:`main` is the console entry point. It runs the group in non-standalone mode and maps
every way out to one exit code, so that a user never sees a traceback unless they ask for one
with ``TETHER_DEBUG=1``:

==========================================  =====  ==========================================
what happened                               exit   shown on stderr
==========================================  =====  ==========================================
command succeeded                           0
command reported problems (``ctx.exit``)    1      (the command's own output)
:class:`~tether.errors.WorkflowError`       1      the diagnostics, rendered as text
:class:`~tether.errors.UsageError` family   2      ``error: <message>`` (bad id, patch, URL)
``ConcurrencyLimitReached`` (a run state)   6      ``error: <message>`` (its concurrency
                                                   key is at its limit: ``reject``)
every other family of                       1      ``error: <message>`` (not found, run
:class:`~tether.errors.TetherError`                state, definition, execution, store)
click usage error (bad option, no path)     2      usage, ``Error: <message>``
any other exception                         3      ``internal error: <Type>: <message> ...``
Ctrl-C                                      130
==========================================  =====  ==========================================

Messages are data (they quote ids, values, paths): every one is printed with its control
characters escaped (``tether.cli.terminal.printable``).

The group loads its command modules lazily (:class:`LazyGroup`): ``tether check`` imports the
authoring commands only, not the store, the runtime or the web console (docs/performance.md,
"Start-up").
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import click

from tether.cli.terminal import printable
from tether.errors import ConcurrencyLimitReached, TetherError, UsageError, WorkflowError

# Modules that add commands to the group; each defines ``register(group)``.
COMMAND_MODULES: tuple[str, ...] = (
    "tether.cli.authoring",
    "tether.cli.operator",
    "tether.cli.inspect",
    "tether.cli.serve",
    "tether.cli.schedules",
    "tether.cli.fleet",
    "tether.cli.lsp",
    "tether.cli.compat",
)

COMMANDS: dict[str, str] = {
    **dict.fromkeys(("check", "compile", "graph", "schema", "fmt", "explain"),
                    "tether.cli.authoring"),
    **dict.fromkeys(("run", "resume", "fork"), "tether.cli.operator"),
    **dict.fromkeys(("runs", "show", "pending", "prune"), "tether.cli.inspect"),
    "serve": "tether.cli.serve",
    **dict.fromkeys(("schedules", "deploy"), "tether.cli.schedules"),
    **dict.fromkeys(("submit", "worker", "workers", "cancel", "queues"), "tether.cli.fleet"),
    "lsp": "tether.cli.lsp",
    **dict.fromkeys(("compat", "upgrade"), "tether.cli.compat"),
}
"""Which module registers each command: running one imports that module alone. A command
not listed here (a module added to ``COMMAND_MODULES`` only) is still found, by loading
every module."""

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_CONFLICT = 6
EXIT_INTERRUPTED = 130

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LazyGroup(click.Group):
    """A group whose commands are registered by their modules on first use.

    Importing every command module costs a command's start-up the store, the runtime and the
    web console; a module is imported when one of its commands is run (or when all are
    listed, for ``--help``).
    """

    def __init__(self, *args: Any, modules: Sequence[str] = (),
                 where: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.modules = tuple(modules)
        self.where = dict(where or {})
        self.loaded: set[str] = set()

    def load(self, module: str) -> None:
        """Import ``module`` and let it add its commands (once)."""
        if module not in self.loaded:
            self.loaded.add(module)
            register_commands(self, (module,))

    def load_all(self) -> None:
        """Import every command module."""
        for module in self.modules:
            self.load(module)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = self.where.get(cmd_name)
            if module is not None:
                self.load(module)
            if cmd_name not in self.commands:  # an unlisted command, or a mistyped one
                self.load_all()
        return self.commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_all()
        return sorted(self.commands)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS, modules=COMMAND_MODULES,
             where=COMMANDS)
@click.version_option(package_name="tether", prog_name="tether", message="%(prog)s %(version)s")
def cli() -> None:
    """tether: workflow files compiled to checked plans, run durably.

    Exit codes: 0 clean, 1 problems found (errors, or warnings with --strict), 2 usage error,
    3 internal error. Set TETHER_DEBUG=1 to see tracebacks.
    """


def register_commands(group: click.Group, modules: Sequence[str] = COMMAND_MODULES) -> None:
    """Import each command module and let it add its commands to ``group``."""
    for name in modules:
        importlib.import_module(name).register(group)



def _debug() -> bool:
    return os.environ.get("TETHER_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def _print_traceback(exc: BaseException) -> None:
    if _debug():
        traceback.print_exception(exc, file=sys.stderr)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (tests): nothing to do
        pass


def handle_error(exc: BaseException) -> int:
    """Report ``exc`` on stderr in one clean form and return the exit code for it."""
    if isinstance(exc, SystemExit):
        return _system_exit_code(exc)
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt) or (
        isinstance(exc, click.Abort) and isinstance(exc.__cause__, KeyboardInterrupt)
    ):
        return EXIT_INTERRUPTED
    if isinstance(exc, click.Abort):
        click.echo("Aborted!", err=True)
        return EXIT_PROBLEMS
    if isinstance(exc, click.ClickException):
        vars(exc)["message"] = printable(exc.message)  # it quotes what the user typed
        exc.show()
        return exc.exit_code
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return EXIT_PROBLEMS
    _print_traceback(exc)
    if isinstance(exc, WorkflowError):
        return _report_workflow_error(exc)
    if isinstance(exc, TetherError):
        click.echo(f"error: {printable(exc)}", err=True)
        return exit_code_of(exc)
    hint = "" if _debug() else " (set TETHER_DEBUG=1 for a traceback)"
    click.echo(f"internal error: {type(exc).__name__}: {printable(exc)}{hint}", err=True)
    return EXIT_INTERNAL


def exit_code_of(exc: TetherError) -> int:
    """The exit code of a library error, by its family: the one place they are chosen."""
    if isinstance(exc, ConcurrencyLimitReached):
        return EXIT_CONFLICT
    return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_PROBLEMS


def _system_exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return EXIT_OK
    if isinstance(exc.code, int):
        return exc.code
    click.echo(printable(exc.code), err=True)
    return EXIT_PROBLEMS


def _report_workflow_error(exc: WorkflowError) -> int:
    from tether.diagnostics.render import render_text, summary

    if exc.diagnostics:
        click.echo(render_text(exc.diagnostics), err=True, nl=False)
        click.echo(summary(exc.diagnostics), err=True)
    else:
        click.echo(f"error: {printable(exc)}", err=True)
    return EXIT_PROBLEMS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tether`` command line; return its exit code (see the module docstring)."""
    try:
        _trace_setup(sys.argv[1:] if argv is None else argv)
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="tether",
                          standalone_mode=False)
        sys.stdout.flush()
    except BaseException as exc:  # the one place every failure becomes an exit code
        return handle_error(exc)
    return result if isinstance(result, int) else EXIT_OK


def _trace_setup(argv: Sequence[str]) -> None:
    """Commands that execute runs set tracing up from the ``OTEL_*`` variables (only when
    one asks for an exporter: nothing is imported otherwise)."""
    if any(name.startswith("OTEL_") for name in os.environ):
        from tether.observability.setup import COMMANDS, configure_tracing

        command = next((a for a in argv if not a.startswith("-")), "")
        if command in COMMANDS:
            configure_tracing()
