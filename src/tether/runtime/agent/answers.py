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

from tether.stores.records import PendingInterrupt

APPROVAL_REASON = "approve_tool"
"""The reason of the pause before a call of a tool listed under ``approve_tools``. (Defined
here, where resuming a run reads it, so that a resume imports the agents' modules only
when it answers a tool approval.)"""


def approval_problems(tasks: Mapping[str, Callable[..., Any]], pending: PendingInterrupt,
                      answer: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``answer`` to the tool approval ``pending`` (empty: nothing, or
    ``pending`` is not a tool approval)."""
    return [text for _, text in field_problems(tasks, pending, answer)]


def is_tool_approval(pending: PendingInterrupt) -> bool:
    """Whether ``pending`` is the pause before a call of a tool under ``approve_tools``."""
    return pending.reason == APPROVAL_REASON and isinstance(pending.context, dict) \
        and "call_id" in pending.context


def field_problems(tasks: Mapping[str, Callable[..., Any]], pending: PendingInterrupt,
                   answer: Mapping[str, Any]) -> list[tuple[str, str]]:
    """:func:`approval_problems`, each with the key of the answer it is about (``call_id``,
    ``approved``, ``message``, ``arguments``; ``decision`` when the answer decides nothing).

    Edited arguments are checked by the tool itself when ``tasks`` has it, else against the
    JSON Schema the pause froze (``parameters``), so a console without the task modules
    refuses what the tool would."""
    if not is_tool_approval(pending):
        return []
    context = pending.context
    problems: list[tuple[str, str]] = []
    if "call_id" in answer and answer["call_id"] != context["call_id"]:
        problems.append(("call_id", f"this pause approves call '{context['call_id']}', not "
                         f"'{answer['call_id']}'"))
    if "approved" in answer and not isinstance(answer["approved"], bool):
        problems.append(("approved", "`approved` must be true or false"))
    if answer.get("message") is not None and not isinstance(answer["message"], str):
        problems.append(("message", "`message` must be a string"))
    if "arguments" in answer:
        problems.extend(("arguments", p) for p in _argument_problems(
            tasks, str(context.get("tool", "")), answer["arguments"],
            context.get("parameters")))
    if "approved" not in answer and "arguments" not in answer:
        problems.append(("decision", "answer with approved=true, arguments={...} (approve "
                         "with edited arguments) or approved=false and a message"))
    return problems


def _argument_problems(tasks: Mapping[str, Callable[..., Any]], tool: str,
                       arguments: Any, schema: Any) -> list[str]:
    if not isinstance(arguments, dict):
        return ["`arguments` must be a mapping of the tool's arguments"]
    fn = tasks.get(tool)
    if fn is None:
        return schema_problems(schema, arguments) if isinstance(schema, dict) else []
    from tether.agents.errors import ToolSchemaError
    from tether.agents.tools import tool_spec

    try:
        problem = tool_spec(fn, tool).check_arguments(arguments)
    except ToolSchemaError as exc:
        return [str(exc)]
    return [problem] if problem else []


def schema_problems(schema: dict[str, Any], arguments: Any, limit: int = 5) -> list[str]:
    """What makes ``arguments`` not match the JSON Schema ``schema``, each naming its place
    (``amount: 'x' is not of type 'number'``); empty when jsonschema is not installed (it
    comes with the providers' extras, which every agent run needs)."""
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
    except ImportError:  # pragma: no cover - installed with the openai/anthropic extras
        return []
    try:
        errors = sorted(Draft202012Validator(schema).iter_errors(arguments),
                        key=lambda e: list(map(str, e.absolute_path)))
    except SchemaError:
        return []
    found = []
    for error in errors[:limit]:
        where = ".".join(str(p) for p in error.absolute_path)
        found.append(f"{where}: {error.message}" if where else error.message)
    return found
