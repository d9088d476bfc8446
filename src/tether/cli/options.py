"""Options shared by several commands, each defined once, and the helpers behind them.

A command takes an option by decorating itself with it::

    @click.command()
    @tasks_option
    @color_option
    def check(tasks: tuple[str, ...], color: str) -> None: ...

Everything here is cheap to import: the compiler and the runtime are imported inside the
helpers, so ``tether --help`` does not pay for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tether.cli.terminal import COLOR_CHOICES, printable
from tether.errors import StoreURLError, TaskError, TetherError

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DB = "sqlite:///.tether/tether.db"


def format_option(*choices: str, default: str | None = None,
                  help: str = "Output format.") -> Callable[[F], F]:
    """``--format`` with the given choices (the first one is the default)."""
    return click.option(
        "--format", "output_format", type=click.Choice(choices, case_sensitive=False),
        default=default or choices[0], show_default=True, help=help,
    )


strict_option = click.option(
    "--strict", is_flag=True, help="Fail on warnings too (exit 1 when any is found)."
)

tasks_option = click.option(
    "--tasks", "tasks", multiple=True, metavar="MODULE",
    help="Import task modules (dotted names or .py paths) to check task names and "
    "arguments; repeatable. Without --tasks or --import-tasks no user code is imported.",
)

import_tasks_option = click.option(
    "--import-tasks", is_flag=True,
    help="Also import the modules listed in [tool.tether] tasks of the nearest "
    "pyproject.toml (this runs their code).",
)

run_tasks_option = click.option(
    "--tasks", "tasks", multiple=True, metavar="MODULE",
    help="Import task modules (dotted names or .py paths); repeatable. Default: "
    "[tool.tether] tasks in the nearest pyproject.toml. Running user code is this command's "
    "job: it imports them even without this option.",
)

color_option = click.option(
    "--color", type=click.Choice(COLOR_CHOICES, case_sensitive=False), default="auto",
    show_default=True, help="Colour the text output (auto: when writing to a terminal).",
)

db_option = click.option(
    "--db", "db", envvar="TETHER_DB", default=DEFAULT_DB, show_default=True, metavar="URL",
    help="The checkpoint store (sqlite:///path or postgresql://...); env TETHER_DB.",
)


def open_store(url: str, *, create: bool = False) -> Checkpointer:
    """The store ``--db`` names. Only ``run`` passes ``create=True``: every other command
    needs an existing database, and a missing one is an error naming it (nothing is made).
    A URL that cannot be used is a usage error (exit 2) naming the part at fault."""
    from tether.stores.open import open_checkpointer

    try:
        return open_checkpointer(url, create=create)
    except StoreURLError as exc:
        raise click.BadParameter(printable(exc), param_hint="--db") from None


def check_id_option(what: str, *, new: bool = False) -> Callable[
        [click.Context, click.Parameter, str | None], str | None]:
    """A click callback refusing an id that no run can have (``check_id``), or with ``new``
    one that a new run may not have (``check_execution_id``: the documented character set)."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        from tether.runtime.ids import check_execution_id, check_id

        if value is not None:
            try:
                (check_execution_id if new else check_id)(value, what)
            except TetherError as exc:
                raise click.BadParameter(printable(exc)) from None
        return value

    return callback



# --------------------------------------------------------------------------- task modules


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (the working directory) or above it."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def configured_tasks(pyproject: Path) -> list[str]:
    """``[tool.tether] tasks`` of a pyproject file (empty when absent)."""
    import tomllib

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TetherError(f"cannot read {pyproject}: {exc}") from exc
    tasks = data.get("tool", {}).get("tether", {}).get("tasks", [])
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise TetherError(f"{pyproject}: [tool.tether] tasks must be a list of strings")
    return tasks


def load_tasks(modules: tuple[str, ...] | list[str], *, from_pyproject: bool = False,
               ) -> Mapping[str, Callable[..., Any]] | None:
    """Import the task modules given and, with ``from_pyproject``, those listed in the
    nearest ``pyproject.toml``; None when there are none.

    Modules from ``--tasks`` are relative to the working directory; modules from
    ``pyproject.toml`` are relative to the directory that holds it. Raises
    :class:`~tether.errors.TaskError` (diagnostic E603) when a module fails to import.
    """
    from tether.runtime.registry import REGISTRY, import_tasks

    configured: list[str] = []
    pyproject = find_pyproject() if from_pyproject else None
    if pyproject is not None:
        configured = configured_tasks(pyproject)
    if not modules and not configured:
        return None
    if configured and pyproject is not None:
        import_tasks(configured, pyproject.parent)
    if modules:
        import_tasks(list(modules), None)
    return REGISTRY


def load_tasks_or_exit(modules: tuple[str, ...] | list[str], *, from_pyproject: bool = False,
                       ) -> Mapping[str, Callable[..., Any]] | None:
    """:func:`load_tasks`; an import failure prints ``error[E603]: ...`` and exits 1."""
    try:
        return load_tasks(modules, from_pyproject=from_pyproject)
    except TaskError as exc:
        click.echo(f"error[E603]: {printable(exc)}", err=True)
        raise click.exceptions.Exit(1) from exc


def checking_tasks(modules: tuple[str, ...], import_tasks: bool,
                   ) -> Mapping[str, Callable[..., Any]] | None:
    """The task registry ``check`` and ``compile`` check against: only the modules they were
    told to import (``--tasks``, and ``--import-tasks`` for the pyproject's list)."""
    if import_tasks:
        pyproject = find_pyproject()
        if pyproject is None or not configured_tasks(pyproject):
            where = f"{pyproject} has" if pyproject else "no pyproject.toml found, so there is"
            raise click.UsageError(f"--import-tasks: {where} no [tool.tether] tasks "
                                   "to import")
    return load_tasks_or_exit(modules, from_pyproject=import_tasks)
