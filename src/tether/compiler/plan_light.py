"""Stored plans read by pydantic-core alone, for ``tether resume`` in place.

Importing pydantic and building the plan models' validators cost the in-place resume about
0.38 G instructions of its 1.9 G (docs/decisions.md, "Fast start, seventh pass"). As the
fast check does for documents (:mod:`tether.dsl.document_light`), pydantic-core validates the
plan's JSON with the core schema pydantic makes from :mod:`tether.compiler.plan`, with the
classes of this module in place of the models: :mod:`tether.compiler.plan_schema`, generated
by ``python -m tether.compiler.plan_schema_gen`` (a test fails when it is stale). The same
schema serialises them (``model_dump``, ``to_json``, the fingerprint), with the same
serialiser functions (:mod:`tether.compiler.plan_rules`).

A light object has the model's fields, ``model_fields_set``, ``model_dump``,
``model_dump_json`` and the methods the runtime calls (mixed in from
:mod:`tether.compiler.plan_rules`, the models' own); the runtime tells nodes apart by
``kind``, never by class, so it runs a light plan as it runs a model plan (proved run by run,
checkpoint by checkpoint, in tests/compiler/test_plan_light.py). Nothing converts a light
plan to a model: who reads a plan light (:func:`read_light`) keeps it light.

The generated schema records the pydantic-core version it was made with; with another one
installed :func:`read_light` reads the plan with the models (``Plan.from_json``).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, cast

from tether.compiler.plan_rules import (
    NODE_EXCLUDE,
    SEMANTIC_EXCLUDE,
    InvocationRules,
    PlanRules,
    RetryRules,
    SwitchRules,
)
from tether.dsl.document_light import LightModel

if TYPE_CHECKING:
    from pydantic_core import SchemaSerializer, SchemaValidator

    from tether.compiler import plan as models


class LightPlanModel(LightModel):
    """A plan object read by pydantic-core: :class:`LightModel`, serialised by its schema."""

    __slots__ = ()

    def model_dump(self, *, mode: str = "python", by_alias: bool = False,
                   exclude: Any = None, exclude_unset: bool = False,
                   exclude_none: bool = False) -> dict[str, Any]:
        """The object as plain data, as ``BaseModel.model_dump`` gives it."""
        data = _serializer(type(self).__name__).to_python(
            self, mode=mode, by_alias=by_alias, exclude=exclude, exclude_unset=exclude_unset,
            exclude_none=exclude_none)
        return cast("dict[str, Any]", data)

    def model_dump_json(self) -> str:
        """The object as JSON text, as ``BaseModel.model_dump_json()`` gives it."""
        return _serializer(type(self).__name__).to_json(self).decode()


def made(cls: type[LightPlanModel], fields: dict[str, Any],
         fields_set: list[str]) -> LightPlanModel:
    """An object of ``cls`` made without validation (a default of the schema: pydantic's is
    ``model_construct``)."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", dict(fields))
    object.__setattr__(obj, "__pydantic_fields_set__", set(fields_set))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def _light(name: str, *rules: type) -> type[LightPlanModel]:
    return type(name, (LightPlanModel, *rules), {"__slots__": (), "__module__": __name__,
                                                 "__qualname__": name})


# One class per model of tether.compiler.plan, with the model's name and its rules.
(PlanInput, PlanLoop, PlanApproval, PlanSubworkflow, ApprovalNode, PlanModelRef, PlanTool,
 PlanToolCalls, PlanAgent, AgentNode, SwitchNode, NoopNode, FailNode, SleepNode,
 SleepUntilNode, PlanSchedule, PlanWebhook, PlanManual, PlanConcurrency, SourceRef) = (
    _light(name) for name in (
        "PlanInput", "PlanLoop", "PlanApproval", "PlanSubworkflow", "ApprovalNode",
        "PlanModelRef", "PlanTool", "PlanToolCalls", "PlanAgent", "AgentNode", "SwitchNode",
        "NoopNode", "FailNode", "SleepNode", "SleepUntilNode", "PlanSchedule", "PlanWebhook",
        "PlanManual", "PlanConcurrency", "SourceRef"))
PlanRetry = _light("PlanRetry", RetryRules)
PlanSwitch = _light("PlanSwitch", SwitchRules)
TaskNode = _light("TaskNode", InvocationRules)
WorkflowNode = _light("WorkflowNode", InvocationRules)


class Plan(LightPlanModel, PlanRules):
    """A stored plan, read light."""

    __slots__ = ()

    def to_json(self) -> str:
        """The plan as JSON text, as ``tether.compiler.plan.Plan.to_json`` writes it."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2,
                          ensure_ascii=False) + "\n"

    def content_fingerprint(self) -> str:
        """What :func:`tether.compiler.plan.fingerprint_of` gives for the model plan."""
        from tether.compiler.plan_rules import fingerprint_text

        return fingerprint_text(self.semantic)

    @functools.cached_property
    def semantic(self) -> dict[str, Any]:
        """What :func:`tether.compiler.plan.semantic` gives for the model plan, by pydantic's
        serialisers (no fast path), in one call for the plan and its nodes; each sub-plan's
        is computed once, and kept, since the plan's check asks each sub-plan for its
        fingerprint."""
        from tether.kinds import NodeKind

        data = self.model_dump(mode="json", by_alias=True, exclude=_SEMANTIC)
        for node, raw in zip(self.nodes, data["nodes"], strict=True):
            if node.kind is NodeKind.WORKFLOW:
                sub: Plan = node.workflow.plan  # type: ignore[assignment]
                raw["workflow"]["plan"] = sub.semantic
        return data


_SEMANTIC: Any = {**{key: True for key in SEMANTIC_EXCLUDE if key != "nodes"},
                  "nodes": {"__all__": NODE_EXCLUDE}}
"""What the fingerprint leaves out (``plan_rules.SEMANTIC_EXCLUDE``, the nodes' too)."""


@functools.cache
def _validator() -> SchemaValidator | None:
    import pydantic_core

    from tether.compiler import plan_schema

    if pydantic_core.__version__ != plan_schema.PYDANTIC_CORE_VERSION:
        return None
    return pydantic_core.SchemaValidator(plan_schema.SCHEMA)


@functools.cache
def _serializer(name: str) -> SchemaSerializer:
    """The serialiser of the light class ``name`` (its schema, with the plan's definitions)."""
    import pydantic_core

    from tether.compiler import plan_schema

    schema = {"type": "definitions", "schema": getattr(plan_schema, "_" + name),
              "definitions": plan_schema.SCHEMA["definitions"]}
    return pydantic_core.SchemaSerializer(cast("Any", schema))


def available() -> bool:
    """Whether plans can be read light (the installed pydantic-core is the schema's)."""
    return _validator() is not None


def read_light(text: str | bytes) -> models.Plan:
    """A plan's JSON read as ``Plan.from_json`` reads it (the same checks, the same errors),
    into light objects; into the models when :func:`available` says no.

    Typed as the model it stands in for (as :mod:`tether.dsl.document_light`'s documents
    are): the runtime reads fields and calls the shared rules only.

    Raises:
        PlanError: As ``Plan.from_json``.
    """
    validator = _validator()
    if validator is None:
        from tether.compiler.plan import Plan as ModelPlan

        return ModelPlan.from_json(text)
    from tether.compiler.plan_rules import checked

    return checked(lambda: validator.validate_json(text))


__all__ = ["LightPlanModel", "Plan", "available", "made", "read_light"]
