"""The plan: the compiler's output and the runtime's input.

Plain, immutable, JSON-serialisable data (pydantic models). Nodes come in a deterministic
topological order (``index``); every expression is kept as its source text. A node is one of
:class:`TaskNode`, :class:`ApprovalNode`, :class:`WorkflowNode`, :class:`AgentNode` (the union
:data:`PlanNode`,
discriminated by ``kind``); each variant has only the fields its kind takes (the table in
:mod:`tether.kinds`).

The fingerprint is the sha256 of the canonical JSON of everything that decides behaviour: the
source map (file names and line numbers) is left out, so a ``.yaml`` file and its ``.flow``
twin share one fingerprint, and the same file compiles to the same bytes on any machine.

Plan format 1 writes every node with every key of every kind (``"task": null`` on an
approval, ...). The variants keep writing that shape, and read it back, so plans and
fingerprints stored by earlier releases stay valid (see :mod:`tether.compiler.plan_shape`).

Fingerprints depend on every field of these models: adding, renaming or re-defaulting a field
changes the fingerprint of stored runs' plans unless the serialiser leaves it out at its
default. ``tests/compiler/test_fingerprint_golden.py`` fails on such a change; the fast path
of :func:`semantic` is derived from the models' fields, never restated.
"""

from __future__ import annotations

import functools
import json
import math
import types
import typing
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_serializer,
    model_validator,
)

from tether.compiler import plan_rules, plan_shape
from tether.compiler.plan_rules import (
    DEFAULT_STRATEGY,
    InvocationRules,
    PlanRules,
    RetryRules,
    SwitchRules,
    fingerprint_text,
)
from tether.compiler.plan_rules import (
    PLAN_FORMAT as PLAN_FORMAT,
)
from tether.compiler.plan_rules import canonical_json as canonical_json
from tether.kinds import NodeKind

TriggerRule = Literal["all_success", "all_done", "any_success", "none_failed",
                      "none_failed_min_one_success"]


class _PlanModel(BaseModel):
    # defer_build: the validators are built on a plan's first use, not at import: `tether
    # check` builds no plan and so never pays for them (docs/performance.md, "Start-up").
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              defer_build=True)


class PlanInput(_PlanModel):
    """A declared input (or approval form field) with its type and default."""

    name: str
    type: str
    required: bool
    default: Any = None
    description: str | None = None
    enum: tuple[Any, ...] | None = None
    """The allowed values, when the input or field declares them."""

    _without_absent_enum = model_serializer(mode="wrap")(plan_rules.without_absent_enum)


class PlanRetry(_PlanModel, RetryRules):
    """Retry policy: ``max_attempts`` in all; delay ``backoff * 2**(attempt - 1)`` seconds
    (``exponential``) or ``backoff`` seconds every time (``fixed``)."""

    max_attempts: int
    backoff: float
    strategy: Literal["exponential", "fixed"] = DEFAULT_STRATEGY

    _without_default_strategy = model_serializer(mode="wrap")(
        plan_rules.without_default_strategy)


class PlanLoop(_PlanModel):
    """A bounded loop closed by the node that carries it."""

    to: str
    while_: str = Field(alias="while")
    max_iterations: int | str
    """A bound, or an expression over the inputs giving one (evaluated when the loop closes)."""
    on_exhausted: Literal["fail", "continue"]
    body: tuple[str, ...]


class PlanApproval(_PlanModel):
    """A built-in human-in-the-loop pause."""

    reason: str
    context: Any = None
    form: tuple[PlanInput, ...] | None = None
    timeout: float | str | None = None
    """Seconds the approval waits for a human before ``on_timeout`` applies, or a template
    over the inputs giving them (a duration text or a number), rendered when it starts."""
    on_timeout: Literal["fail", "skip"] | dict[str, Any] = "fail"

    _without_timeout = model_serializer(mode="wrap")(plan_rules.without_timeout)


class PlanSubworkflow(_PlanModel):
    """A sub-workflow: its path as written, and its compiled plan embedded."""

    path: str
    plan: Plan


class _NodeBase(_PlanModel):
    """What every node has: its place in the graph, its guard and trigger rule, its loop."""

    id: str
    index: int
    needs: tuple[str, ...] = ()
    waits_for: tuple[str, ...] = ()
    when: str | None = None
    trigger: TriggerRule = "all_success"
    loop: PlanLoop | None = None
    loops: tuple[str, ...] = ()
    generation: int = 0
    title: str | None = None
    renamed_from: tuple[str, ...] = ()
    """The ids this node had in earlier versions of the workflow (``renamed_from:``)."""

    @model_validator(mode="before")
    @classmethod
    def _read_format_1(cls, data: Any) -> Any:
        return plan_shape.drop_absent(cls.model_fields["kind"].default, data)

    _write_format_1 = model_serializer(mode="wrap")(plan_rules.write_format_1)


