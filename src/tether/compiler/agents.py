"""Agent checks (codes E900-E999) and the plan's agent definitions.

An agent node named under another agent's ``tools`` (a worker) or ``handoffs`` (a handoff
target) runs only when it is called: it is not a node of the graph. :func:`called_agents`
finds them before the graph is analysed; their templates may read the nodes upstream of
every graph agent that (transitively) calls them (:func:`callers_in_graph`).

The provider SDKs are never imported here: :func:`~tether.agents.require_provider` only
looks for the package (a missing extra is E908), and tool schemas come from the task
functions when task modules are given. :mod:`tether.agents` itself is imported by the
functions that check or build an agent, so checking a workflow without agents does not load
it (``tether check`` starts quicker).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tether.compiler.context import Context
from tether.diagnostics import Related
from tether.dsl.ast import Workflow
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    import networkx as nx

    from tether.compiler.plan import PlanAgent, PlanModelRef, PlanToolCalls
    from tether.dsl.document import AgentSpec, ModelRef

Tasks = Mapping[str, Callable[..., Any]]
CALLED_ONLY_REFUSES = ("needs", "when", "trigger", "loop")
"""Settings of a graph position, which an agent that runs only when called does not have."""


def agent_specs(workflow: Workflow) -> dict[str, AgentSpec]:
    """The agent nodes of a workflow, by id, in file order."""
    return {node_id: node.agent for node_id, node in workflow.nodes.items()
            if node.agent is not None}


def called_agents(workflow: Workflow) -> dict[str, list[str]]:
    """Agents that run only when called, each with the agents that name it."""
    agents = agent_specs(workflow)
    called: dict[str, list[str]] = {}
    for caller, spec in agents.items():
        for name in [*(spec.tools or ()), *(spec.handoffs or ())]:
            if name in agents and caller not in called.setdefault(name, []):
                called[name].append(caller)
    return called


def callers_in_graph(called: dict[str, list[str]], agent_id: str) -> tuple[str, ...]:
    """The graph agents that call ``agent_id``, directly or through other called agents."""
    roots: list[str] = []
    seen = {agent_id}
    stack = [agent_id]
    while stack:
        for caller in called.get(stack.pop(), ()):
            if caller in seen:
                continue
            seen.add(caller)
            if caller in called:
                stack.append(caller)
            elif caller not in roots:
                roots.append(caller)
    return tuple(roots)


# -- checks ------------------------------------------------------------------------------


def check_agents(ctx: Context, tasks: Tasks | None) -> None:
    """Every agent check that needs no graph (models, bounds, schemas, tools, cycles)."""
    agents = agent_specs(ctx.workflow)
    called = ctx.called
    for node_id, spec in agents.items():
        base = ("nodes", node_id, "agent")
        _check_model(ctx, node_id, spec.model, base)
        if spec.max_turns is None:
            ctx.report("E903", f"agent `{node_id}` has no `max_turns`", ctx.key_span(*base),
                       node_id=node_id, help="add `max_turns:`, the most model calls of the "
                       "loop, e.g. `max_turns: 8`")
        if spec.output is not None:
            _check_output(ctx, node_id, spec.output, base)
        _check_tools(ctx, node_id, spec, agents, tasks)
        _check_handoffs(ctx, node_id, spec, agents)
        _check_tool_calls(ctx, node_id, spec, base)
        if node_id in called:
            _check_called(ctx, node_id, called[node_id])
        elif spec.prompt is None:
            ctx.report("E909", f"agent `{node_id}` has no `prompt`", ctx.key_span(*base),
                       node_id=node_id, help="the prompt is the first user message, e.g. "
                       '`prompt: "{{ inputs.request }}"`')
    if agents:  # (no graph, and no networkx import, for a workflow without agents)
        _check_cycles(ctx, agents)


def _check_model(ctx: Context, node_id: str, model: str | ModelRef,
                 base: tuple[str, ...]) -> None:
    from tether.agents.errors import ModelSpecError, ProviderUnavailable
    from tether.agents.providers import parse_model_spec, require_provider

    where = (*base, "model")
    data: str | dict[str, Any] = model if isinstance(model, str) else model.model_dump(
        exclude_none=True)
    provider = model.partition(":")[0] if isinstance(model, str) else model.provider
    try:
        spec = parse_model_spec(data)
    except ModelSpecError as exc:
        code = "E902" if "unknown provider" in exc.reason else "E912"
        span = ctx.span(*where) if isinstance(model, str) or code == "E912" else ctx.span(
            *where, "provider")
        message = (f"unknown provider `{provider}` in the model of agent `{node_id}`"
                   if code == "E902" else f"invalid model of agent `{node_id}`: {exc.reason}")
        help = did_you_mean(provider, ["openai", "anthropic"]) if code == "E902" else None
        ctx.report(code, message, span, node_id=node_id,
                   help=help or "models are `openai:<model>` or `anthropic:<model>`")
        return
    try:
        require_provider(spec)
    except ProviderUnavailable as exc:
        ctx.report("E907", f"agent `{node_id}` uses {spec}, but the `{exc.package}` package "
                   "is not installed", ctx.span(*where), node_id=node_id,
                   help=f"pip install 'tether[{exc.provider}]'")


def _check_output(ctx: Context, node_id: str, schema: dict[str, Any],
                  base: tuple[str, ...]) -> None:
    problem = schema_problem(schema)
    if problem is not None:
        ctx.report("E904", f"the `output` of agent `{node_id}` is not a valid JSON Schema: "
                   f"{problem}", ctx.span(*base, "output"), node_id=node_id,
                   help='for example `{type: object, properties: {paid: {type: boolean}}}`')


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (against its draft's metaschema), or None.

    Needs ``jsonschema`` (part of the provider extras); without it nothing can be said here,
    and the missing extra is reported on its own (E907).
    """
    try:
        from jsonschema import SchemaError, validators
    except ImportError:
        return None
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{exc.message}" + (f" (at `{where}`)" if where else "")
    return None


