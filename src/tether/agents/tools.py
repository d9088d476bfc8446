"""Tools an agent offers a model: from registered task functions, worker agents and handoffs.

A :class:`ToolSpec` is what a model is told about a tool (a name, a description and a JSON
Schema of its parameters) plus what the agent loop needs to call it: the name as written
under ``tools:`` (used in checkpoint ids and ``agent_path``), and a validator for the
arguments a model sends.

Providers accept only ``[A-Za-z0-9_-]`` in tool names (at most 64 characters for OpenAI), so
a tool is declared to the model under :func:`declared_name` of its name: ``billing.lookup``
becomes ``billing_lookup``. Two names that become the same declared name clash
(:func:`find_clashes`), which the compiler reports.

The schema comes from the function's type hints through pydantic (a model created from the
signature), its description from the docstring's first paragraph, and each parameter's
description from the docstring's Google-style ``Args:`` section.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)

from tether.agents.docstrings import parse_docstring
from tether.agents.errors import ToolArgumentsError, ToolSchemaError

MAX_TOOL_NAME = 64
"""The longest tool name every provider accepts (OpenAI's limit; Anthropic allows 128)."""

HANDOFF_PREFIX = "transfer_to_"

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


class ToolKind(StrEnum):
    """What calling a tool does: run a task, ask a worker agent, or hand the conversation
    over to another agent."""

    TASK = "task"
    WORKER = "worker"
    HANDOFF = "handoff"


ToolKindName = Literal["task", "worker", "handoff"]


@dataclass(frozen=True)
class ToolSpec:
    """One tool as a model sees it, and as the agent loop calls it.

    Attributes:
        name_as_written: the name under ``tools:`` (a task name or an agent node id), or
            ``transfer_to_<node>`` for a handoff; checkpoint ids use it.
        declared_name: the name the model sees and calls (see :func:`declared_name`).
        description: what the tool does, for the model.
        parameters: the JSON Schema (an object schema) of the arguments.
        kind: a task, a worker agent or a handoff.
        target: the agent node a worker tool or a handoff leads to.
    """

    name_as_written: str
    declared_name: str
    description: str
    parameters: dict[str, Any]
    kind: ToolKind = ToolKind.TASK
    target: str | None = None
    _arguments: type[BaseModel] | None = field(default=None, repr=False, compare=False)
    _parameter_names: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def bind(self, arguments: object) -> dict[str, Any]:
        """The keyword arguments to call the tool with, from what the model sent.

        Values are validated against the schema and converted to the annotated Python types
        (a nested pydantic model becomes an instance of it). Raises
        :class:`ToolArgumentsError`, whose ``text`` is written for the model.
        """
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(self.declared_name, ["the arguments must be a JSON object"])
        if self._arguments is None:
            return dict(arguments)
        try:
            validated = self._arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentsError(self.declared_name, _problems(exc)) from exc
        return {self._parameter_names[name]: getattr(validated, name)
                for name in self._parameter_names if name in validated.model_fields_set}

    def check_arguments(self, arguments: object) -> str | None:
        """``None`` when ``arguments`` are valid, else the error text for the model."""
        try:
            self.bind(arguments)
        except ToolArgumentsError as exc:
            return exc.text
        return None


@dataclass(frozen=True)
class NameClash:
    """Several tool names that are declared to the model under the same name."""

    declared_name: str
    names: tuple[str, ...]


def declared_name(name: str) -> str:
    """The name a tool is declared under: every character outside ``[A-Za-z0-9_-]`` replaced
    by ``_``, cut to 64 characters (``billing.lookup`` -> ``billing_lookup``)."""
    if not name:
        raise ToolSchemaError(name, "a tool needs a name")
    return _NOT_ALLOWED.sub("_", name)[:MAX_TOOL_NAME]


def find_clashes(names: Iterable[str]) -> tuple[NameClash, ...]:
    """Every group of different names that share a declared name, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for name in names:
        group = groups.setdefault(declared_name(name), [])
        if name not in group:
            group.append(name)
    return tuple(NameClash(declared, tuple(group))
                 for declared, group in groups.items() if len(group) > 1)


def tool_spec(fn: Callable[..., Any], name: str | None = None) -> ToolSpec:
    """The tool spec of a task function (sync or async) registered as ``name``.

    Every parameter needs a type annotation that has a JSON Schema (pydantic's: builtins,
    ``Optional``, ``Literal``, enums, pydantic models, dataclasses, ``TypedDict``...).
    ``*args``/``**kwargs``, positional-only parameters, a missing annotation or a type with
    no JSON Schema raise :class:`ToolSchemaError` naming the tool and the parameter.
    """
    tool = name or getattr(fn, "__name__", "") or repr(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolSchemaError(tool, f"its signature cannot be read: {exc}") from exc
    hints = _type_hints(tool, fn)
    doc = parse_docstring(inspect.getdoc(inspect.unwrap(fn)))
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    for index, parameter in enumerate(signature.parameters.values()):
        annotation = _parameter_type(tool, parameter, hints)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        described = Field(default, alias=parameter.name,
                          description=doc.parameters.get(parameter.name))
        fields[f"p{index}"] = (annotation, described)
        names[f"p{index}"] = parameter.name
    return _spec(tool, doc.summary, fields, names, ToolKind.TASK, None)


def worker_tool(node_id: str, description: str | None = None) -> ToolSpec:
    """The tool through which a supervisor asks the worker agent ``node_id`` for something:
    one required string parameter, ``request``, which becomes the worker's prompt."""
    fields = {"p0": (str, Field(alias="request",
                                description="What to ask the agent, with everything it needs "
                                            "to know."))}
    text = description or f"Ask the agent '{node_id}' to do something and get its answer."
    return _spec(node_id, text, fields, {"p0": "request"}, ToolKind.WORKER, node_id)


def handoff_tool(node_id: str, description: str | None = None) -> ToolSpec:
    """The tool through which an agent hands the conversation over to the agent ``node_id``:
    named ``transfer_to_<node_id>``, with one optional parameter, ``reason``."""
    fields = {"p0": (str | None, Field(None, alias="reason",
                                       description="Why the conversation is handed over."))}
    text = description or f"Hand the conversation over to the agent '{node_id}'."
    name = HANDOFF_PREFIX + node_id
    return _spec(name, text, fields, {"p0": "reason"}, ToolKind.HANDOFF, node_id)


def _spec(tool: str, description: str, fields: dict[str, Any], names: dict[str, str],
          kind: ToolKind, target: str | None) -> ToolSpec:
    declared = declared_name(tool)
    model = create_model(
        f"{declared}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    try:
        schema = model.model_json_schema(by_alias=True)
    except PydanticUserError as exc:
        raise ToolSchemaError(tool, _first_line(exc)) from exc
    return ToolSpec(tool, declared, description, _object_schema(schema), kind, target,
                    model, names)


def _type_hints(tool: str, fn: Callable[..., Any]) -> dict[str, Any]:
    target = inspect.unwrap(fn)
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004 - a callable object
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError, TypeError...: any hint that cannot be resolved
        raise ToolSchemaError(tool, f"its type hints cannot be resolved: {exc}") from exc


def _parameter_type(tool: str, parameter: inspect.Parameter, hints: dict[str, Any]) -> Any:
    name = parameter.name
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
        star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
        raise ToolSchemaError(tool, f"{star}{name} cannot be described to a model: declare "
                                    "each parameter by name", parameter=name)
    if parameter.kind is parameter.POSITIONAL_ONLY:
        raise ToolSchemaError(tool, "positional-only parameters cannot be passed by name",
                              parameter=name)
    if name not in hints:
        raise ToolSchemaError(tool, "has no type annotation: a model needs to know its type",
                              parameter=name)
    annotation = hints[name]
    try:
        TypeAdapter(annotation).json_schema()
    except PydanticUserError as exc:
        raise ToolSchemaError(tool, _no_schema(annotation, exc), parameter=name) from exc
    return annotation


def _no_schema(annotation: Any, exc: PydanticUserError) -> str:
    if exc.code in ("schema-for-unknown-type", "invalid-for-json-schema"):
        return (f"its type {_type_name(annotation)} has no JSON Schema; use JSON types (str, "
                "int, float, bool, list, dict), Optional, Literal, enums, pydantic models, "
                "dataclasses or TypedDicts")
    return f"its type {_type_name(annotation)} has no JSON Schema: {_first_line(exc)}"


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]


def _problems(exc: ValidationError) -> list[str]:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    return problems


# Keys of a JSON Schema whose values are schemas, or maps / lists of schemas. Only these are
# walked when titles are removed, so a default value or an enum member is never changed.
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames", "if",
                  "then", "else", "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")


def _without_titles(schema: Any) -> Any:
    """``schema`` without pydantic's generated ``title`` keys (they cost tokens, say nothing)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _without_titles(item) for name, item in value.items()}
        elif key in _SCHEMA_VALUES:
            value = _without_titles(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [_without_titles(item) for item in value]
        out[key] = value
    return out


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The parameters schema in the order models read it: type, properties, required, ..."""
    clean = _without_titles(schema)
    out: dict[str, Any] = {"type": "object", "properties": clean.get("properties", {})}
    if clean.get("required"):
        out["required"] = clean["required"]
    out["additionalProperties"] = False
    if "$defs" in clean:
        out["$defs"] = clean["$defs"]
    return out