class _Invocation(_NodeBase, InvocationRules):
    """Task and workflow nodes: called with arguments, once or once per element."""

    args: dict[str, Any] = Field(default_factory=dict, alias="with")
    for_each: Any = None
    concurrency: int | str | None = None
    matrix: Any = None
    fail_fast: bool = True


# -- the variants ------------------------------------------------------------------------------


class TaskNode(_Invocation):
    """A node calling a registered task, with retries, a timeout and result caching."""

    kind: Literal[NodeKind.TASK] = NodeKind.TASK
    task: str
    retry: PlanRetry | None = None
    timeout: float | str | None = None
    idempotent: bool = False
    until: str | None = None


class ApprovalNode(_NodeBase):
    """A node pausing the run for a human decision."""

    kind: Literal[NodeKind.APPROVAL] = NodeKind.APPROVAL
    approval: PlanApproval


class WorkflowNode(_Invocation):
    """A node running another workflow, whose plan is embedded, as a sub-run."""

    kind: Literal[NodeKind.WORKFLOW] = NodeKind.WORKFLOW
    workflow: PlanSubworkflow


class PlanModelRef(_PlanModel):
    """Which model an agent calls (the key is read from ``api_key_env`` at run time)."""

    provider: Literal["openai", "anthropic"]
    name: str
    base_url: str | None = None
    api_key_env: str | None = None


class PlanTool(_PlanModel):
    """One tool of an agent: a registered task, or an agent node called as a worker."""

    name: str
    kind: Literal["task", "worker"] = "task"


class PlanToolCalls(_PlanModel):
    """An agent's bounds on tool calls: per model reply, and per run of its node."""

    per_turn: int = plan_rules.TOOL_CALLS_PER_TURN
    per_run: int | None = None


class PlanAgent(_PlanModel):
    """An agent's definition: its model, prompts, tools, bound and answer schema.

    ``prompt`` is None for an agent that runs only when called (a worker is prompted with
    the supervisor's ``request``; a handoff target continues the conversation).
    """

    id: str
    model: PlanModelRef
    instructions: str | None = None
    prompt: str | None = None
    tools: tuple[PlanTool, ...] = ()
    max_turns: int
    output: dict[str, Any] | None = None
    handoffs: tuple[str, ...] = ()
    approve_tools: tuple[str, ...] = ()
    max_tool_calls: PlanToolCalls = PlanToolCalls.model_construct()
    """(Made without validation: building the validator of ``PlanToolCalls`` here, at
    import, would cost every command that imports the plan models.)"""

    _without_default_limits = model_serializer(mode="wrap")(plan_rules.without_default_limits)


class AgentNode(_NodeBase):
    """A node running an LLM loop with tools, checkpointed per turn and per tool call;
    ``retry`` and ``timeout`` apply to each model call."""

    kind: Literal[NodeKind.AGENT] = NodeKind.AGENT
    agent: PlanAgent
    retry: PlanRetry | None = None
    timeout: float | None = None


class PlanSwitch(_PlanModel, SwitchRules):
    """The cases of a switch: case value -> the nodes that run; ``default`` when none
    matches."""

    on: str
    cases: dict[str, tuple[str, ...]]
    default: tuple[str, ...] | None = None


class SwitchNode(_NodeBase):
    """A node choosing which nodes run: those of the matching case (or the default)."""

    kind: Literal[NodeKind.SWITCH] = NodeKind.SWITCH
    switch: PlanSwitch


class NoopNode(_NodeBase):
    """A node that does nothing and completes (a join point, a placeholder)."""

    kind: Literal[NodeKind.NOOP] = NodeKind.NOOP
    noop: Literal[True] = True


class FailNode(_NodeBase):
    """A node that fails with its rendered message."""

    kind: Literal[NodeKind.FAIL] = NodeKind.FAIL
    fail: str


class SleepNode(_NodeBase):
    """A durable timer: waits ``sleep`` (a duration, or a template giving one or a number
    of seconds), then completes."""

    kind: Literal[NodeKind.SLEEP] = NodeKind.SLEEP
    sleep: str


class SleepUntilNode(_NodeBase):
    """A durable timer: waits until ``sleep_until`` (a template giving ISO 8601 text with an
    offset, or a Unix timestamp), then completes."""

    kind: Literal[NodeKind.SLEEP_UNTIL] = NodeKind.SLEEP_UNTIL
    sleep_until: str


