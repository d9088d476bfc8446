"""The compiler: AST -> checked, fingerprinted Plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.compiler.compile import Compiler, check, compile, discover

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanNode

__all__ = ["Compiler", "Plan", "PlanNode", "check", "compile", "discover"]


def __getattr__(name: str) -> Any:
    """``Plan`` and ``PlanNode``, imported on first use: checking a file builds no plan, so
    ``tether check`` does not pay for the plan's models (docs/performance.md)."""
    if name in ("Plan", "PlanNode"):
        from tether.compiler import plan

        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
