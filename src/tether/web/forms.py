"""Approval forms: the fields an approval's ``form`` declares, read from a browser's form
post, and the answer an Approve or Reject makes of them.

Validation is :func:`tether.runtime.invoke.check_values`, the very function ``tether resume``
and the approval node use; this module only turns the text a browser sends into JSON values
by the declared type (a text that does not parse is passed on as text, so ``check_values``
reports it as the wrong type, in its own words) and attaches each problem to its field.

``approved``: when the form declares a boolean ``approved`` (or the approval declares no form,
or the pause is a task's or a tool's ``interrupt()``), the Approve and Reject buttons set it;
a form without it has a single Submit button.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tether.compiler.plan import PlanInput
from tether.runtime.invoke import check_values

APPROVED = "approved"
_INTEGER = re.compile(r"^[+-]?\d{1,30}$")
_NUMBER = re.compile(r"^[+-]?(\d{1,30}(\.\d{0,30})?|\.\d{1,30})([eE][+-]?\d{1,3})?$")


class Decision(StrEnum):
    """The button pressed."""

    APPROVE = "approve"
    REJECT = "reject"
    SUBMIT = "submit"
    EDIT = "edit"  # a tool approval: approve with edited arguments (tool_form.py)


@dataclass(frozen=True)
class FormField:
    """One field as the page draws it."""

    name: str
    type: str
    required: bool
    default: Any
    description: str | None
    enum: tuple[Any, ...] | None = None

    @property
    def widget(self) -> str:
        if self.enum:
            return "choice"
        match self.type:
            case "boolean":
                return "boolean"
            case "number" | "integer":
                return "number"
            case "object" | "array":
                return "json"
            case _:
                return "text"

    @property
    def shown_default(self) -> str:
        """The default as the input's initial text."""
        if self.default is None:
            return ""
        return shown(self.default)

    @property
    def choices(self) -> list[str]:
        """The allowed values as the texts a choice posts (an ``enum`` field)."""
        return [shown(v) for v in self.enum or ()]


def shown(value: Any) -> str:
    """A value as the text of an input (strings as they are, the rest as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Form:
    """An approval's form (None: the approval declares none, any answer goes)."""

    specs: tuple[PlanInput, ...] | None

    is_tool = False  # an agent's tool approval has its own form (tool_form.py)

    @property
    def decided_by_buttons(self) -> bool:
        """Whether Approve / Reject set ``approved``."""
        if self.specs is None:
            return True
        return any(s.name == APPROVED and s.type == "boolean" for s in self.specs)

    @property
    def fields(self) -> list[FormField]:
        """The fields drawn as inputs (``approved`` is the buttons' when they set it)."""
        buttons = self.decided_by_buttons
        return [FormField(s.name, s.type, s.required, s.default, s.description, s.enum)
                for s in self.specs or () if not (buttons and s.name == APPROVED)]

    def answer(self, decision: Decision | None, values: Mapping[str, Any],
               ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The answer for ``values`` and the button, and the problems by field (empty when
        the answer is valid: then it is what the approval node will receive)."""
        answer = dict(values)
        if decision in (Decision.APPROVE, Decision.REJECT) and self.decided_by_buttons:
            answer[APPROVED] = decision == Decision.APPROVE
        if self.specs is None:
            return answer, {}
        _, problems = check_values(self.specs, answer, "field")
        by_field: dict[str, list[str]] = {}
        for problem in problems:
            by_field.setdefault(problem.field, []).append(str(problem))
        return answer, by_field

    def read_post(self, posted: Mapping[str, str]) -> dict[str, Any]:
        """The values of a browser's form post (``field.<name>`` inputs), typed by the form.
        An empty input is a value not given (so the default applies, or it is missing)."""
        values: dict[str, Any] = {}
        for field in self.fields:
            raw = posted.get(f"field.{field.name}")
            if raw is None or raw == "":
                continue
            values[field.name] = typed(field.type, raw)
        return values


def typed(type_name: str, raw: str) -> Any:
    """``raw`` as a value of ``type_name`` when it reads as one; otherwise ``raw`` itself."""
    text = raw.strip()
    match type_name:
        case "integer" if _INTEGER.match(text):
            return int(text)
        case "number" if _INTEGER.match(text):
            return int(text)
        case "number" if _NUMBER.match(text):
            return float(text)
        case "boolean" if text in ("true", "false"):
            return text == "true"
        case "object" | "array":
            try:
                return json.loads(text)
            except (ValueError, RecursionError):
                return raw
        case _:
            return raw
