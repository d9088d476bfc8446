"""tether: a workflow language with a static graph compiler and a durable runtime."""

from tether.compiler import Plan, check, compile
from tether.dsl.ast import Workflow
from tether.dsl.loader import load
from tether.errors import WorkflowError

__all__ = ["Plan", "Workflow", "WorkflowError", "check", "compile", "load"]
