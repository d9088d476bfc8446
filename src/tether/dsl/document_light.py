"""The workflow documents validated by pydantic-core alone, for ``tether check``.

Importing pydantic and building the validators of :mod:`tether.dsl.document` is the larger
part of a check's start-up (docs/decisions.md, "Fast start, sixth pass"). pydantic-core can
validate with the core schema pydantic makes from those models, with any class in place of
a model: :mod:`tether.dsl.document_schema` is that schema, generated from
:mod:`tether.dsl.document` (``python -m tether.dsl.document_schema_gen``; a test fails when
it is stale), with the classes of this module in place of the models. Validating with it
gives the same errors (the same list, which :mod:`tether.dsl.validate` maps to diagnostics)
and, for a valid document, objects with the same attributes, ``model_fields_set``,
``model_dump()``, ``kind`` and ``has_default`` as the models' (tests/dsl/test_document_light.py
proves both on every golden file, example and one-character mutation of a set of them).

Only what checks a document uses them: whatever builds a plan, writes a file or answers an
editor validates with the pydantic models. The generated schema records the pydantic-core
version it was made with; with another one installed, :func:`light_validator` gives None and
the document is validated with the models.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from tether.dsl.document_rules import InputDefault, NodeKindOf

if TYPE_CHECKING:
    from pydantic_core import CoreConfig, SchemaValidator


class LightModel:
    """A validated, frozen document object: the attributes pydantic-core sets, and the few
    methods of a pydantic model that the compiler calls."""

    __slots__ = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__",
                 "__pydantic_private__")
    __pydantic_fields_set__: set[str]

    @property
    def model_fields_set(self) -> set[str]:
        """The fields the document gives (a default is not one of them)."""
        return self.__pydantic_fields_set__

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set `{name}`")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"

    def model_dump(self, *, by_alias: bool = False, exclude_unset: bool = False,
                   exclude_none: bool = False) -> dict[str, Any]:
        """The object as plain data, as ``BaseModel.model_dump`` gives it (python mode)."""
        from tether.dsl.document_schema import ALIASES

        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if (exclude_unset and name not in self.__pydantic_fields_set__) or (
                    exclude_none and value is None):
                continue
            key = ALIASES.get(name, name) if by_alias else name
            out[key] = _dump(value, lambda m: m.model_dump(
                by_alias=by_alias, exclude_unset=exclude_unset, exclude_none=exclude_none))
        return out


def _dump(value: Any, model: Callable[[LightModel], dict[str, Any]]) -> Any:
    if isinstance(value, LightModel):
        return model(value)
    if isinstance(value, dict):
        return {k: _dump(v, model) for k, v in value.items()}
    if isinstance(value, list):
        return [_dump(v, model) for v in value]
    return value


# One class per model of tether.dsl.document, with the model's name (pydantic-core names a
# union's branches by it, and tether.dsl.validate reads those names).


class InputSpec(LightModel, InputDefault):
    __slots__ = ()


class NodeSpec(LightModel, NodeKindOf):
    __slots__ = ()


def _light(name: str) -> type[LightModel]:
    return type(name, (LightModel,), {"__slots__": (), "__module__": __name__,
                                      "__qualname__": name})


(RetryPolicy, LoopSpec, ApprovalSpec, ModelRef, ToolCallLimitsSpec, AgentSpec, SwitchSpec,
 ScheduleSpec, WebhookSpec, ManualSpec, TriggersSpec, ConcurrencySpec, WorkflowDoc) = map(
    _light, ("RetryPolicy", "LoopSpec", "ApprovalSpec", "ModelRef", "ToolCallLimitsSpec",
             "AgentSpec", "SwitchSpec", "ScheduleSpec", "WebhookSpec", "ManualSpec",
             "TriggersSpec", "ConcurrencySpec", "WorkflowDoc"))


@functools.cache
def light_validator() -> SchemaValidator | None:
    """The validator of a whole document, or None when the installed pydantic-core is not
    the one the schema was generated with (then validate with the pydantic models)."""
    import pydantic_core

    from tether.dsl import document_schema

    if pydantic_core.__version__ != document_schema.PYDANTIC_CORE_VERSION:
        return None
    return pydantic_core.SchemaValidator(document_schema.SCHEMA,
                                         cast("CoreConfig", document_schema.CONFIG))


__all__ = ["LightModel", "light_validator"]
