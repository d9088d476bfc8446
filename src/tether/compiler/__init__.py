"""The compiler: AST -> checked, fingerprinted Plan.

Its names are imported on first use: a process that only reads stored plans
(``tether.compiler.plan``: ``tether resume``, the workers, the console) does not import the
checks and the document model that compiling needs, and ``tether check``, which builds no
plan, does not import the plan's models (docs/performance.md, "Start-up of the command").
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.compiler.compile import Compiler, check, compile, discover
    from tether.compiler.plan import Plan, PlanNode

__all__ = ["Compiler", "Plan", "PlanNode", "check", "compile", "discover"]

_WHERE: dict[str, str] = {
    **dict.fromkeys(("Compiler", "check", "compile", "discover"), "tether.compiler.compile"),
    **dict.fromkeys(("Plan", "PlanNode"), "tether.compiler.plan"),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


class _Package(types.ModuleType):
    """This package, with one rule: its ``compile`` is the function
    :func:`tether.compiler.compile.compile`, not the submodule of the same name. Importing a
    submodule sets it as an attribute of its package; that one is not stored, so
    ``tether.compiler.compile`` stays the function (found by :func:`__getattr__`), as it was
    when this package imported it eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "compile" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
