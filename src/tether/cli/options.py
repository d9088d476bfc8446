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

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from tether.errors import TaskError, TetherError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DB = "sqlite:///.tether/tether.db"
COLOR_CHOICES = ("auto", "always", "never")


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
    "arguments; repeatable. Default: [tool.tether] tasks in the nearest pyproject.toml.",
)

color_option = click.option(
    "--color", type=click.Choice(COLOR_CHOICES, case_sensitive=False), default="auto",
    show_default=True, help="Colour the text output (auto: when writing to a terminal).",
)

db_option = click.option(
    "--db", "db", envvar="TETHER_DB", default=DEFAULT_DB, show_default=True, metavar="URL",
    help="The checkpoint store (sqlite:///path or postgresql+psycopg://...); env TETHER_DB.",
)


def use_color(choice: str, stream: IO[str] | None = None) -> bool:
    """Whether to colour output for ``--color choice`` written to ``stream`` (stdout).

    ``auto`` colours a terminal unless ``NO_COLOR`` is set (https://no-color.org).
    """
    choice = choice.lower()
    if choice != "auto":
        return choice == "always"
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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


def load_tasks(modules: tuple[str, ...] | list[str]) -> Mapping[str, Callable[..., Any]] | None:
    """Import the task modules given, else those of the nearest pyproject; None if neither.

    Modules from ``--tasks`` are relative to the working directory; modules from
    ``pyproject.toml`` are relative to the directory that holds it. Raises
    :class:`~tether.errors.TaskError` (diagnostic E603) when a module fails to import.
    """
    base: Path | None = None
    wanted = list(modules)
    if not wanted:
        pyproject = find_pyproject()
        if pyproject is None:
            return None
        wanted, base = configured_tasks(pyproject), pyproject.parent
    if not wanted:
        return None
    from tether.runtime.registry import REGISTRY, import_tasks

    import_tasks(wanted, base)
    return REGISTRY


def load_tasks_or_exit(
    modules: tuple[str, ...] | list[str],
) -> Mapping[str, Callable[..., Any]] | None:
    """:func:`load_tasks`; an import failure prints ``error[E603]: ...`` and exits 1."""
    try:
        return load_tasks(modules)
    except TaskError as exc:
        click.echo(f"error[E603]: {exc}", err=True)
        raise click.exceptions.Exit(1) from exc
