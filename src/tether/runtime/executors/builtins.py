"""The built-in nodes that call nothing: ``noop: true`` and ``fail: "<message>"``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.runtime.invoke import NodeFailure
from tether.runtime.render import render
from tether.runtime.state import NodeError
from tether.runtime.units import Unit, UnitResult

if TYPE_CHECKING:
    from tether.compiler.plan import FailNode, NoopNode


class NoopExecutor:
    """Completes at once with output null."""

    async def run(self, unit: Unit, node: NoopNode) -> UnitResult:
        return UnitResult(None, "null", None)


class FailExecutor:
    """Fails the node with its rendered message (error type ``Fail``)."""

    async def run(self, unit: Unit, node: FailNode) -> UnitResult:
        message = render(node.fail, unit.names(), "fail", unit.level.session.budget)
        text = message if isinstance(message, str) else str(message)
        raise NodeFailure(NodeError("Fail", text or f"node '{node.id}' failed", node.id))
