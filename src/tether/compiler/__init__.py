"""The compiler: AST -> checked, fingerprinted Plan."""

from tether.compiler.compile import Compiler, check, compile, discover
from tether.compiler.plan import Plan, PlanNode

__all__ = ["Compiler", "Plan", "PlanNode", "check", "compile", "discover"]
