"""What the plan's classes do beyond holding fields, without pydantic.

The plan is read two ways: by the pydantic models of :mod:`tether.compiler.plan` (compile,
submit, run, the workers) and, for ``tether resume`` in place, by pydantic-core alone into the
light classes of :mod:`tether.compiler.plan_light` (docs/decisions.md, "Fast start, seventh
pass"). Both mix in the classes below and serialise with the functions below, so the two
cannot read, answer or write a plan differently: the serialisers (which keys a plan's JSON
leaves out, so fingerprints of earlier releases hold), the methods the runtime calls
(``delay``, ``chosen``, ``fans_out``) and the plan's indexes (``by_id``, ``dependents``,
``gates``, ...). Node classes are told apart by ``kind``, never by class, for the same reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from tether.compiler import plan_shape
from tether.errors import PlanError
from tether.kinds import NodeKind

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanAgent, PlanNode, PlanSwitch, PlanToolCalls

Handler = Callable[[Any], dict[str, Any]]

PLAN_FORMAT = 1

DEFAULT_STRATEGY: Final = "exponential"
"""The retry strategy left out of a plan's JSON (plans of release 0.1 have no such key)."""

TOOL_CALLS_PER_TURN = 64
"""The most tool calls one model reply may ask for when the agent does not say."""


# -- serialisers (``model_serializer(mode="wrap")`` of the models, and of the light schema) --


def without_absent_enum(self: Any, handler: Handler) -> dict[str, Any]:
    """An input: ``enum`` left out when not declared, so plans of earlier releases keep their
    fingerprints."""
    data = handler(self)
    if self.enum is None:
        data.pop("enum", None)
    return data


def without_default_strategy(self: Any, handler: Handler) -> dict[str, Any]:
    """A retry policy: the default strategy left out (fingerprints of earlier releases)."""
    data = handler(self)
    if self.strategy == DEFAULT_STRATEGY:
        data.pop("strategy", None)
    return data


def without_timeout(self: Any, handler: Handler) -> dict[str, Any]:
    """An approval: ``timeout`` and ``on_timeout`` left out without a timeout."""
    data = handler(self)
    if self.timeout is None:
        data.pop("timeout", None)
        data.pop("on_timeout", None)
    return data


def without_default_limits(self: Any, handler: Handler) -> dict[str, Any]:
    """An agent: ``max_tool_calls`` left out at its default."""
    data = handler(self)
    if is_default_limits(self.max_tool_calls):
        data.pop("max_tool_calls", None)
    return data


def is_default_limits(limits: PlanToolCalls) -> bool:
    """Whether an agent's bounds are the default ones (what ``== PlanToolCalls()`` says)."""
    return limits.per_turn == TOOL_CALLS_PER_TURN and limits.per_run is None


def without_empty_secrets(self: Any, handler: Handler) -> dict[str, Any]:
    """A plan: what it lacks left out, so plans without it keep the JSON (and so the
    fingerprint) of earlier releases."""
    data = handler(self)
    if not self.secrets:
        data.pop("secrets", None)
    for key in ("schedule", "webhook", "manual", "concurrency"):
        if getattr(self, key) is None:
            data.pop(key, None)
    if not self.agents:
        data.pop("agents", None)
    return data


def write_format_1(self: Any, handler: Handler, info: Any) -> dict[str, Any]:
    """A node, in the shape of plan format 1 (:func:`tether.compiler.plan_shape.add_absent`)."""
    kind: NodeKind = self.kind
    return plan_shape.add_absent(kind, handler(self), info)


def read_format_1(kind: NodeKind) -> Callable[[Any], Any]:
    """The before-validator of a node of ``kind``: format 1's neutral keys dropped."""
    return functools.partial(plan_shape.drop_absent, kind)


# -- reading and fingerprinting -----------------------------------------------------------


def checked(validate: Callable[[], Plan]) -> Plan:
    """The plan ``validate`` reads from JSON, checked as the compiler would have made it
    (``Plan.from_json``'s body, for the models and the light classes alike).

    Raises:
        PlanError: The text is not a plan, or its graph or settings are not valid
            (:func:`~tether.compiler.plan_check.check_plan`), or its fingerprint does not
            match.
    """
    from pydantic_core import ValidationError

    from tether.compiler.plan_check import check_plan

    try:
        plan = validate()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PlanError(f"not a tether plan: {where}: {first['msg']}") from exc
    except RecursionError as exc:
        raise PlanError("not a tether plan: nested too deeply") from exc
    if plan.tether_plan != PLAN_FORMAT:
        raise PlanError(f"unsupported plan format {plan.tether_plan}")
    check_plan(plan)
    if plan.fingerprint != plan.content_fingerprint():
        raise PlanError("the plan's fingerprint does not match its content (edited by hand?)")
    return plan


