"""What the two wire protocols have in common: the shape of a refusal, and the protocol each
endpoint implements (:class:`Wire`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tether.agents.conversation import Usage
from tether.testing.script import ScriptedError, ScriptedReply, WireProtocol


@dataclass(frozen=True)
class WireError:
    """An HTTP error answer: status, JSON body in the provider's shape, extra headers."""

    status: int
    body: dict[str, Any]
    message: str
    headers: dict[str, str] = field(default_factory=dict)


class Wire(Protocol):
    """One provider's wire protocol, as the scripted server speaks it."""

    name: WireProtocol
    path: str

    def check_request(self, body: Any, request_id: str) -> WireError | None:
        """The 400 the real API answers to ``body``, or ``None`` if it would accept it."""
        ...

    def declared_tools(self, body: Any) -> list[str]:
        """The names of the tools the request declares."""
        ...

    def reply(self, step: ScriptedReply, body: Any, new_id: Callable[[], str],
              request_id: str) -> dict[str, Any]:
        """The response body for a scripted reply; ``new_id`` numbers tool calls."""
        ...

    def error(self, status: int, message: str, request_id: str) -> WireError:
        """An error answer with the provider's type for ``status``."""
        ...

    def scripted_error(self, step: ScriptedError, request_id: str) -> WireError:
        """The error answer of a scripted error step (with its ``retry-after``)."""
        ...


def retry_headers(step: ScriptedError) -> dict[str, str]:
    """The ``retry-after`` header of a scripted error, if it has one."""
    if step.retry_after is None:
        return {}
    return {"retry-after": f"{step.retry_after:g}"}


def estimated_usage(step: ScriptedReply, prompt: Any) -> Usage:
    """The usage a step declares, or about one token per four characters of the prompt and
    of the reply (deterministic, never zero)."""
    if step.usage is not None:
        return step.usage
    reply = step.text + "".join(call.name + json.dumps(call.arguments)
                                for call in step.tool_calls)
    return Usage(input_tokens=max(1, math.ceil(len(json.dumps(prompt)) / 4)),
                 output_tokens=max(1, math.ceil(len(reply) / 4)))


def undeclared_tool(step: ScriptedReply, declared: list[str]) -> str | None:
    """The message for a scripted tool call the request did not declare: a real model only
    calls the tools it is given, so this is a test's mistake (or the client's)."""
    for call in step.tool_calls:
        if call.name not in declared:
            offered = ", ".join(declared) if declared else "no tools"
            return (f"tether.testing: the scripted reply calls the tool '{call.name}', which "
                    f"this request does not declare (it declares {offered})")
    return None


STREAM_REFUSED = ("tether.testing: the scripted model server does not stream; "
                  "send the request with stream=false")
