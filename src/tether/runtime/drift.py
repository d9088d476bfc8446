"""Task drift: a task's code changed under the plans of live runs (issue 24).

A plan passes each task node the arguments of its ``with:``. When the task registered in a
worker no longer accepts one of them, or needs one the plan does not pass, every run of that
plan would fail at that node. When the task's signature was recorded with the plan
(:mod:`tether.runtime.signatures`), the worker's code must also still have every parameter
recorded, with the same default where the plan relies on it, and the same return annotation:
otherwise the runs would run other code than they were submitted for. Either way the worker
does not claim them, and the reason (naming the task, the node and the parameter) is what
``tether runs --stuck`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tether.kinds import NodeKind
from tether.runtime.signatures import TaskSignature

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, TaskNode

_KEYWORD = ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")


def _task_nodes(plan: Plan) -> Iterator[TaskNode]:
    for node in plan.nodes:
        if node.kind is NodeKind.TASK:
            yield node
        elif node.kind is NodeKind.WORKFLOW:
            yield from _task_nodes(node.workflow.plan)


def _misfit(node: TaskNode, now: TaskSignature) -> str | None:
    """The plan's call no longer fits the task's parameters."""
    where = f"task `{node.task}` (node `{node.id}`)"
    if not now.open_ended:
        named = {p.name for p in now.params if p.kind in _KEYWORD}
        extra = sorted(set(node.args) - named)
        if extra:
            return f"{where} has no parameter `{extra[0]}` any more"
    for param in now.params:
        if param.required and param.name not in node.args:
            return f"{where} now needs argument `{param.name}`, which the plan does not pass"
    return None


def _unlike(node: TaskNode, now: TaskSignature, then: TaskSignature) -> str | None:
    """The task's parameters or return annotation differ from those recorded with the plan."""
    where = f"task `{node.task}` (node `{node.id}`)"
    for old in then.params:
        if old.kind not in _KEYWORD:
            continue
        new = now.param(old.name)
        if new is None:
            if now.open_ended:
                continue
            return f"{where} has no parameter `{old.name}` any more (the plan was submitted " \
                "with it)"
        if old.name not in node.args and new.default != old.default and \
                new.default is not None:
            return f"{where}: parameter `{old.name}` defaults to {new.default} now, not " \
                f"{old.default} as when the plan was submitted"
    if then.returns is not None and now.returns is not None and then.returns != now.returns:
        return f"{where} returns `{now.returns}` now, not `{then.returns}` as when the plan " \
            "was submitted"
    return None


def task_drift(plan: Plan, tasks: Mapping[str, Callable[..., Any]],
               recorded: Mapping[str, TaskSignature] | None = None) -> str | None:
    """Why the registered ``tasks`` no longer fit ``plan`` (the first misfit), or None;
    ``recorded``: the task signatures recorded with the plan, compared too."""
    for node in _task_nodes(plan):
        fn = tasks.get(node.task)
        now = TaskSignature.of(fn) if fn is not None else None
        if now is None:  # not registered here (reported as such), or no signature to read
            continue
        reason = _misfit(node, now)
        then = (recorded or {}).get(node.task)
        if reason is None and then is not None:
            reason = _unlike(node, now, then)
        if reason is not None:
            return reason
    return None
