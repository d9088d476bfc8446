"""Modules imported at their first use: SQLAlchemy and what is built on it.

The SQL stores build their statements with SQLAlchemy Core, but only on a statement's first
use, and the SQLite store has the commands' statements compiled ahead of time
(``sqlite_statements.py``): a ``tether resume`` or ``tether run`` on SQLite never builds one,
and importing SQLAlchemy would cost it about 0.1 s of its 0.25 s (issue 25, fast start). So
the modules that hold statements name SQLAlchemy, the schema and the statement modules through
a :class:`LazyModule`: an attribute read imports the module (once; it is then a dict lookup).
For the type checker they are plain imports (``if TYPE_CHECKING: import sqlalchemy as sa``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    """The module ``name``, imported when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        value = getattr(module, attribute)
        setattr(self, attribute, value)  # the next read finds it without __getattr__
        return value

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
