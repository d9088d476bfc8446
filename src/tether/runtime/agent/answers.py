"""Checking the answer to a tool approval before it is claimed.

The pause before a call of a tool listed under ``approve_tools`` is answered with
``Resume(approved=True)``, ``Resume(arguments={...})`` (approved, with edited arguments,
which must match the tool's schema) or ``Resume(approved=False, message="...")`` (denied; the
message is the call's result). An answer that says none of these, edits the arguments into
something the tool refuses, or names another call (``call_id``) is refused before the pause
is claimed, so nothing changes and the human can answer again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tether.agents.errors import ToolSchemaError
from tether.agents.tools import tool_spec
from tether.runtime.agent.tools import APPROVAL_REASON
from tether.stores.records import PendingInterrupt


def approval_problems(tasks: Mapping[str, Callable[..., Any]], pending: PendingInterrupt,
                      answer: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``answer`` to the tool approval ``pending`` (empty: nothing, or
    ``pending`` is not a tool approval)."""
    context = pending.context
    if pending.reason != APPROVAL_REASON or not isinstance(context, dict) \
            or "call_id" not in context:
        return []
    problems: list[str] = []
    if "call_id" in answer and answer["call_id"] != context["call_id"]:
        problems.append(f"this pause approves call '{context['call_id']}', not "
                        f"'{answer['call_id']}'")
    if "approved" in answer and not isinstance(answer["approved"], bool):
        problems.append("`approved` must be true or false")
    if answer.get("message") is not None and not isinstance(answer["message"], str):
        problems.append("`message` must be a string")
    if "arguments" in answer:
        problems.extend(_argument_problems(tasks, str(context.get("tool", "")),
                                           answer["arguments"]))
    if "approved" not in answer and "arguments" not in answer:
        problems.append("answer with approved=true, arguments={...} (approve with edited "
                        "arguments) or approved=false and a message")
    return problems


def _argument_problems(tasks: Mapping[str, Callable[..., Any]], tool: str,
                       arguments: Any) -> list[str]:
    if not isinstance(arguments, dict):
        return ["`arguments` must be a mapping of the tool's arguments"]
    fn = tasks.get(tool)
    if fn is None:
        return []
    try:
        problem = tool_spec(fn, tool).check_arguments(arguments)
    except ToolSchemaError as exc:
        return [str(exc)]
    return [problem] if problem else []
