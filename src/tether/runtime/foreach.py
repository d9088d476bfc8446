"""``for_each``: a node run once per element, with bounded concurrency, each element its own
checkpointed unit (a crash never redoes a finished element).

Elements start in order while fewer than the node's ``concurrency`` run; finished elements are
taken from a queue, so scheduling costs O(1) per element at any concurrency. An element that
asks a human waits on its own; the others go on. After a failure no new element starts (the
in-flight ones finish); the node then fails with the first failure. The node's output is the
list of the elements' outputs, in order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tether.compiler.plan import TaskNode, WorkflowNode
from tether.errors import InterruptSignal, TemplateLimit
from tether.runtime.invoke import NodeFailure
from tether.runtime.render import RenderError, failure_of, render
from tether.runtime.state import NodeError, completed_entry
from tether.runtime.units import Suspended, UnitResult
from tether.runtime.values import dumps
from tether.status import CheckpointStatus, UnitStatus

if TYPE_CHECKING:
    from tether.runtime.execution import Level


class ForEach:
    """The elements of one for_each node."""

    def __init__(self, level: Level, node: TaskNode | WorkflowNode) -> None:
        self.level = level
        self.node = node
        self.failure: NodeFailure | None = None
        self.waiting = False

    def _items(self) -> list[Any]:
        try:
            items = render(self.node.for_each, self.level.names(self.node), "for_each",
                           self.level.session.budget)
        except (RenderError, TemplateLimit) as exc:
            raise NodeFailure(failure_of(exc, self.node.id)) from None
        if not isinstance(items, list):
            raise NodeFailure(NodeError(
                "TypeError", f"for_each of node '{self.node.id}' must be a list, not "
                f"{type(items).__name__}", self.node.id))
        return items

    async def run(self) -> UnitResult:
        items = self._items()
        level, node = self.level, self.node
        entry = level.state.unit(node.id)
        entry.status = UnitStatus.RUNNING
        units = entry.items
        level.mark(("nodes", node.id))
        todo = [i for i in range(len(items))
                if (units.get(str(i)) or {}).get("status") not in (UnitStatus.COMPLETED,
                                                                   UnitStatus.INTERRUPTED)]
        self.waiting = any((units.get(str(i)) or {}).get("status") == UnitStatus.INTERRUPTED
                           for i in range(len(items)))
        await self._drain(items, todo)
        if self.failure is not None:
            raise self.failure
        if self.waiting:
            raise Suspended()
        outputs = [units[str(i)]["output"] for i in range(len(items))]
        return UnitResult(outputs, dumps(outputs), None)

    async def _drain(self, items: list[Any], todo: list[int]) -> None:
        limit = self.node.concurrency or self.level.session.max_concurrency
        done: asyncio.Queue[asyncio.Task[UnitResult]] = asyncio.Queue()
        running: dict[asyncio.Task[UnitResult], int] = {}
        position = 0
        try:
            while True:
                while position < len(todo) and len(running) < limit and self.failure is None:
                    self.level.session.check()
                    index = todo[position]
                    position += 1
                    task = asyncio.create_task(self._one(index, items[index]))
                    task.add_done_callback(done.put_nowait)
                    running[task] = index
                if not running:
                    return
                task = await done.get()
                self._settle(running.pop(task), task)
        except BaseException:
            for task in running:
                task.cancel()
            raise

    async def _one(self, index: int, item: Any) -> UnitResult:
        path = ("nodes", self.node.id, "items", str(index))
        return await self.level.unit(self.node, path, f"{self.node.id}/item:{index}",
                                     item=item, has_item=True)

    def _settle(self, index: int, task: asyncio.Task[UnitResult]) -> None:
        level, node = self.level, self.node
        key = str(index)
        path = ("nodes", node.id, "items", key)
        address = f"{node.id}/item:{index}"
        exc = task.exception()
        if exc is None:
            result = task.result()
            level.state.unit(node.id).items[key] = completed_entry(result.output)
            level.mark(path)
            level.checkpoint(address, node, CheckpointStatus.COMPLETED, result.text,
                             result.node_input)
        elif isinstance(exc, InterruptSignal):
            level.suspend(node, path, address, exc)
            self.waiting = True
        elif isinstance(exc, Suspended):
            level.state.at(path).status = UnitStatus.INTERRUPTED
            level.mark(path)
            self.waiting = True
        elif isinstance(exc, NodeFailure):
            level.state.at(path).fail(exc.error)
            level.mark(path)
            if self.failure is None:
                self.failure = NodeFailure(exc.error)
        else:
            raise exc
