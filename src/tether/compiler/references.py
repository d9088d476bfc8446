"""Template checks: syntax, and every name a template reads against what exists and is upstream."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tether.compiler.agents import callers_in_graph
from tether.compiler.context import Context
from tether.compiler.graph import Graph
from tether.compiler.secrets import check_secret
from tether.diagnostics import Span
from tether.dsl.document import AgentSpec
from tether.dsl.expressions import Analysis, Reference, analyse
from tether.dsl.source import Path
from tether.suggest import did_you_mean
from tether.templating import ENV

NODE_FIELDS = ("output", "status")
ROOTS = ("inputs", "nodes", "secrets", "item", "iteration")


@dataclass
class Reads:
    """The inputs and secrets the templates of a workflow read (for the unused-name lints)."""

    inputs: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Site:
    """One string that may hold a template, and what it may read."""

    path: Path
    text: str
    reader: str | None  # the node reading, or None for the workflow's output
    condition: bool = False  # must be a single expression (when, while, for_each)
    item: bool = False  # `item` is in scope
    iteration: bool = False  # `iteration` is in scope
    reads_self: bool = False  # the loop's `while` may read its own node
    stored: str | None = None  # where the value is stored and shown, if it is
    callers: tuple[str, ...] = ()  # an agent run only when called: the graph agents calling it


def strings(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """Every string inside a JSON value, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, (*path, key))


def sites(ctx: Context, graph: Graph) -> Iterator[Site]:
    """Every template site of the workflow."""
    for node_id, node in ctx.workflow.nodes.items():
        base: Path = ("nodes", node_id)
        in_loop = bool(graph.enclosing.get(node_id))
        item = node.for_each is not None
        inputs = f"the inputs of sub-workflow node `{node_id}`" if node.workflow else None
        for path, text in strings(node.with_, (*base, "with")):
            yield Site(path, text, node_id, item=item, iteration=in_loop, stored=inputs)
        if node.when is not None:
            yield Site((*base, "when"), node.when, node_id, condition=True, iteration=in_loop)
        if isinstance(node.for_each, str):
            yield Site((*base, "for_each"), node.for_each, node_id, condition=True,
                       iteration=in_loop)
        else:
            for path, text in strings(node.for_each, (*base, "for_each")):
                yield Site(path, text, node_id, iteration=in_loop)
        if node.approval is not None:
            approval = node.approval
            yield Site((*base, "approval", "reason"), approval.reason, node_id, iteration=in_loop,
                       stored=f"the reason of approval `{node_id}`")
            for path, text in strings(approval.context, (*base, "approval", "context")):
                yield Site(path, text, node_id, iteration=in_loop,
                           stored=f"the context of approval `{node_id}`")
        if node.loop is not None:
            yield Site((*base, "loop", "while"), node.loop.while_, node_id, condition=True,
                       iteration=True, reads_self=True)
        if node.agent is not None:
            yield from _agent_sites(ctx, node_id, node.agent, in_loop)
    for path, text in strings(ctx.workflow.doc.output, ("output",)):
        yield Site(path, text, None, stored="the workflow's output")


def _agent_sites(ctx: Context, node_id: str, agent: AgentSpec, in_loop: bool) -> Iterator[Site]:
    """An agent's ``instructions`` and ``prompt``: the conversation is stored and sent to the
    model, so a secret may not be read there."""
    callers = callers_in_graph(ctx.called, node_id) if node_id in ctx.called else ()
    for key in ("instructions", "prompt"):
        text = getattr(agent, key)
        if text is not None:
            yield Site(("nodes", node_id, "agent", key), text, node_id, iteration=in_loop,
                       stored=f"the {key} of agent `{node_id}` (sent to the model)",
                       callers=callers)


def check_templates(ctx: Context, graph: Graph) -> Reads:
    """Check every template; return the inputs and secrets that templates read."""
    reads = Reads()
    for site in sites(ctx, graph):
        analysis = analyse(site.text)
        if analysis.kind == "literal" and not site.condition:
            continue
        if analysis.error is not None:  # what it reads is unknown: nothing is unused
            reads.inputs.update(ctx.workflow.inputs)
            reads.secrets.update(ctx.workflow.doc.secrets or ())
        _check_site(ctx, graph, site, analysis, reads)
    return reads


def _check_site(ctx: Context, graph: Graph, site: Site, analysis: Analysis,
                reads: Reads) -> None:
    node_id = site.reader
    if analysis.too_complex:
        ctx.report("E411", f"{analysis.error}", ctx.span(*site.path), node_id=node_id,
                   help="split the expression, or compute the value in a task")
        return
    if analysis.error is not None:
        span = ctx.locate(site.path, site.text, "{{")
        if analysis.error_line > 1:
            span = Span(span.file, span.line + analysis.error_line - 1, 1)
        ctx.report("E400", f"template syntax error: {analysis.error}", span, node_id=node_id)
        return
    if site.condition and analysis.kind != "expression":
        ctx.report("E409", f"`{site.path[-1]}` must be a single `{{{{ ... }}}}` expression",
                   ctx.span(*site.path), node_id=node_id,
                   help="text around the expression, or several expressions, make a string, "
                   "which is always true")
    for name in analysis.unsafe:
        ctx.report("E408", f"templates cannot read private attributes such as `{name}`",
                   ctx.locate(site.path, site.text, name), node_id=node_id,
                   help="the template sandbox refuses names starting with an underscore")
    for name in analysis.unknown_filters:
        ctx.report("E410", f"unknown filter `{name}`", ctx.locate(site.path, site.text, name),
                   node_id=node_id, help=did_you_mean(name, sorted(ENV.filters)))
    for name in analysis.unknown_tests:
        ctx.report("E410", f"unknown test `{name}`", ctx.locate(site.path, site.text, name),
                   node_id=node_id, help=did_you_mean(name, sorted(ENV.tests)))
    for ref in analysis.references:
        _check_reference(ctx, graph, site, ref, reads)


