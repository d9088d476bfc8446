"""The project's tasks, read from their Python source with :mod:`ast` (never imported).

The task modules are those of ``[tool.tether] tasks`` in the nearest ``pyproject.toml`` above
a document (as ``tether run`` reads them). A module is parsed, not run: the editor must not
execute user code, and a module that fails to import still offers its tasks. A function
decorated with ``@task``/``@tether.task`` is found under the name it registers:
``@task("billing.refund")`` or ``@task(name=...)`` gives that name, a bare ``@task`` the
function's name (the alias the runtime also answers to) and ``module.function`` for a dotted
module. Each file is parsed again only when its modification time changes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tether.cli.options import configured_tasks, find_pyproject
from tether.errors import TetherError


@dataclass(frozen=True)
class TaskInfo:
    """One task as its source declares it."""

    name: str
    path: Path
    line: int  # 1-based line of the `def`
    col: int  # 1-based column of the function's name
    signature: str  # `refund(amount: float, account: str) -> dict[str, object]`
    doc: str | None
    fields: tuple[tuple[str, str], ...] = ()
    """The output's fields when the return type is a class of the module with annotated
    fields (a TypedDict, dataclass or pydantic model): (name, type) pairs."""


_cache: dict[Path, tuple[float, list[TaskInfo]]] = {}


def project_tasks(start: Path) -> dict[str, TaskInfo]:
    """The tasks of the project ``start`` (a directory) belongs to, by name."""
    pyproject = find_pyproject(start)
    if pyproject is None:
        return {}
    try:
        modules = configured_tasks(pyproject)
    except TetherError:
        return {}
    found: dict[str, TaskInfo] = {}
    for module in modules:
        path = module_path(module, pyproject.parent)
        if path is not None:
            for info in tasks_in(path, None if module.endswith(".py") else module):
                found.setdefault(info.name, info)
    return found


def module_path(module: str, base: Path) -> Path | None:
    """The source file of a task module: a ``.py`` path, or a dotted name under ``base``."""
    if module.endswith(".py") or "/" in module or "\\" in module:
        path = Path(module)
        path = path if path.is_absolute() else base / path
        return path if path.is_file() else None
    stem = base.joinpath(*module.split("."))
    for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def tasks_in(path: Path, module: str | None) -> list[TaskInfo]:
    """The tasks one file declares (cached by modification time)."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return []
    cached = _cache.get(path)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for name in _registered_names(node, module):
                found.append(_info(name, path, node, classes))
    _cache[path] = (mtime, found)
    return found


def _is_task(expr: ast.expr) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return ((isinstance(target, ast.Name) and target.id == "task")
            or (isinstance(target, ast.Attribute) and target.attr == "task"))


def _registered_names(node: ast.FunctionDef | ast.AsyncFunctionDef,
                      module: str | None) -> list[str]:
    for decorator in node.decorator_list:
        if not _is_task(decorator):
            continue
        if isinstance(decorator, ast.Call):
            explicit = [*decorator.args[:1], *(k.value for k in decorator.keywords
                                               if k.arg == "name")]
            for value in explicit:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return [value.value]
        return [node.name, f"{module}.{node.name}"] if module else [node.name]
    return []


def _info(name: str, path: Path, node: ast.FunctionDef | ast.AsyncFunctionDef,
          classes: dict[str, ast.ClassDef]) -> TaskInfo:
    returns = ast.unparse(node.returns) if node.returns is not None else None
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    signature = f"{prefix}{node.name}({ast.unparse(node.args)})"
    if returns:
        signature += f" -> {returns}"
    line = node.lineno
    col = node.col_offset + len(prefix) + len("def ") + 1
    cls = classes.get(returns or "")
    fields = tuple((stmt.target.id, ast.unparse(stmt.annotation)) for stmt in
                   (cls.body if cls is not None else [])
                   if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name))
    return TaskInfo(name, path, line, col, signature, ast.get_docstring(node), fields)
