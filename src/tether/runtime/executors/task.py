"""``task`` nodes: render the arguments, call the registered function (or poll it)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tether.runtime.context import UnitScope
from tether.runtime.invoke import call_once, call_task, failure, retryable
from tether.runtime.polling import poll
from tether.runtime.render import render
from tether.runtime.secrets import stored_form
from tether.runtime.settings import seconds_setting
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import to_json
from tether.templating import TemplateBudget

if TYPE_CHECKING:
    from tether.compiler.plan import TaskNode


class TaskExecutor:
    """Calls the node's task with its ``with:`` arguments, under its retry policy; a node
    with ``until`` polls (``runtime/polling.py``)."""

    async def run(self, unit: Unit, node: TaskNode) -> UnitResult:
        level = unit.level
        started = time.monotonic()
        budget = level.session.budget
        names = unit.names() if node.args or isinstance(node.timeout, str) else {}
        timeout = None if node.timeout is None else \
            seconds_setting(node.timeout, names, "timeout", budget)
        if timeout is not None and timeout < budget.seconds:
            budget = TemplateBudget(timeout, budget.max_size)  # it counts toward the node's
        if node.args:  # (names are built only for a node with templates to render)
            args = render(node.args, names, "with", budget)
            to_json(args, f"the arguments of node '{node.id}'", node_id=node.id)
        else:
            args = {}
        stored = args if level.session.secrets is None else stored_form(node.args, args)
        fn = level.session.tasks[node.task]
        answers = level.answers(unit.path)
        scope = UnitScope(unit.address, level.agent_path, answers)
        semaphore = None if unit.inline else level.session.semaphore
        if node.until is not None:
            return await poll(unit, node, fn, args, scope, semaphore, timeout, stored)
        if node.retry is None and timeout is None:  # one attempt: without call_task's frame
            try:
                output, text = await call_once(fn, node, args, scope, semaphore,
                                               level.session.bodies, None)
            except BaseException as exc:
                error = failure(retryable(exc), node)
            else:
                return UnitResult(output, text, stored)
            raise error from None  # (outside the handler, as call_task raises it)
        else:
            tries: list[dict[str, Any]] = []
            output, text = await call_task(fn, node, args, scope, semaphore,
                                           level.session.bodies,
                                           spent=time.monotonic() - started, timeout=timeout,
                                           tries=tries)
            return UnitResult(output, text, stored, tuple(tries))
