"""What a scripted model answers, and what it was asked.

A script is a queue of steps, used one per model request, in order, whatever the wire
protocol: a :class:`ScriptedReply` (text and/or tool calls, token usage) or a
:class:`ScriptedError` (an HTTP error such as 429 with ``retry_after``, or 500). Any step may
wait ``delay`` seconds before answering, which is how a test makes a client time out. A step
may also be a function of the request (:data:`Responder`).

A request the real API would refuse (a broken history, a missing ``model``...) is answered
400 without using a step: the script only moves when a "model" would have been reached.

In a script file (``python -m tether.testing serve --script FILE``) the steps are JSON: a
list, or ``{"replies": [...]}``, of ``{"text": ..., "tool_calls": [{"name", "arguments",
"id"?}], "usage": {"input_tokens", "output_tokens"}, "delay": ...}`` and
``{"error": 429, "message": ..., "retry_after": 2, "delay": ...}``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from tether.agents.conversation import StopReason, Usage
from tether.errors import DefinitionError

WireProtocol = Literal["openai", "anthropic"]


class ScriptError(DefinitionError):
    """A script (file or data) that is not a list of valid steps."""


class _Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True,
                              validate_by_alias=True)


class ScriptedToolCall(_Step):
    """A tool call in a scripted reply; ``id`` is generated (``call_N`` / ``toolu_N``) when
    not given."""

    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    id: str | None = None


class ScriptedReply(_Step):
    """A model reply: text, tool calls or both; ``usage`` is estimated from the sizes of the
    request and the reply when not given."""

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    delay: Annotated[float, Field(ge=0)] = 0.0


class ScriptedError(_Step):
    """An HTTP error in the provider's shape (``status`` is written ``"error"`` in JSON)."""

    status: Annotated[int, Field(ge=400, le=599, alias="error")]
    message: str | None = None
    retry_after: Annotated[float, Field(ge=0)] | None = None
    delay: Annotated[float, Field(ge=0)] = 0.0


Step = ScriptedReply | ScriptedError


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and how it answered.

    ``step`` is the script position that answered it (``None`` when the request was refused
    before reaching the script); ``error`` is the message of a 4xx/5xx answer.
    """

    index: int
    protocol: WireProtocol
    path: str
    body: Any
    status: int
    step: int | None = None
    error: str | None = None

    def to_data(self) -> dict[str, Any]:
        """The request as plain JSON data."""
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RecordedRequest:
        """Read a request back from :meth:`to_data`'s output."""
        return cls(**data)


Responder = Callable[[RecordedRequest], Step]
"""A function that picks the step answering a request (``status`` is not yet known: 0)."""


def step_from_data(data: Any) -> Step:
    """A step from its JSON form (see the module docstring)."""
    if not isinstance(data, dict):
        raise ScriptError(f"a step must be an object, not {data!r}")
    kind: type[Step] = ScriptedError if "error" in data else ScriptedReply
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ScriptError(f"invalid step {json.dumps(data)}: {where}: {error['msg']}") from exc


def step_to_data(step: Step) -> dict[str, Any]:
    """The JSON form of a step."""
    return step.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def load_script(source: str | Path | Sequence[Any] | dict[str, Any]) -> tuple[Step, ...]:
    """Steps from a script file's path, or from its parsed JSON."""
    data: Any = source
    if isinstance(source, str | Path):
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ScriptError(f"cannot read script {source}: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("replies")
    if not isinstance(data, list):
        raise ScriptError("a script is a list of steps, or {\"replies\": [...]}")
    return tuple(step_from_data(item) for item in data)


class Script:
    """The steps still to answer with, and the position reached; safe across threads."""

    def __init__(self, steps: Iterable[Step | Responder] = (),
                 respond: Responder | None = None) -> None:
        self._steps: list[Step | Responder] = list(steps)
        self._respond = respond
        self._position = 0
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        """How many steps have answered requests."""
        with self._lock:
            return self._position

    @property
    def remaining(self) -> int:
        """How many queued steps are left (a ``respond`` function is not counted)."""
        with self._lock:
            return max(0, len(self._steps) - self._position)

    def extend(self, steps: Iterable[Step | Responder]) -> None:
        """Queue more steps after the current ones."""
        with self._lock:
            self._steps.extend(steps)

    def peek(self, request: RecordedRequest) -> tuple[int, Step] | None:
        """The position and step that would answer ``request``; ``None`` when the script is
        used up. Nothing moves until :meth:`advance` (the caller holds its own lock across
        both, so two requests never get the same step)."""
        with self._lock:
            position = self._position
            item = self._steps[position] if position < len(self._steps) else self._respond
        if item is None:
            return None
        step = item(request) if callable(item) else item
        if not isinstance(step, ScriptedReply | ScriptedError):
            raise ScriptError(f"a responder returned {step!r}, not a step")
        return position, step

    def advance(self, position: int) -> None:
        """Mark the step at ``position`` as used (a no-op if another request used it)."""
        with self._lock:
            if self._position == position:
                self._position += 1