def _needle(ref: Reference) -> str:
    return ".".join((ref.root, *ref.attrs[:2]))


def _check_reference(ctx: Context, graph: Graph, site: Site, ref: Reference,
                     reads: Reads) -> None:
    span = ctx.locate(site.path, site.text, _needle(ref))
    if ref.root != _needle(ref) and span == ctx.span(*site.path):
        span = ctx.locate(site.path, site.text, ref.root)
    reader = site.reader
    if ref.root == "inputs":
        _check_input(ctx, ref, span, reader, reads.inputs)
    elif ref.root == "secrets":
        check_secret(ctx, site, ref, span, reads.secrets)
    elif ref.root == "nodes":
        _check_node_read(ctx, graph, site, ref, span)
    elif ref.root == "item":
        if not site.item:
            where = "in `for_each` itself" if site.path[-1:] == ("for_each",) else \
                "outside a node with `for_each`"
            ctx.report("E406", f"`item` is not defined {where}", span, node_id=reader,
                       help="`item` is the current element of the node's `for_each` list")
    elif ref.root == "iteration":
        if not site.iteration:
            ctx.report("E407", "`iteration` is only defined inside a loop", span,
                       node_id=reader, help="`iteration` counts the passes of the enclosing loop")
    elif ref.root not in ENV.globals:
        ctx.report("E401", f"unknown name `{ref.root}`", span, node_id=reader,
                   help=did_you_mean(ref.root, ROOTS)
                   or "templates read `inputs.<name>` and `nodes.<id>.output`")


def _check_input(ctx: Context, ref: Reference, span: Span, reader: str | None,
                 used: set[str]) -> None:
    inputs = ctx.workflow.inputs
    if not ref.attrs:
        used.update(inputs)
        return
    name = ref.attrs[0]
    used.add(name)
    if name not in inputs and name not in ctx.workflow.broken_inputs:
        declared = list(inputs)
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        used.update(close)  # the input it was meant to read is not unused
        help = did_you_mean(name, declared) or (
            f"declared inputs: {', '.join(declared)}" if declared else "declare it under `inputs:`"
        )
        ctx.report("E402", f"unknown input `{name}`", span, node_id=reader, help=help)


def _check_node_read(ctx: Context, graph: Graph, site: Site, ref: Reference,
                     span: Span) -> None:
    reader = site.reader
    if not ref.attrs:
        if ref.dynamic:
            ctx.report("E403", "a template must name the node it reads with a fixed id", span,
                       node_id=reader, help="write `nodes.<id>.output`")
        else:
            ctx.report("E404", "a template cannot read all of `nodes`", span, node_id=reader,
                       help="read the nodes you need one by one: `nodes.<id>.output`")
        return
    target = ref.attrs[0]
    if target not in ctx.workflow.nodes:
        if target not in ctx.workflow.broken_nodes:
            ctx.report("E403", f"unknown node `{target}`", span, node_id=reader,
                       help=did_you_mean(target, list(ctx.workflow.nodes)))
        return
    if target in ctx.called and target != reader:
        callers = ", ".join(f"`{c}`" for c in ctx.called[target])
        ctx.report("E910", f"`{target}` is an agent that runs only when called (by {callers}): "
                   "it has no output of its own to read", span, node_id=reader,
                   help="read the output of the agent that calls it")
        return
    if len(ref.attrs) > 1 and ref.attrs[1] not in NODE_FIELDS:
        field = ref.attrs[1]
        ctx.report("E405", f"node `{target}` has no field `{field}`", span, node_id=reader,
                   help=did_you_mean(field, NODE_FIELDS)
                   or f"did you mean `nodes.{target}.output.{field}`?")
    if reader is None or not graph.acyclic:
        return
    if site.callers or reader in ctx.called:
        _check_called_read(ctx, graph, site, target, span)
        return
    if graph.is_upstream(target, reader) or graph.share_loop(target, reader):
        return
    if target == reader and site.reads_self:
        return
    if target == reader:
        ctx.report("E404", f"node `{reader}` reads its own output", span, node_id=reader,
                   help="a node's output exists only after it ran")
        return
    ctx.report("E404", f"node `{reader}` reads `{target}`, which is not upstream of it",
               span, node_id=reader,
               help=f"add `{target}` to the `needs` of `{reader}` so it runs first")


def _check_called_read(ctx: Context, graph: Graph, site: Site, target: str,
                       span: Span) -> None:
    """A template of an agent run only when called reads a node: it must be upstream of
    every graph agent that calls it."""
    reader = site.reader
    for caller in site.callers:
        if target == caller:
            ctx.report("E404", f"agent `{reader}` reads `{target}`, which calls it: its output "
                       "does not exist yet", span, node_id=reader,
                       help="pass what it needs in the request instead")
            return
        if not (graph.is_upstream(target, caller) or graph.share_loop(target, caller)):
            ctx.report("E404", f"agent `{reader}` reads `{target}`, which is not upstream of "
                       f"`{caller}`, the agent that calls it", span, node_id=reader,
                       help=f"add `{target}` to the `needs` of `{caller}` so it runs first")
            return
