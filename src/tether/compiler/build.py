"""Building the Plan from a checked workflow and its graph."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, assert_never

from pydantic import BaseModel

from tether.compiler.agents import agent_specs, plan_agent
from tether.compiler.concurrency import plan_concurrency
from tether.compiler.graph import Graph
from tether.compiler.plan import (
    AgentNode,
    ApprovalNode,
    FailNode,
    NoopNode,
    Plan,
    PlanApproval,
    PlanInput,
    PlanLoop,
    PlanNode,
    PlanRetry,
    PlanSubworkflow,
    PlanSwitch,
    SleepNode,
    SleepUntilNode,
    SourceRef,
    SwitchNode,
    TaskNode,
    WorkflowNode,
    with_fingerprint,
)
from tether.compiler.schedules import plan_schedule
from tether.compiler.webhooks import plan_manual, plan_webhook
from tether.dsl.ast import Workflow
from tether.dsl.document import InputSpec, NodeSpec
from tether.durations import DurationError, parse_duration
from tether.kinds import NodeKind

DEFAULT_BACKOFF = 1.0

_Model = TypeVar("_Model", bound=BaseModel)
_IMMUTABLE = (type(None), str, int, float, bool, tuple, frozenset, Enum)
_MISSING: Any = object()


@functools.cache
def _layout(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A model's fields in order, each with its default (``_MISSING`` for a required field
    or one whose default is made fresh for each instance), and the names of those."""
    template: dict[str, Any] = {}
    fresh: list[str] = []
    for name, info in cls.__pydantic_fields__.items():
        default = info.get_default(call_default_factory=False)
        if info.is_required() or info.default_factory is not None or \
                not isinstance(default, _IMMUTABLE):
            template[name] = _MISSING
            fresh.append(name)
        else:
            template[name] = default
    return template, tuple(fresh)


def _construct(cls: type[_Model], **values: Any) -> _Model:
    """``cls.model_construct(**values)`` for values given by field name (not alias), the
    same instance at a fraction of the cost: the defaults are looked up once per class."""
    template, fresh = _layout(cls)
    fields = dict(template)
    fields.update(values)
    if len(fields) != len(template):
        raise TypeError(f"not fields of {cls.__name__}: {sorted(set(values) - set(template))}")
    for name in fresh:
        if fields[name] is _MISSING:
            info = cls.__pydantic_fields__[name]
            if info.is_required():
                del fields[name]
            else:
                fields[name] = info.get_default(call_default_factory=True,
                                                validated_data=fields)
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", fields)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def plan_input(name: str, spec: InputSpec) -> PlanInput:
    return PlanInput(name=name, type=spec.type, required=not spec.has_default,
                     default=spec.default, description=spec.description,
                     enum=tuple(spec.enum) if spec.enum is not None else None)


def build_plan(workflow: Workflow, graph: Graph, subplans: dict[str, Plan],
               called: Mapping[str, object] | None = None) -> Plan:
    """The fingerprinted plan of a workflow that has no errors; ``called``: the agents that
    run only when another agent calls them (they are not nodes of the graph)."""
    generation_of = {n: g for g, nodes in enumerate(graph.generations) for n in nodes}
    agent_ids = frozenset(agent_specs(workflow))
    nodes = tuple(
        _plan_node(node_id, workflow.nodes[node_id], graph, generation_of[node_id], subplans,
                   agent_ids)
        for node_id in graph.order
    )
    called_ids = [node_id for node_id in workflow.nodes if node_id in (called or {})]
    agents = tuple(plan_agent(node_id, spec, agent_ids) for node_id in called_ids
                   if (spec := workflow.nodes[node_id].agent) is not None)
    file = Path(workflow.file).name
    source_map = {}
    for node_id in [*graph.order, *called_ids]:
        span = workflow.key_span("nodes", node_id)
        source_map[node_id] = SourceRef(file=file, line=span.line, col=span.col)
    plan = Plan(
        name=workflow.name,
        description=workflow.doc.description,
        inputs=tuple(plan_input(n, s) for n, s in workflow.inputs.items()),
        secrets=tuple(workflow.doc.secrets or ()),
        schedule=plan_schedule(workflow),
        webhook=plan_webhook(workflow), manual=plan_manual(workflow),
        concurrency=plan_concurrency(workflow),
        nodes=nodes,
        agents=agents,
        generations=tuple(tuple(g) for g in graph.generations),
        output=workflow.doc.output,
        source_map=source_map,
    )
    return with_fingerprint(plan)


