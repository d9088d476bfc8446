"""Reachability and lints: nodes that can never run, retried side effects, unused inputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tether.compiler.context import Context
from tether.compiler.graph import Graph
from tether.compiler.references import Reads
from tether.compiler.secrets import check_unused_secrets
from tether.diagnostics import Related
from tether.dsl.document import ID_RE
from tether.dsl.expressions import analyse
from tether.templating import TemplateBudget, compiled

# Deciding whether a guard is constant must not make `check` slow: a small budget each.
CONSTANT_BUDGET = TemplateBudget(seconds=0.05, max_size=10_000)


def constant_truth(text: str | None) -> bool | None:
    """The truth of an expression that reads no names (``{{ false }}``), else None."""
    if text is None:
        return None
    analysis = analyse(text)
    if analysis.error or analysis.references or analysis.kind != "expression":
        return None
    try:
        return bool(compiled(text)({}, CONSTANT_BUDGET))
    except Exception:  # one that fails (or goes over its budget) at run time is not constant
        return None


def check_reachability(ctx: Context, graph: Graph) -> None:
    """Report nodes whose guard is always false, with the nodes that never run because of them."""
    root_of: dict[str, str] = {}  # node that never runs -> the always-false node behind it
    consequences: dict[str, list[str]] = {}
    nodes = ctx.workflow.nodes
    for node_id in graph.order:
        node = nodes[node_id]
        if constant_truth(node.when) is False:
            root_of[node_id] = node_id
            consequences[node_id] = []
            continue
        needs = graph.needs[node_id]
        trigger = node.trigger or "all_success"
        blocked = [n for n in needs if n in root_of]
        if needs and trigger != "all_done" and blocked and (
            trigger == "all_success" or len(blocked) == len(needs)
        ):
            root_of[node_id] = root_of[blocked[0]]
            consequences[root_of[node_id]].append(node_id)
    for root, after in consequences.items():
        related = [Related(ctx.key_span("nodes", n), f"`{n}` never runs either: it depends on "
                           f"`{root}`") for n in after]
        ctx.report("E305", f"node `{root}` never runs: its `when` is always false",
                   ctx.span("nodes", root, "when"), node_id=root, related=related,
                   help="remove the node or fix its guard; `trigger: all_done` runs a node "
                   "after skipped ones")
    for closer, node in nodes.items():
        loop = node.loop
        if loop is not None and constant_truth(loop.while_) is True and \
                (loop.on_exhausted or "fail") == "fail" and closer in graph.bodies:
            ctx.report("E305", f"the loop closed by `{closer}` never ends normally: its `while` "
                       "is always true and `on_exhausted` is `fail`",
                       ctx.span("nodes", closer, "loop", "while"), node_id=closer,
                       help="make the condition depend on the loop's results, or set "
                       "`on_exhausted: continue`")


def check_lints(ctx: Context, reads: Reads,
                tasks: Mapping[str, Callable[..., Any]] | None) -> None:
    """Warnings: retried tasks that are not idempotent, inputs and secrets nothing reads."""
    for node_id, node in ctx.workflow.nodes.items():
        if node.retry is None or node.task is None or node.idempotent is not None:
            continue
        fn = tasks.get(node.task) if tasks is not None else None
        if fn is not None and getattr(fn, "__tether_idempotent__", False):
            continue
        ctx.report("W100", f"node `{node_id}` retries task `{node.task}`, which is not marked "
                   "idempotent", ctx.key_span("nodes", node_id, "retry"), node_id=node_id,
                   help="add `idempotent: true` so a retry cannot repeat a committed side "
                   "effect, or `idempotent: false` if repeating it is safe")
    check_unused_secrets(ctx, reads.secrets)
    for name in ctx.workflow.inputs:
        if name not in reads.inputs and ID_RE.match(name):
            ctx.report("W101", f"input `{name}` is never read", ctx.key_span("inputs", name),
                       help="remove it, or read it as `{{ inputs." + name + " }}`")
