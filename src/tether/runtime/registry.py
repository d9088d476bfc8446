"""Registered tasks: the only Python code a workflow file can call.

``@tether.task`` (or ``@tether.task("billing.refund")``) registers a sync or async callable
under a name; a workflow's ``task:`` names it. A workflow file can never name an arbitrary
importable function: the registry is the allow-list.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from tether.errors import TaskError

F = TypeVar("F", bound=Callable[..., Any])


class TaskRegistry(Mapping[str, Callable[..., Any]]):
    """A mapping from task names to callables."""

    def __init__(self, tasks: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self._tasks: dict[str, Callable[..., Any]] = {}
        self._aliases: dict[str, Callable[..., Any]] = {}
        self._ambiguous: set[str] = set()
        for name, fn in (tasks or {}).items():
            self.register(name, fn)

    def alias(self, name: str, fn: Callable[..., Any]) -> None:
        """Also answer to ``name`` (a task's bare function name), unless two different
        functions claim it: then neither gets it, and the full names must be used."""
        if name in self._tasks or name in self._ambiguous:
            return
        current = self._aliases.get(name)
        if current is not None and not _same_definition(current, fn):
            del self._aliases[name]
            self._ambiguous.add(name)
            return
        self._aliases[name] = fn

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Register ``fn`` as ``name``; the same definition may be registered again."""
        if not callable(fn):
            raise TaskError(f"task '{name}' is not callable", task=name)
        current = self._tasks.get(name)
        if current is not None and not _same_definition(current, fn):
            raise TaskError(
                f"task '{name}' is registered twice: by {_where(current)} and by {_where(fn)}",
                task=name,
            )
        self._tasks[name] = fn

    def __getitem__(self, name: str) -> Callable[..., Any]:
        found = self._tasks.get(name)
        if found is None:
            return self._aliases[name]
        return found

    def __iter__(self) -> Iterator[str]:
        yield from self._tasks
        yield from (name for name in self._aliases if name not in self._tasks)

    def __len__(self) -> int:
        return len(self._tasks) + sum(1 for name in self._aliases if name not in self._tasks)


def _definition(fn: Callable[..., Any]) -> tuple[str, int, str]:
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return (repr(target), 0, "")
    return (code.co_filename, code.co_firstlineno, getattr(target, "__qualname__", ""))


def _same_definition(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    return a is b or _definition(a) == _definition(b)


def _where(fn: Callable[..., Any]) -> str:
    file, line, qualname = _definition(fn)
    return f"{qualname} ({file}:{line})"


REGISTRY = TaskRegistry()


def default_name(fn: Callable[..., Any]) -> str:
    """The name a task gets without an explicit one: ``module.qualname``."""
    return f"{fn.__module__}.{fn.__qualname__}"


def _register_default(fn: Callable[..., Any]) -> None:
    """``@task`` without a name: ``module.qualname``, and the bare function name as an alias
    (so ``task: lookup`` finds ``def lookup``) while no other task claims it."""
    REGISTRY.register(default_name(fn), fn)
    REGISTRY.alias(fn.__qualname__, fn)


@overload
def task(name_or_fn: F, /) -> F: ...
@overload
def task(name_or_fn: str | None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...


def task(name_or_fn: Any = None, /, *, name: str | None = None) -> Any:
    """Register a function as a task: ``@task``, ``@task("billing.refund")``, ``@task(name=...)``.

    The function is returned unchanged, so it stays callable (and testable) as plain Python.
    """
    if callable(name_or_fn):
        _register_default(name_or_fn)
        return name_or_fn
    chosen = name_or_fn if name_or_fn is not None else name

    def decorate(fn: F) -> F:
        if chosen:
            REGISTRY.register(chosen, fn)
        else:
            _register_default(fn)
        return fn

    return decorate


def import_tasks(modules: Iterable[str], base: Path | None = None) -> None:
    """Import task modules (dotted names or ``.py`` paths) so their ``@task``s register.

    Raises :class:`~tether.errors.TaskError` naming the module if an import fails.
    """
    root = str((base or Path.cwd()).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    for module in modules:
        try:
            _import_one(module, base)
        except TaskError:
            raise
        except BaseException as exc:  # any failure of user code at import time
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise TaskError(
                f"cannot import task module '{module}': {type(exc).__name__}: {exc}"
            ) from exc


def _import_one(module: str, base: Path | None) -> None:
    if module.endswith(".py") or "/" in module or "\\" in module:
        path = Path(module)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            raise TaskError(f"cannot import task module '{module}': no such file")
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        name = f"tether_tasks_{path.stem}_{digest}"
        if name in sys.modules:
            return
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TaskError(f"cannot import task module '{module}'")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    else:
        importlib.import_module(module)


def resolve_tasks(
    tasks: Mapping[str, Callable[..., Any]] | Iterable[str] | None,
) -> Mapping[str, Callable[..., Any]]:
    """The task mapping a Runner or check uses: a mapping as given, or module names imported."""
    if tasks is None:
        return REGISTRY
    if isinstance(tasks, Mapping):
        return tasks
    import_tasks([tasks] if isinstance(tasks, str) else list(tasks))
    return REGISTRY
