"""One executor per node kind, behind the :class:`~tether.runtime.units.Executor` protocol.

Adding a kind means one new module here and one case in :func:`execute`; the scheduler
(``execution.py``) never looks at a node's kind.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, assert_never

from tether.kinds import NodeKind
from tether.runtime.executors.approval import ApprovalExecutor
from tether.runtime.executors.builtins import FailExecutor, NoopExecutor
from tether.runtime.executors.sleep import SleepExecutor
from tether.runtime.executors.switch import SwitchExecutor
from tether.runtime.executors.task import TaskExecutor
from tether.runtime.executors.workflow import WorkflowExecutor
from tether.runtime.units import Unit, UnitResult

if TYPE_CHECKING:
    from tether.runtime.executors.agent import AgentExecutor

_TASK = TaskExecutor()
_APPROVAL = ApprovalExecutor()
_WORKFLOW = WorkflowExecutor()
_SWITCH = SwitchExecutor()
_NOOP = NoopExecutor()
_FAIL = FailExecutor()
_SLEEP = SleepExecutor()


def execute(unit: Unit) -> Coroutine[Any, Any, UnitResult]:
    """The coroutine that runs ``unit`` with the executor of its node's kind (returned, not
    awaited here: one coroutine frame fewer on the path of every node)."""
    node = unit.node
    match node.kind:  # by kind, not class: a light plan's nodes (compiler/plan_light.py)
        case NodeKind.TASK:
            return _TASK.run(unit, node)
        case NodeKind.APPROVAL:
            return _APPROVAL.run(unit, node)
        case NodeKind.WORKFLOW:
            return _WORKFLOW.run(unit, node)
        case NodeKind.AGENT:
            return _agent().run(unit, node)
        case NodeKind.SWITCH:
            return _SWITCH.run(unit, node)
        case NodeKind.NOOP:
            return _NOOP.run(unit, node)
        case NodeKind.FAIL:
            return _FAIL.run(unit, node)
        case NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            return _SLEEP.run(unit, node)
        case _:
            assert_never(node)


_AGENTS: list[AgentExecutor] = []


def _agent() -> AgentExecutor:
    """The agent executor, made on first use: it imports the agents' modules (the model
    providers, the conversation), which a run without agent nodes never needs."""
    if not _AGENTS:
        from tether.runtime.executors.agent import AgentExecutor

        _AGENTS.append(AgentExecutor())
    return _AGENTS[0]


__all__ = ["execute"]