def _check_tools(ctx: Context, node_id: str, spec: AgentSpec, agents: dict[str, AgentSpec],
                 tasks: Tasks | None) -> None:
    from tether.agents.errors import ToolSchemaError
    from tether.agents.tools import HANDOFF_PREFIX, find_clashes, tool_spec

    tools = spec.tools or []
    base = ("nodes", node_id, "agent", "tools")
    for i, name in enumerate(tools):
        if name in agents:
            continue
        if tasks is None:
            continue
        fn = tasks.get(name)
        if fn is None:
            ctx.report("E900", f"agent `{node_id}` has an unknown tool `{name}`",
                       ctx.span(*base, i), node_id=node_id,
                       help=did_you_mean(name, sorted(tasks) + list(agents))
                       or "a tool is a task registered with `@tether.task`, or an agent node")
            continue
        try:
            tool_spec(fn, name)
        except ToolSchemaError as exc:
            ctx.report("E901", f"tool `{name}` of agent `{node_id}` cannot be described to a "
                       f"model: {exc}", ctx.span(*base, i), node_id=node_id,
                       help="annotate every parameter with a JSON type (str, int, float, "
                       "bool, list, dict), a pydantic model, a dataclass or a TypedDict")
    handoffs = [HANDOFF_PREFIX + name for name in spec.handoffs or ()]
    for clash in find_clashes([*tools, *handoffs]):
        ctx.report("E905", f"tools {', '.join(f'`{n}`' for n in clash.names)} of agent "
                   f"`{node_id}` are all declared to the model as `{clash.declared_name}`",
                   ctx.span(*_place(spec, node_id, clash.names[1])), node_id=node_id,
                   help="providers accept only letters, digits, `_` and `-` in tool names; "
                   "rename one of the tasks")
    for i, name in enumerate(spec.approve_tools or ()):
        if name not in tools:
            ctx.report("E911", f"agent `{node_id}` approves calls of `{name}`, which is not "
                       "one of its tools", ctx.span("nodes", node_id, "agent", "approve_tools",
                                                    i), node_id=node_id,
                       help=did_you_mean(name, tools) or "list it under `tools:` too")


def _place(spec: AgentSpec, node_id: str, name: str) -> tuple[str | int, ...]:
    from tether.agents.tools import HANDOFF_PREFIX

    tools = spec.tools or []
    if name in tools:
        return ("nodes", node_id, "agent", "tools", tools.index(name))
    target = name.removeprefix(HANDOFF_PREFIX)
    return ("nodes", node_id, "agent", "handoffs", (spec.handoffs or []).index(target))


def _check_handoffs(ctx: Context, node_id: str, spec: AgentSpec,
                    agents: dict[str, AgentSpec]) -> None:
    for i, name in enumerate(spec.handoffs or ()):
        if name in agents:
            continue
        what = "a node that is not an agent" if name in ctx.workflow.nodes else \
            "no agent node"
        ctx.report("E908", f"agent `{node_id}` hands off to `{name}`, {what}",
                   ctx.span("nodes", node_id, "agent", "handoffs", i), node_id=node_id,
                   help=did_you_mean(name, list(agents))
                   or "a handoff target is another agent node of the workflow")


