"""The tools of an agent at run time: specs from the plan and the registered tasks, calling
a task tool, and the results a model is given."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from tether.agents.conversation import (
    AssistantMessage,
    Conversation,
    ToolCall,
    ToolResult,
    UserMessage,
)
from tether.agents.tools import ToolSpec, handoff_tool, tool_spec, worker_tool
from tether.compiler.plan import PlanAgent
from tether.runtime.context import UNIT, UnitScope
from tether.runtime.invoke import Bodies, is_async
from tether.runtime.values import to_json


def agent_tools(agent: PlanAgent, tasks: Mapping[str, Callable[..., Any]],
                agents: Mapping[str, PlanAgent]) -> dict[str, ToolSpec]:
    """The tools offered to the model, by declared name: tasks, workers, then handoffs."""
    specs: list[ToolSpec] = []
    for tool in agent.tools:
        if tool.kind == "worker":
            worker = agents[tool.name]
            specs.append(worker_tool(tool.name, _worker_description(worker)))
        else:
            specs.append(tool_spec(tasks[tool.name], tool.name))
    specs.extend(handoff_tool(target) for target in agent.handoffs)
    return {spec.declared_name: spec for spec in specs}


def _worker_description(worker: PlanAgent) -> str | None:
    if worker.instructions and "{{" not in worker.instructions:
        return f"Ask the agent '{worker.id}': {worker.instructions}"[:1024]
    return None


async def call_tool(fn: Callable[..., Any], kwargs: dict[str, Any], scope: UnitScope,
                    bodies: Bodies) -> Any:
    """Call a task function as a tool: sync bodies in a worker thread (the scope and the run
    are copied to it), async ones awaited; ``interrupt()`` inside sees ``scope``."""
    token = UNIT.set(scope)
    try:
        if is_async(fn):
            result = await fn(**kwargs)
        else:
            result = await bodies.call(functools.partial(fn, **kwargs))
        if inspect.isawaitable(result):
            result = await result
    finally:
        UNIT.reset(token)
    return result


def result_text(value: Any, what: str) -> str:
    """A tool's return value as the text a model reads: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    output, _ = to_json(value, what)
    return json.dumps(output, ensure_ascii=False)


def error_result(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(call_id=call.id, tool_name=call.name, content=text, is_error=True)


def did_not_run(call: ToolCall, why: str) -> ToolResult:
    """The result of a call that was never run: the model is told plainly, and may ask
    again (a history with an unanswered call would be refused by every provider)."""
    return error_result(call, f"The tool '{call.name}' did not run: {why}. Call it again if "
                        "it is still needed.")


SIBLING_PAUSED = "the run paused at another tool call of this turn and was resumed there"
INTERRUPTED = "the run stopped before this call finished (a crash, a cancel or a pause)"
HANDED_OVER = "the conversation was handed over to another agent first"


def without_tool_blocks(history: Conversation) -> Conversation:
    """The history with its tool calls and results written as text, for a model offered no
    tools (a handoff target without tools): Anthropic refuses tool blocks in a request that
    declares no tools. The stored history keeps its calls; only the request differs."""
    if not any(isinstance(m, ToolResult) or (isinstance(m, AssistantMessage) and m.tool_calls)
               for m in history):
        return history
    out: list[UserMessage | AssistantMessage | ToolResult] = []
    for message in history:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            asked = "; ".join(f"called {c.name}({json.dumps(dict(c.arguments))})"
                              for c in message.tool_calls)
            out.append(AssistantMessage(text=(message.text + "\n" if message.text else "")
                                        + f"[{asked}]"))
        elif isinstance(message, ToolResult):
            out.append(UserMessage(content=f"[result of {message.tool_name}: "
                                   f"{message.content}]"))
        else:
            out.append(message)
    return Conversation(out)
