"""``tether check`` without click: the hot command's common forms, parsed by hand.

A pre-commit hook or an editor runs ``tether check FILE`` many times; importing click costs
it a sixth of its start-up (docs/performance.md, "Start-up of the command"). :func:`run_fast`
reads the forms of ``check`` that need nothing click does beyond splitting the words: paths
that exist and the options ``--format``, ``--strict``, ``--color`` and
``--skip-non-workflows``. Every other form (``--help``, ``--tasks``, a missing path, an
unknown option or value, an abbreviation) returns None, and the click command handles it,
with its usage errors. Both run :func:`run_check`, so the output and the exit code are the
same whichever way a command line goes.

Nothing here imports click; :func:`echo` writes as ``click.echo`` does for the text ``check``
prints (no bytes, no colour to strip: colour is only ever added when it is wanted).
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.terminal import COLOR_CHOICES, use_color
from tether.errors import TetherError
from tether.gc_pause import paused_gc

if TYPE_CHECKING:
    from tether.diagnostics import Diagnostic

CHECK_FORMATS = ("text", "json", "sarif", "github")


@dataclass(frozen=True)
class CheckArgs:
    """A ``tether check`` command line, read."""

    paths: tuple[str, ...]
    output_format: str = "text"
    strict: bool = False
    color: str = "auto"
    skip_non_workflows: bool = False


def echo(text: str, *, nl: bool = True, err: bool = False) -> None:
    """Write ``text`` (and a newline) to stdout, or stderr, and flush it."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n" if nl else text)
    stream.flush()


def _choice(value: str, choices: tuple[str, ...]) -> str | None:
    """``value`` as click's case-insensitive ``Choice`` reads it, or None when not one."""
    lowered = value.lower()
    return next((choice for choice in choices if choice == lowered), None)


def parse_check(argv: Sequence[str]) -> CheckArgs | None:
    """The arguments after ``check``, or None when click must read them."""
    paths: list[str] = []
    values: dict[str, str] = {}
    flags: set[str] = set()
    words = list(argv)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-"):
            if not (os.path.exists(word) and os.access(word, os.R_OK)):
                return None  # click says which path is missing or unreadable
            paths.append(word)
            continue
        name, equals, value = word.partition("=")
        if name in ("--strict", "--skip-non-workflows") and not equals:
            flags.add(name)
            continue
        choices = {"--format": CHECK_FORMATS, "--color": COLOR_CHOICES}.get(name)
        if choices is None:
            return None  # --help, --tasks, --import-tasks, `--`, an unknown option
        if not equals:
            if index >= len(words):
                return None
            value = words[index]
            index += 1
        chosen = _choice(value, choices)
        if chosen is None:
            return None
        values[name] = chosen
    if not paths:
        return None
    return CheckArgs(paths=tuple(paths), output_format=values.get("--format", "text"),
                     strict="--strict" in flags, color=values.get("--color", "auto"),
                     skip_non_workflows="--skip-non-workflows" in flags)


def run_fast(argv: Sequence[str]) -> int | None:
    """Run ``argv`` when it is a common form of a hot command; its exit code, else None."""
    if not argv or argv[0] != "check":
        return None
    args = parse_check(argv[1:])
    if args is None:
        return None
    with pydantic_plugins_off():
        return run_check(args, lambda: None)


PLUGINS_SWITCH = "PYDANTIC_DISABLE_PLUGINS"
PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    return ()


@contextlib.contextmanager
def pydantic_plugins_off() -> Iterator[None]:
    """No pydantic plugin observes the check (docs/decisions.md, "The fast check without
    pydantic's plugins"): the fast path validates only tether's own document models (it
    imports no task module, no user code).

    ``PYDANTIC_DISABLE_PLUGINS=__all__`` is pydantic's own switch: each validator it makes
    while the switch is on gets no plugin. Its plugin loader, imported for the first
    validator whatever the switch says, imports ``importlib.metadata`` (a twentieth of the
    check's start-up); while the check runs, a loader that gives no plugins (what pydantic's
    gives with the switch on) stands in its place, when pydantic has not loaded its own yet.
    A switch the user set is kept, and the loader is pydantic's again afterwards."""
    if PLUGINS_SWITCH in os.environ:
        yield
        return
    os.environ[PLUGINS_SWITCH] = "__all__"
    stand_in = None
    if PLUGIN_LOADER not in sys.modules:
        stand_in = types.ModuleType(PLUGIN_LOADER, "No pydantic plugins (tether.cli.fast).")
        setattr(stand_in, "get_plugins", _no_plugins)  # noqa: B010 (a module's attribute)
        sys.modules[PLUGIN_LOADER] = stand_in
    try:
        yield
    finally:
        os.environ.pop(PLUGINS_SWITCH, None)
        if stand_in is not None and sys.modules.get(PLUGIN_LOADER) is stand_in:
            del sys.modules[PLUGIN_LOADER]


# --------------------------------------------------------------------------- check itself


def is_workflow_file(path: Path) -> bool:
    """A ``.flow`` file, or a YAML file whose first key is ``tether:``."""
    from tether.compiler.compile import starts_with_tether_key
    from tether.dsl.loader import syntax_of

    syntax = syntax_of(path)
    return syntax == "flow" or (syntax == "yaml" and starts_with_tether_key(path))


def files_to_check(paths: tuple[str, ...], skip_non_workflows: bool) -> list[Path] | None:
    """The workflow files named by ``paths``; None when only non-workflow files were given
    with ``skip_non_workflows`` (nothing to do). Raises when there are none."""
    from tether.compiler import discover

    files = discover(paths)
    if skip_non_workflows:
        files = [f for f in files if is_workflow_file(f)]
        if not files and all(Path(p).is_file() for p in paths):
            return None
    if not files:
        raise TetherError(f"no workflow files found in {', '.join(paths)}")
    return files


def emit_check_result(diags: list[Diagnostic], files: int, output_format: str,
                      color: str) -> None:
    """Print the result of a check in ``output_format``."""
    from tether.diagnostics import render

    if output_format == "json":
        echo(render.render_json(diags, files), nl=False)
    elif output_format == "sarif":
        echo(render.render_sarif(diags), nl=False)
    elif output_format == "github":
        echo(render.render_github(diags), nl=False)
        echo(render.summary(diags, files), err=True)
    elif diags:
        echo(render.render_text(diags, color=use_color(color)), nl=False)
        echo(f"\n{render.summary(diags, files)}")
    else:
        echo(render.summary(diags, files), err=True)


def run_check(args: CheckArgs, tasks: Callable[[], Mapping[str, Callable[..., Any]] | None],
              ) -> int:
    """Check the files ``args`` names against the registry ``tasks()`` gives (called once
    the files are found), print the result; the exit code: 0 clean (warnings allowed), 1
    errors (or warnings, with ``strict``)."""
    with paused_gc():  # importing allocates only what stays alive: nothing for it to find
        from tether.compiler import check as check_files
        from tether.diagnostics import render  # noqa: F401  (imported here, used below)

    files = files_to_check(args.paths, args.skip_non_workflows)
    if files is None:
        return 0
    diags = check_files(files, tasks=tasks())
    emit_check_result(diags, len(files), args.output_format.lower(), args.color)
    failed = any(d.is_error for d in diags) or (args.strict and bool(diags))
    return 1 if failed else 0