def _check_tool_calls(ctx: Context, node_id: str, spec: AgentSpec,
                      base: tuple[str, ...]) -> None:
    limits = spec.max_tool_calls
    if limits is None:
        return
    for key in ("per_turn", "per_run"):
        value = getattr(limits, key)
        if value is not None and value < 1:
            ctx.report("E913", f"`max_tool_calls.{key}` of agent `{node_id}` is {value}: it "
                       "must be at least 1", ctx.span(*base, "max_tool_calls", key),
                       node_id=node_id, help="e.g. `max_tool_calls: {per_turn: 64, "
                       "per_run: 500}`; leave a key out for its default")


def _check_called(ctx: Context, node_id: str, callers: list[str]) -> None:
    node = ctx.workflow.nodes[node_id]
    by = ", ".join(f"`{c}`" for c in callers)
    for key in CALLED_ONLY_REFUSES:
        if getattr(node, key) is not None:
            ctx.report("E910", f"`{key}` does not apply to agent `{node_id}`: it runs only "
                       f"when called (by {by})", ctx.key_span("nodes", node_id, key),
                       node_id=node_id, help="an agent named under another agent's `tools` "
                       "or `handoffs` is not a node of the graph; put the setting on the "
                       "agent that calls it")


def _check_cycles(ctx: Context, agents: dict[str, AgentSpec]) -> None:
    import networkx as nx  # (imported when needed: most checks never build a graph)

    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(agents)
    for caller, spec in agents.items():
        graph.add_edges_from((caller, name) for name in [*(spec.tools or ()),
                                                         *(spec.handoffs or ())]
                             if name in agents)
    position = {node_id: i for i, node_id in enumerate(agents)}
    for component in sorted(nx.strongly_connected_components(graph),
                            key=lambda c: min(position[n] for n in c)):
        start = min(component, key=position.__getitem__)
        if len(component) == 1 and not graph.has_edge(start, start):
            continue
        cycle = [u for u, _ in nx.find_cycle(graph.subgraph(component), source=start)]
        related = [Related(ctx.span(*_edge(agents, a, cycle[(i + 1) % len(cycle)])),
                           f"`{a}` calls `{cycle[(i + 1) % len(cycle)]}`")
                   for i, a in enumerate(cycle)]
        ctx.report("E906", "agents call each other in a cycle: "
                   + " -> ".join([*cycle, cycle[0]]), ctx.key_span("nodes", start),
                   related=related, node_id=start,
                   help="a worker or handoff target cannot call back an agent that leads to "
                   "it; give the shared work to a task or a separate agent")


def _edge(agents: dict[str, AgentSpec], caller: str, target: str) -> tuple[str | int, ...]:
    spec = agents[caller]
    if target in (spec.tools or []):
        return ("nodes", caller, "agent", "tools", (spec.tools or []).index(target))
    return ("nodes", caller, "agent", "handoffs", (spec.handoffs or []).index(target))


# -- the plan ----------------------------------------------------------------------------


def plan_agent(node_id: str, spec: AgentSpec, agents: frozenset[str]) -> PlanAgent:
    """The plan's definition of an agent that has no errors."""
    from tether.agents.providers import parse_model_spec
    from tether.compiler.plan import PlanAgent, PlanTool

    model = parse_model_spec(spec.model if isinstance(spec.model, str)
                             else spec.model.model_dump(exclude_none=True))
    tools = tuple(dict.fromkeys(spec.tools or ()))
    assert spec.max_turns is not None
    return PlanAgent(
        id=node_id,
        model=_model_ref(model.provider.value, model.name, model.base_url, model.api_key_env),
        instructions=spec.instructions,
        prompt=spec.prompt,
        tools=tuple(PlanTool(name=t, kind="worker" if t in agents else "task") for t in tools),
        max_turns=spec.max_turns,
        output=spec.output,
        handoffs=tuple(dict.fromkeys(spec.handoffs or ())),
        approve_tools=tuple(dict.fromkeys(spec.approve_tools or ())),
        max_tool_calls=_tool_calls(spec),
    )


def _tool_calls(spec: AgentSpec) -> PlanToolCalls:
    from tether.compiler.plan import PlanToolCalls
    from tether.compiler.plan_rules import TOOL_CALLS_PER_TURN

    limits = spec.max_tool_calls
    if limits is None:
        return PlanToolCalls()
    return PlanToolCalls(per_turn=limits.per_turn or TOOL_CALLS_PER_TURN,
                         per_run=limits.per_run)


@functools.cache
def _model_ref(provider: str, name: str, base_url: str | None,
               api_key_env: str | None) -> PlanModelRef:
    from tether.compiler.plan import PlanModelRef

    return PlanModelRef.model_validate({"provider": provider, "name": name,
                                        "base_url": base_url, "api_key_env": api_key_env})
