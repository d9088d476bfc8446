"""The click group of the ``tether`` command and the mapping of failures to exit codes.

:mod:`tether.cli.main` holds the command table and the entry point; it imports this module
(and click) only for a command line that the click-free fast path
(:mod:`tether.cli.fast`) does not run, or to report an error.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import click

from tether.cli.main import (
    COMMAND_MODULES,
    COMMANDS,
    EXIT_CONFLICT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
)
from tether.cli.terminal import printable
from tether.errors import ConcurrencyLimitReached, TetherError, UsageError, WorkflowError
from tether.gc_pause import paused_gc

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
            with paused_gc():  # importing leaves no cyclic garbage for the collector to find
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