PlanNode: TypeAlias = Annotated[
    TaskNode | ApprovalNode | WorkflowNode | AgentNode | SwitchNode | NoopNode | FailNode
    | SleepNode | SleepUntilNode,
    Field(discriminator="kind")]
"""One node of the plan: a :class:`TaskNode`, :class:`ApprovalNode`, :class:`WorkflowNode`,
:class:`AgentNode`, :class:`SwitchNode`, :class:`NoopNode`, :class:`FailNode`,
:class:`SleepNode` or :class:`SleepUntilNode`."""


class PlanSchedule(_PlanModel):
    """When workers start runs of the plan: each tick of ``cron`` read in ``timezone``, with
    ``inputs``; ``catchup`` says which ticks missed while no worker ran still start one."""

    cron: str
    timezone: str = "UTC"
    inputs: dict[str, Any] = Field(default_factory=dict)
    catchup: Literal["none", "latest", "all"] = "latest"


class PlanWebhook(_PlanModel):
    """How ``tether serve`` starts runs of the plan from a signed request at ``/hooks/path``:
    the sender's scheme, the environment variable of its secret (never its value), the
    inputs (templates over ``trigger``), the headers templates may read, and the ``hmac``
    scheme's headers; ``tolerance``: seconds a signing time may be from now."""

    path: str
    verify: Literal["github", "stripe", "hmac"]
    secret: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    headers: tuple[str, ...] = ()
    header: str = "x-signature"
    timestamp_header: str | None = None
    delivery_header: str | None = None
    tolerance: float = 300.0


class PlanManual(_PlanModel):
    """Whether runs of the plan may be started by hand (the console's Start form and ``POST
    /api/workflows/{name}/runs``), and by whom: ``users`` empty is every approver and
    submitter. A plan without one (no ``on:`` in its file) may be started by hand by all of
    them; ``on:`` without ``manual`` gives ``allowed=False``."""

    allowed: bool = True
    users: tuple[str, ...] = ()


OnConflict = Literal["queue", "cancel_running", "cancel_new", "reject"]
ON_CONFLICT: tuple[OnConflict, ...] = ("queue", "cancel_running", "cancel_new", "reject")


class PlanConcurrency(_PlanModel):
    """The plan's concurrency key: ``key`` (a template over ``inputs``, rendered when a run
    is submitted, or a constant), at most ``limit`` runs with the same rendered key running
    at once, and what a run that finds its key at the limit does (``on_conflict``)."""

    key: str
    limit: int = 1
    on_conflict: OnConflict = "queue"


class SourceRef(_PlanModel):
    """Where a node is defined: file (relative to the main workflow file), line, column."""

    file: str
    line: int
    col: int


class Plan(_PlanModel, PlanRules):
    """A compiled workflow.

    ``secrets`` are the names of the secrets its templates may read (``secrets.NAME``); their
    values are never part of a plan. Each embedded sub-plan lists its own.
    """

    tether_plan: int = PLAN_FORMAT
    name: str
    description: str | None = None
    inputs: tuple[PlanInput, ...] = ()
    secrets: tuple[str, ...] = ()
    schedule: PlanSchedule | None = None
    """When workers start runs of it (absent from the JSON when there is none)."""
    webhook: PlanWebhook | None = None
    """The signed request that starts runs of it (absent from the JSON when there is none)."""
    manual: PlanManual | None = None
    """Who may start runs of it by hand (absent from the JSON when its file has no ``on:``:
    anyone allowed to start runs)."""
    concurrency: PlanConcurrency | None = None
    """Its concurrency key (absent from the JSON when there is none)."""
    nodes: tuple[PlanNode, ...]
    agents: tuple[PlanAgent, ...] = ()
    """Agents that run only when another agent calls them (workers, handoff targets)."""
    generations: tuple[tuple[str, ...], ...] = ()
    output: Any = None
    source_map: dict[str, SourceRef] = Field(default_factory=dict)
    fingerprint: str = ""

    _without_empty_secrets = model_serializer(mode="wrap")(plan_rules.without_empty_secrets)

    def to_json(self) -> str:
        """The plan as JSON text (indented, trailing newline); computed once per plan.

        Keys come in the models' field order and user mappings in their source order, so the
        text is deterministic and a run resumed from the stored plan sees its outputs' keys in
        the order the author wrote them. (The fingerprint sorts keys.)
        """
        return self._json

    @functools.cached_property
    def _json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2,
                          ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Read a plan written by :meth:`to_json`; check it as the compiler would have made it.

        Raises:
            PlanError: The text is not a plan, or its graph or settings are not valid
                (:func:`~tether.compiler.plan_check.check_plan`: a hand-edited plan with a
                fresh fingerprint is checked too), or its fingerprint does not match.
        """
        return plan_rules.checked(lambda: cls.model_validate_json(text))

    def content_fingerprint(self) -> str:
        """The fingerprint of the plan's content (:func:`fingerprint_of`)."""
        return fingerprint_of(self)