def _plan_node(node_id: str, node: NodeSpec, graph: Graph, generation: int,
               subplans: dict[str, Plan], agents: frozenset[str]) -> PlanNode:
    common: dict[str, Any] = {
        "id": node_id,
        "index": graph.index[node_id],
        "needs": tuple(graph.needs[node_id]),
        "waits_for": tuple(graph.waits_for[node_id]),
        "when": node.when,
        "trigger": node.trigger or "all_success",
        "loop": _loop(node_id, node, graph),
        "loops": tuple(graph.enclosing.get(node_id, ())),
        "generation": generation,
        "title": node.title,
        "renamed_from": _renamed_from(node.renamed_from),
    }
    kind = node.kind
    # constructed: the values were validated as a document; the plan is built, not parsed
    match kind:
        case NodeKind.TASK:
            return _construct(
                TaskNode, task=node.task, **_invocation(node), retry=_retry(node),
                timeout=_timeout(node.timeout), idempotent=bool(node.idempotent),
                until=node.until, **common)
        case NodeKind.APPROVAL:
            return _construct(ApprovalNode, approval=_approval(node), **common)
        case NodeKind.WORKFLOW:
            workflow = PlanSubworkflow(path=node.workflow or "", plan=subplans[node_id])
            return _construct(WorkflowNode, workflow=workflow, **_invocation(node), **common)
        case NodeKind.AGENT:
            assert node.agent is not None
            return _construct(
                AgentNode, agent=plan_agent(node_id, node.agent, agents), retry=_retry(node),
                timeout=parse_duration(node.timeout) if node.timeout else None, **common)
        case NodeKind.SWITCH:
            assert node.switch is not None
            switch = node.switch
            return _construct(SwitchNode, switch=PlanSwitch(
                on=str(switch.on), cases={k: tuple(v) for k, v in switch.cases.items()},
                default=tuple(switch.default) if switch.default is not None else None),
                **common)
        case NodeKind.NOOP:
            return _construct(NoopNode, noop=True, **common)
        case NodeKind.FAIL:
            return _construct(FailNode, fail=node.fail or "", **common)
        case NodeKind.SLEEP:
            return _construct(SleepNode, sleep=node.sleep or "", **common)
        case NodeKind.SLEEP_UNTIL:
            return _construct(SleepUntilNode, sleep_until=node.sleep_until or "", **common)
        case None:
            raise ValueError(f"node `{node_id}` has no kind; a plan is built only without errors")
        case _:
            assert_never(kind)


def _invocation(node: NodeSpec) -> dict[str, Any]:
    return {"args": node.with_ or {}, "for_each": node.for_each,
            "concurrency": node.concurrency, "matrix": node.matrix,
            "fail_fast": node.fail_fast is not False}


def _timeout(text: str | None) -> float | str | None:
    """Seconds, or the expression computing them when the node runs."""
    if not text:
        return None
    return text if "{{" in text else parse_duration(text)


def _renamed_from(value: str | list[str] | None) -> tuple[str, ...]:
    """``renamed_from:`` as a tuple of old ids (one id may be written bare)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _retry(node: NodeSpec) -> PlanRetry | None:
    if node.retry is None:
        return None
    backoff = parse_duration(node.retry.backoff) if node.retry.backoff else DEFAULT_BACKOFF
    return PlanRetry(max_attempts=node.retry.max_attempts, backoff=backoff,
                     strategy=node.retry.strategy or "exponential")


def _loop(node_id: str, node: NodeSpec, graph: Graph) -> PlanLoop | None:
    if node.loop is None:
        return None
    return PlanLoop.model_validate({
        "to": node.loop.to,
        "while": node.loop.while_,
        "max_iterations": node.loop.max_iterations,
        "on_exhausted": node.loop.on_exhausted or "fail",
        "body": tuple(graph.bodies[node_id]),
    })


def _approval(node: NodeSpec) -> PlanApproval:
    assert node.approval is not None
    form = node.approval.form
    return PlanApproval(
        reason=node.approval.reason,
        context=node.approval.context,
        form=tuple(plan_input(n, s) for n, s in form.items()) if form is not None else None,
        timeout=_timeout_seconds(node.approval.timeout),
        on_timeout=node.approval.on_timeout if node.approval.on_timeout is not None else "fail",
    )


def _timeout_seconds(text: str | None) -> float | str | None:
    """An approval's timeout in seconds (checked valid by E852 before a plan is built), or
    the template computing it from the inputs when the approval starts."""
    if text and "{{" in text:
        return text
    try:
        return parse_duration(text) if text else None
    except DurationError:
        return None
