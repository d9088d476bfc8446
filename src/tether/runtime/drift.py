"""Task drift: a task's code changed under the plans of live runs (issue 24).

A plan passes each task node the arguments of its ``with:``. When the task registered in a
worker no longer accepts one of them, or needs one the plan does not pass, every run of that
plan would fail at that node: the worker does not claim them, and the reason (naming the task,
the node and the parameter) is what ``tether runs --stuck`` shows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tether.compiler.plan import Plan, TaskNode, WorkflowNode


def _task_nodes(plan: Plan) -> Iterator[TaskNode]:
    for node in plan.nodes:
        if isinstance(node, TaskNode):
            yield node
        elif isinstance(node, WorkflowNode):
            yield from _task_nodes(node.workflow.plan)


def _misfit(node: TaskNode, fn: Callable[..., Any]) -> str | None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to compare (a builtin, a C function)
        return None
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        named = {n for n, p in params.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        extra = sorted(set(node.args) - named)
        if extra:
            return f"task `{node.task}` (node `{node.id}`) has no parameter `{extra[0]}` " \
                "any more"
    for name, param in params.items():
        required = param.default is param.empty and param.kind not in (
            param.VAR_POSITIONAL, param.VAR_KEYWORD)
        if required and name not in node.args:
            return f"task `{node.task}` (node `{node.id}`) now needs argument `{name}`, " \
                "which the plan does not pass"
    return None


def task_drift(plan: Plan, tasks: Mapping[str, Callable[..., Any]]) -> str | None:
    """Why the registered ``tasks`` no longer fit ``plan`` (the first misfit), or None."""
    for node in _task_nodes(plan):
        fn = tasks.get(node.task)
        if fn is not None and (reason := _misfit(node, fn)) is not None:
            return reason
    return None