_SEMANTIC_EXCLUDE = plan_rules.SEMANTIC_EXCLUDE
_NODE_EXCLUDE = plan_rules.NODE_EXCLUDE


def semantic(plan: Plan, memo: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The part of a plan that decides behaviour: everything but source maps, fingerprints
    and who may start it by hand (``manual``), as JSON data (for :func:`canonical_json`,
    which sorts keys: ``nodes`` comes last here, and tuples stand for lists).

    Each distinct sub-plan is dumped once (``memo``, by object), however many nodes embed it.
    The nodes of the common kinds are written by :func:`_plain_node`, the others by their
    models' serialisers.
    """
    memo = {} if memo is None else memo
    found = memo.get(id(plan))
    if found is not None:
        return found
    data = plan.model_dump(mode="json", by_alias=True, exclude=_SEMANTIC_EXCLUDE)
    nodes: list[dict[str, Any]] = []
    for node in plan.nodes:
        raw = _plain_node(node)
        if raw is None:
            raw = node.model_dump(mode="json", by_alias=True, exclude=_NODE_EXCLUDE)
            if isinstance(node, WorkflowNode):
                raw["workflow"]["plan"] = semantic(node.workflow.plan, memo)
        nodes.append(raw)
    data["nodes"] = nodes
    memo[id(plan)] = data
    return data


_PLAIN_LEAVES: frozenset[Any] = frozenset(
    (str, int, float, bool, type(None), Any, dict, tuple, list, NodeKind, PlanLoop, PlanRetry))
"""The annotation leaves :func:`_plain_node` writes directly: JSON data (checked value by
value by :func:`_plain`), the kind, a loop and a retry policy."""


def _plain_annotation(annotation: Any) -> bool:
    """Whether every type in ``annotation`` is one of :data:`_PLAIN_LEAVES` (Literal values
    are plain; a union or container is plain when its arguments are)."""
    if typing.get_origin(annotation) is Literal:
        return True
    origin = typing.get_origin(annotation)
    if origin is not None:
        return (origin in _PLAIN_LEAVES or origin in (typing.Union, types.UnionType)) and \
            all(_plain_annotation(arg) for arg in typing.get_args(annotation) if arg is not ...)
    return annotation in _PLAIN_LEAVES


@functools.cache
def plain_kind(cls: type[_PlanModel]) -> bool:
    """Whether :func:`_plain_node` writes nodes of ``cls``: derived from the model's fields,
    so a field of another type added to a variant sends it to pydantic's serialiser."""
    return all(_plain_annotation(field.annotation) for field in cls.model_fields.values())


def _plain_node(node: _NodeBase) -> dict[str, Any] | None:
    """What ``model_dump(mode="json", by_alias=True)`` gives for ``node``, written directly
    (up to key order, and tuples for lists); None when a value is not plain JSON data (a date
    from YAML, a non-finite float, ...), which pydantic converts its own way."""
    cls = type(node)
    if not plain_kind(cls):
        return None
    values = node.__dict__
    data: dict[str, Any] = {}
    for name, alias in _aliases(cls):
        value = values[name]
        if type(value) is PlanLoop:
            value = {alias: value.__dict__[name] for name, alias in _aliases(PlanLoop)}
        elif type(value) is PlanRetry:
            value = dict(value.__dict__)
            if value["strategy"] == DEFAULT_STRATEGY:
                del value["strategy"]
        elif name == "kind":
            value = value.value
        if not _plain(value):
            return None
        data[alias] = value
    for key in plan_shape.absent(values["kind"]):
        neutral = plan_shape.NEUTRAL[key]
        data[key] = {} if isinstance(neutral, dict) else neutral
    for key, default in plan_shape.OMITTED.items():
        if key in data and plan_shape.is_default(data[key], default):
            del data[key]
    return data


@functools.cache
def _aliases(cls: type[_PlanModel]) -> tuple[tuple[str, str], ...]:
    """A model's fields: (name, the key ``by_alias`` writes)."""
    return tuple((name, field.alias or name) for name, field in cls.model_fields.items())


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON data pydantic's JSON mode writes unchanged (tuples as lists)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return all(_plain(item) for item in value)
    return False


def fingerprint_of(plan: Plan) -> str:
    """sha256 of the canonical JSON of the plan's semantic part."""
    return fingerprint_text(semantic(plan))


def with_fingerprint(plan: Plan) -> Plan:
    """The plan with its fingerprint filled in."""
    return plan.model_copy(update={"fingerprint": fingerprint_of(plan)})

