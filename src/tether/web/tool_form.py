"""The answer form of an agent's tool approval: approve, approve with edited arguments, or
deny with a message to the model.

A tool listed under an agent's ``approve_tools`` pauses before each call with the frozen
context ``{call_id, tool, tool_name, arguments, parameters}`` (``parameters``: the tool's JSON
Schema). The console answers it with exactly the values ``tether resume --value`` takes:

===========================  =======================================================
button (``decision``)        answer recorded
===========================  =======================================================
``approve``                  ``{"approved": true}`` (with ``values.arguments`` from the
                             API: approved with those arguments)
``edit``                     ``{"arguments": {...}}``: approved with edited arguments
``reject``                   ``{"approved": false, "message": "..."}``: the message is the
                             call's result for the model (optional)
none (the API)               ``values`` as they are, as ``tether resume --value``
===========================  =======================================================

Every answer is checked by :func:`tether.runtime.agent.answers.field_problems`, the check the
runtime makes before it claims a pause: edited arguments must match the tool's schema, and the
problems are shown on the form, nothing recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tether.runtime.agent.answers import field_problems
from tether.stores.records import PendingInterrupt
from tether.web.forms import Decision, FormField

MAX_REASONING = 20_000


@dataclass(frozen=True)
class ToolForm:
    """The form of one tool approval (see the module docstring)."""

    pending: PendingInterrupt
    reasoning: str | None = None

    is_tool = True
    decided_by_buttons = True

    @property
    def fields(self) -> list[FormField]:
        """No generic fields: the page draws the tool's own actions."""
        return []

    @property
    def tool(self) -> str:
        return str(self.pending.context.get("tool", ""))

    @property
    def arguments(self) -> Any:
        return self.pending.context.get("arguments")

    @property
    def arguments_json(self) -> str:
        """The arguments as the edit box starts with them."""
        return json.dumps(self.arguments, indent=2, ensure_ascii=False)

    @property
    def parameters(self) -> Any:
        """The tool's JSON Schema as frozen with the pause (None for older pauses)."""
        return self.pending.context.get("parameters")

    def read_post(self, posted: Mapping[str, str]) -> dict[str, Any]:
        """The edited arguments (JSON when they parse, else the text, which the check
        refuses) and the message to the model, from a browser's post."""
        values: dict[str, Any] = {}
        raw = posted.get("field.arguments")
        if raw is not None and raw.strip():
            try:
                values["arguments"] = json.loads(raw)
            except (ValueError, RecursionError):
                values["arguments"] = raw
        message = (posted.get("field.message") or "").strip()
        if message:
            values["message"] = message
        return values

    def answer(self, decision: Decision | None, values: Mapping[str, Any],
               ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The answer for the button and ``values``, and the problems by field (empty:
        the answer is what the agent loop will receive)."""
        answer = self._answer(decision, values)
        problems: dict[str, list[str]] = {}
        if decision == Decision.EDIT and "arguments" not in values:
            problems["arguments"] = ["give the edited arguments, a JSON object"]
        elif isinstance(answer.get("arguments"), str):
            problems["arguments"] = ["the arguments are not JSON: give a JSON object like "
                                     + json.dumps(self.arguments, ensure_ascii=False)[:200]]
        else:
            for name, text in field_problems({}, self.pending, answer):
                problems.setdefault(name, []).append(text)
        return answer, problems

    @staticmethod
    def _answer(decision: Decision | None, values: Mapping[str, Any]) -> dict[str, Any]:
        match decision:
            case Decision.APPROVE:
                edited = {"arguments": values["arguments"]} if "arguments" in values else {}
                return {"approved": True, **edited}
            case Decision.EDIT:
                return {"arguments": values.get("arguments")}
            case Decision.REJECT:
                message = values.get("message")
                return {"approved": False, **({"message": message} if message else {})}
            case Decision.SUBMIT | None:
                return dict(values)


def reasoning_of(snapshot: Any, call_id: str) -> str | None:
    """The text the model wrote with the tool call ``call_id`` (its reasoning, if any), found
    in the agent's stored conversation wherever in the run's state it is nested."""
    for message in _messages(snapshot):
        calls = message.get("tool_calls") or ()
        if any(isinstance(c, dict) and c.get("id") == call_id for c in calls):
            text = message.get("text")
            return text[:MAX_REASONING] if isinstance(text, str) and text.strip() else None
    return None


def _messages(data: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("role") == "assistant":
                found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found
