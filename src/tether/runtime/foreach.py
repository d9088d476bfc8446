"""``for_each``: a node run once per element, with bounded concurrency, each element its own
checkpointed unit (a crash never redoes a finished element).

Elements start in order while fewer than the node's ``concurrency`` run; finished elements are
taken from a queue, so scheduling costs O(1) per element at any concurrency. An element that
asks a human waits on its own; the others go on. After a failure no new element starts (the
in-flight ones finish); the node then fails with the first failure. With ``fail_fast: false``
every element runs, and the node then fails listing the failed elements (``ForEachFailed``).
The node's output is the list of the elements' outputs, in order.

A ``matrix`` node's elements are the combinations of its axes (the first axis varies
slowest), without those matching an ``exclude`` entry, then each ``include`` entry that is not
already one of them; ``item`` is the combination (a mapping, axis -> value).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from tether.errors import InterruptSignal, TemplateLimit, ValueTooLarge
from tether.observability.observer import observed_task
from tether.runtime.events import Event
from tether.runtime.invoke import NodeFailure
from tether.runtime.render import RenderError, failure_of, render
from tether.runtime.settings import count_setting
from tether.runtime.state import NodeError
from tether.runtime.titles import per_element, shown_title
from tether.runtime.units import Suspended, UnitResult
from tether.runtime.values import check_size, dumps
from tether.status import CheckpointStatus, UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import TaskNode, WorkflowNode
    from tether.runtime.execution import Level


class ForEach:
    """The elements of one for_each node."""

    def __init__(self, level: Level, node: TaskNode | WorkflowNode) -> None:
        self.level = level
        self.node = node
        self.failure: NodeFailure | None = None
        self.failed: list[tuple[int, NodeError]] = []
        self.waiting = False

    def _items(self) -> list[Any]:
        node = self.node
        try:
            if node.matrix is not None:
                return combinations(render(node.matrix, self.level.names(node), "matrix",
                                           self.level.session.budget), node.id)
            items = render(node.for_each, self.level.names(node), "for_each",
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
        level.mark(("nodes", node.id))
        todo = [i for i in range(len(items))
                if entry.item_status(str(i)) not in (UnitStatus.COMPLETED,
                                                     UnitStatus.INTERRUPTED)]
        self.waiting = any(entry.item_status(str(i)) == UnitStatus.INTERRUPTED
                           for i in range(len(items)))
        await self._drain(items, todo)
        if self.failed and not node.fail_fast:
            raise NodeFailure(_all_failures(node.id, self.failed, len(items)))
        if self.failure is not None:
            raise self.failure
        if self.waiting:
            raise Suspended()
        outputs = entry.item_outputs(len(items))
        text = dumps(outputs)
        try:  # each element was checked; their list may still be over the cap
            check_size(text, level.session.max_value_bytes, node.id)
        except ValueTooLarge as exc:
            raise NodeFailure(NodeError("ValueTooLarge", str(exc), node.id)) from None
        return UnitResult(outputs, text, None)

    async def _drain(self, items: list[Any], todo: list[int]) -> None:
        limit = self.level.session.max_concurrency
        if self.node.concurrency is not None:
            try:
                limit = count_setting(self.node.concurrency, self.level.names(self.node),
                                      "concurrency", self.level.session.budget)
            except (RenderError, TemplateLimit) as exc:
                raise NodeFailure(failure_of(exc, self.node.id)) from None
        done: asyncio.Queue[asyncio.Task[UnitResult]] = asyncio.Queue()
        running: dict[asyncio.Task[UnitResult], int] = {}
        position = 0
        observer = self.level.session.observer
        try:
            while True:
                while position < len(todo) and len(running) < limit and (
                        self.failure is None or not self.node.fail_fast):
                    self.level.session.check()
                    index = todo[position]
                    position += 1
                    if observer is None:
                        task = asyncio.create_task(self._one(index, items[index]))
                    else:  # the element's span, current in its task, ends with it
                        task = observed_task(
                            observer.open(self.node, f"{self.node.id}/item:{index}"),
                            self._one(index, items[index]))
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
        address = f"{self.node.id}/item:{index}"
        if self.level.session.listener is None or not per_element(self.node):
            return await self._unit(path, address, item)
        return await self._shown(index, item, path, address)

    async def _shown(self, index: int, item: Any, path: tuple[str, ...],
                     address: str) -> UnitResult:
        """Run one element, announced with its own title (a title reading ``item``)."""
        level, node = self.level, self.node
        title = shown_title(level, node, item=item, has_item=True)
        session = level.session
        session.emit(Event("started", session.execution_id, address, level.agent_path,
                           title=title))
        started, status = time.perf_counter(), UnitStatus.FAILED
        try:
            result = await self._unit(path, address, item)
            status = UnitStatus.COMPLETED
            return result
        except (InterruptSignal, Suspended):
            status = UnitStatus.INTERRUPTED
            raise
        finally:
            session.emit(Event("finished", session.execution_id, address, level.agent_path,
                               status, time.perf_counter() - started, title))

    def _unit(self, path: tuple[str, ...], address: str,
              item: Any) -> Coroutine[Any, Any, UnitResult]:
        """One element's unit (its span, when observed, was opened for its task)."""
        return self.level.unit(self.node, path, address, item=item, has_item=True)

    def _settle(self, index: int, task: asyncio.Task[UnitResult]) -> None:
        level, node = self.level, self.node
        key = str(index)
        path = ("nodes", node.id, "items", key)
        address = f"{node.id}/item:{index}"
        exc = task.exception()
        if exc is None:
            result = task.result()
            tries = level.masked_tries(result.tries) if result.tries else ()
            level.state.unit(node.id).complete_item(key, result.output, tries)
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
            level.state.at(path).fail(exc.error, level.masked_tries(exc.tries))
            level.mark(path)
            self.failed.append((index, exc.error))
            if self.failure is None:
                self.failure = NodeFailure(exc.error)
        else:
            raise exc


def _all_failures(node_id: str, failed: list[tuple[int, NodeError]], total: int) -> NodeError:
    """The error of a ``fail_fast: false`` node: every failed element, in order."""
    failed = sorted(failed, key=lambda pair: pair[0])
    shown = "; ".join(f"item {i}: {e.type}: {e.message}" for i, e in failed[:20])
    more = f"; and {len(failed) - 20} more" if len(failed) > 20 else ""
    return NodeError("ForEachFailed", f"{len(failed)} of {total} elements failed: {shown}{more}",
                     node_id)


def combinations(matrix: Any, node_id: str) -> list[Any]:
    """The elements of a rendered ``matrix`` (see the module docstring)."""
    if not isinstance(matrix, dict):
        raise NodeFailure(NodeError("TypeError", f"matrix of node '{node_id}' must be a "
                                    "mapping", node_id))
    axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    for axis, values in axes.items():
        if not isinstance(values, list):
            raise NodeFailure(NodeError("TypeError", f"matrix axis '{axis}' of node "
                                        f"'{node_id}' must be a list, not "
                                        f"{type(values).__name__}", node_id))
    exclude = [e for e in matrix.get("exclude") or () if isinstance(e, dict)]
    rows = [dict(zip(axes, values, strict=True))
            for values in itertools.product(*axes.values())] if axes else []
    rows = [row for row in rows
            if not any(all(row.get(k) == v for k, v in e.items()) for e in exclude)]
    for extra in matrix.get("include") or ():
        if isinstance(extra, dict) and extra not in rows:
            rows.append(dict(extra))
    return rows