SEMANTIC_EXCLUDE: Any = {"source_map": True, "fingerprint": True, "nodes": True,
                         "manual": True}
"""What a plan's fingerprint leaves out of its dump (its nodes are dumped one by one).
``manual`` says who may start runs by hand, not how a run executes: a workflow gaining or
losing ``on: manual`` keeps its fingerprint (its stored runs stay matched to the file)."""
NODE_EXCLUDE: Any = {"workflow": {"plan": True}}
"""What a node's dump leaves out for the fingerprint (a sub-plan's semantic part stands in)."""


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def fingerprint_text(semantic: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a plan's semantic part."""
    return hashlib.sha256(canonical_json(semantic).encode()).hexdigest()


def renames(plan: Plan) -> dict[str, str]:
    """The ids ``plan`` renamed (``renamed_from``), old -> new."""
    return {old: node.id for node in plan.nodes for old in node.renamed_from
            if old not in plan.by_id}


# -- methods ---------------------------------------------------------------------------------


class RetryRules:
    """A retry policy's delay (mixed into :class:`~tether.compiler.plan.PlanRetry`)."""

    __slots__ = ()
    if TYPE_CHECKING:
        backoff: float
        strategy: str

    def delay(self, attempt: int) -> float:
        """Seconds to wait after attempt number ``attempt`` (1-based) before the next."""
        if self.strategy == "fixed":
            return self.backoff
        return float(self.backoff * 2 ** (attempt - 1))


class SwitchRules:
    """A switch's choice (mixed into :class:`~tether.compiler.plan.PlanSwitch`)."""

    __slots__ = ()
    if TYPE_CHECKING:
        cases: dict[str, tuple[str, ...]]

    def chosen(self, value: Any) -> str | None:
        """The case ``value`` selects (its text form for numbers, booleans and null), or None
        for the default."""
        key = value if isinstance(value, str) else json.dumps(value)
        return key if key in self.cases else None


class InvocationRules:
    """Task and workflow nodes' fan-out (mixed into both)."""

    __slots__ = ()
    if TYPE_CHECKING:
        for_each: Any
        matrix: Any

    @property
    def fans_out(self) -> bool:
        """Whether the node runs once per element (``for_each`` or ``matrix``)."""
        return self.for_each is not None or self.matrix is not None


class PlanRules:
    """A plan's indexes (mixed into :class:`~tether.compiler.plan.Plan`); each is computed
    once per plan (``cached_property``, kept in the instance's ``__dict__``)."""

    __slots__ = ()
    if TYPE_CHECKING:
        nodes: tuple[PlanNode, ...]
        agents: tuple[PlanAgent, ...]

    @functools.cached_property
    def by_id(self) -> dict[str, PlanNode]:
        """Nodes by id."""
        return {node.id: node for node in self.nodes}

    def node(self, node_id: str) -> PlanNode:
        return self.by_id[node_id]

    @functools.cached_property
    def agents_by_id(self) -> dict[str, PlanAgent]:
        """Every agent's definition by node id: agent nodes and agents run only when called."""
        found = {node.id: node.agent for node in self.nodes if node.kind is NodeKind.AGENT}
        return {**found, **{agent.id: agent for agent in self.agents}}

    @functools.cached_property
    def dependents(self) -> dict[str, tuple[str, ...]]:
        """For each node, the nodes that wait for it (the reverse of ``waits_for``)."""
        result: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        for node in self.nodes:
            for dep in node.waits_for:
                result[dep].append(node.id)
        return {k: tuple(v) for k, v in result.items()}

    @functools.cached_property
    def gates(self) -> dict[str, tuple[tuple[str, str | None], ...]]:
        """For each node listed in a switch: ``(switch id, its case)`` pairs (``None`` for
        the default)."""
        result: dict[str, list[tuple[str, str | None]]] = {}
        for node in self.nodes:
            if node.kind is NodeKind.SWITCH:
                switch: PlanSwitch = node.switch
                branches: list[tuple[str | None, tuple[str, ...]]] = list(switch.cases.items())
                branches.append((None, switch.default or ()))
                for case, members in branches:
                    for member in members:
                        result.setdefault(member, []).append((node.id, case))
        return {k: tuple(v) for k, v in result.items()}


__all__ = [
    "DEFAULT_STRATEGY",
    "PLAN_FORMAT",
    "TOOL_CALLS_PER_TURN",
    "InvocationRules",
    "PlanRules",
    "RetryRules",
    "SwitchRules",
    "canonical_json",
    "checked",
    "fingerprint_text",
    "is_default_limits",
    "read_format_1",
    "without_absent_enum",
    "without_default_limits",
    "without_default_strategy",
    "without_empty_secrets",
    "without_timeout",
    "write_format_1",
]
