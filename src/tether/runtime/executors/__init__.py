"""One executor per node kind, behind the :class:`~tether.runtime.units.Executor` protocol.

Adding a kind means one new module here and one line in :func:`executor_for`; the scheduler
(``execution.py``) never looks at a node's kind.
"""

from __future__ import annotations

from typing import assert_never

from tether.compiler.plan import PlanNode
from tether.runtime.executors.approval import ApprovalExecutor
from tether.runtime.executors.task import TaskExecutor
from tether.runtime.executors.workflow import WorkflowExecutor
from tether.runtime.units import Executor

_TASK = TaskExecutor()
_APPROVAL = ApprovalExecutor()
_WORKFLOW = WorkflowExecutor()


def executor_for(node: PlanNode) -> Executor:
    """The executor of ``node``'s kind."""
    kind = node.kind
    match kind:
        case "task":
            return _TASK
        case "approval":
            return _APPROVAL
        case "workflow":
            return _WORKFLOW
        case _:
            assert_never(kind)


__all__ = ["executor_for"]
