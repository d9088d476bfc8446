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

The group (:mod:`tether.cli.group`) loads its command modules lazily (``LazyGroup``): ``tether
check`` imports the authoring commands only, not the store, the runtime or the web console.
Before it, the common forms of ``tether check`` run without click at all
(:mod:`tether.cli.fast`); this module imports neither click nor the group until a command
line needs them (docs/performance.md, "Start-up of the command").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from tether.gc_pause import paused_gc

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


def __getattr__(name: str) -> Any:
    """The click group and its helpers, still importable from here (they live in
    :mod:`tether.cli.group`, imported on first use)."""
    if name in _GROUP_NAMES:
        from tether.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_GROUP_NAMES = frozenset({"cli", "LazyGroup", "register_commands", "handle_error",
                          "exit_code_of", "CONTEXT_SETTINGS"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tether`` command line; return its exit code (see the module docstring)."""
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        _trace_setup(words)
        with paused_gc():  # (see tether.gc_pause: imports leave no cyclic garbage)
            from tether.cli.fast import run_fast
        result = run_fast(words)
        if result is None:
            with paused_gc():
                from tether.cli.group import cli
            result = cli.main(args=list(argv) if argv is not None else None,
                              prog_name="tether", standalone_mode=False)
        sys.stdout.flush()
    except BaseException as exc:  # the one place every failure becomes an exit code
        from tether.cli.group import handle_error

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
