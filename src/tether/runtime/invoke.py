"""Calling tasks (sync in worker threads, async awaited) with retries, backoff and timeouts;
validating run inputs and approval answers."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from tether.compiler.plan import PlanInput, PlanNode
from tether.errors import InterruptSignal, NotJSONError
from tether.jsontypes import article, json_type_name, matches_type
from tether.runtime.context import UNIT, UnitScope
from tether.runtime.idempotent import cached_call
from tether.runtime.values import to_json


class NodeFailure(Exception):
    """A unit failed for good (retries exhausted, or a failure retrying cannot fix)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        super().__init__(error["message"])


def error_info(exc: BaseException, node_id: str | None) -> dict[str, Any]:
    """The JSON description of an error: type, message, node id."""
    if isinstance(exc, NodeFailure):
        return dict(exc.error)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return {"type": "TimeoutError", "message": str(exc) or "the task timed out",
                "node_id": node_id}
    return {"type": type(exc).__name__, "message": str(exc) or type(exc).__name__,
            "node_id": node_id}


def check_values(specs: tuple[PlanInput, ...], given: dict[str, Any] | None,
                 what: str) -> tuple[dict[str, Any], list[str]]:
    """Values completed with defaults, and the problems found (missing, unknown, mistyped)."""
    given = dict(given or {})
    problems: list[str] = []
    result: dict[str, Any] = {}
    declared = {spec.name: spec for spec in specs}
    for name in given:
        if name not in declared:
            problems.append(f"unknown {what} '{name}'" + (
                f" (declared: {', '.join(declared)})" if declared else ""))
    for spec in specs:
        if spec.name in given:
            value = given[spec.name]
            if value is not None and not matches_type(value, spec.type):
                problems.append(f"{what} '{spec.name}' must be {article(spec.type)}, "
                                f"not {json_type_name(value)}")
            result[spec.name] = value
        elif spec.required:
            problems.append(f"missing required {what} '{spec.name}'")
        else:
            result[spec.name] = spec.default
    return result, problems


async def call_task(fn: Callable[..., Any], node: PlanNode, args: dict[str, Any],
                    scope: UnitScope, semaphore: asyncio.Semaphore,
                    execution_id: str) -> tuple[Any, str]:
    """Run a task unit to its JSON result, retrying per the node's policy.

    ``interrupt()`` signals pass through at once; results that are not JSON fail the unit
    without retrying (the same call would return the same value).
    """
    attempts = node.retry.max_attempts if node.retry else 1
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        scope.asked = 0
        token = UNIT.set(scope)
        try:
            async with semaphore:
                result = await _attempt(fn, node, args, execution_id)
            return to_json(result, f"the output of node '{node.id}'", node_id=node.id)
        except (InterruptSignal, NotJSONError, NodeFailure):
            raise
        except Exception as exc:  # a task failure: retry if the policy allows
            last = exc
        finally:
            UNIT.reset(token)
        if attempt < attempts and node.retry is not None:
            await asyncio.sleep(node.retry.backoff * 2 ** (attempt - 1))
    assert last is not None
    error = error_info(last, node.id)
    if attempts > 1:
        error["attempts"] = attempts
    raise NodeFailure(error) from last


async def _attempt(fn: Callable[..., Any], node: PlanNode, args: dict[str, Any],
                   execution_id: str) -> Any:
    call = functools.partial(fn, **args)
    if node.idempotent:
        call = functools.partial(cached_call, fn, args)
    coroutine = call() if _is_async(fn) else asyncio.to_thread(call)
    if node.timeout is None:
        result = await coroutine
    else:
        try:
            result = await asyncio.wait_for(coroutine, node.timeout)
        except TimeoutError:
            raise TimeoutError(f"node '{node.id}' timed out after {node.timeout:g}s") from None
    if inspect.isawaitable(result):
        result = await result
    return result


def _is_async(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None))  # noqa: B004 - callable objects with async __call__
