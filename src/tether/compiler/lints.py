"""Reachability and lints: nodes that can never run, constant guards, retried side effects,
unused inputs, reads of nodes that may be skipped, approvals whose answer nothing reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tether.compiler.concurrency import key_inputs
from tether.compiler.conditions import constant_truth, truthy_string
from tether.compiler.context import Context
from tether.compiler.graph import Graph
from tether.compiler.references import Reads
from tether.compiler.secrets import check_unused_secrets
from tether.diagnostics import Related
from tether.dsl.expressions import analyse
from tether.dsl.patterns import ID_RE

RUNS_ANYWAY = ("all_done", "any_success", "none_failed", "none_failed_min_one_success")
"""Trigger rules that run a node although one of its needs was skipped."""


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
        if needs and trigger not in ("all_done", "none_failed") and blocked and (
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
        if node.until is not None:  # a poll: `retry` bounds the calls (E210), by design
            continue
        fn = tasks.get(node.task) if tasks is not None else None
        if fn is not None and getattr(fn, "__tether_idempotent__", False):
            continue
        ctx.report("W100", f"node `{node_id}` retries task `{node.task}`, which is not marked "
                   "idempotent", ctx.key_span("nodes", node_id, "retry"), node_id=node_id,
                   help="add `idempotent: true` so a retry cannot repeat a committed side "
                   "effect, or `idempotent: false` if repeating it is safe")
    check_unused_secrets(ctx, reads.secrets)
    keyed = key_inputs(ctx.workflow)
    for name in ctx.workflow.inputs:
        if name not in reads.inputs and name not in keyed and \
                name not in ctx.workflow.broken_reads and \
                ID_RE.match(name):
            ctx.report("W101", f"input `{name}` is never read", ctx.key_span("inputs", name),
                       help="remove it, or read it as `{{ inputs." + name + " }}`")


def check_constant_conditions(ctx: Context) -> None:
    """W103: a `when` or `until` that is always true decides nothing."""
    for node_id, node in ctx.workflow.nodes.items():
        for key, text in (("when", node.when), ("until", node.until)):
            if text is None or constant_truth(text) is not True:
                continue
            literal = truthy_string(text)
            why = (f"the string `'{literal}'` is not empty, so it is true" if literal
                   else "a constant part decides it, whatever the names it reads hold"
                   if analyse(text).references else "it does not depend on anything")
            effect = "the node always runs" if key == "when" else "the first call ends it"
            ctx.report("W103", f"the `{key}` of node `{node_id}` is always true: {why}",
                       ctx.span("nodes", node_id, key), node_id=node_id,
                       help=f"{effect}; remove `{key}` or fix the condition"
                       + (" (write `false` without quotes)" if literal in ("false", "False")
                          else ""))


def check_skipped_reads(ctx: Context, reads: Reads) -> None:
    """W105: a node that runs after skipped needs reads a node that may have been skipped."""
    nodes = ctx.workflow.nodes
    guarded = {n for n, node in nodes.items() if node.when is not None}
    for switch in (node.switch for node in nodes.values() if node.switch is not None):
        guarded.update(m for members in switch.cases.values() for m in members)
        guarded.update(switch.default or ())
    status_read = {(site.reader, ref.attrs[0]) for site, ref in reads.nodes
                   if len(ref.attrs) > 1 and ref.attrs[1] == "status"}
    seen: set[tuple[str, str]] = set()
    for site, ref in reads.nodes:
        reader, target = site.reader, ref.attrs[0]
        if reader is None or target not in guarded or (reader, target) in seen:
            continue
        trigger = nodes[reader].trigger or "all_success"
        if trigger not in RUNS_ANYWAY or (reader, target) in status_read or \
                len(ref.attrs) < 2 or ref.attrs[1] != "output":
            continue
        seen.add((reader, target))
        why = "its `when`" if nodes[target].when is not None else "a switch"
        ctx.report("W105", f"node `{reader}` reads `{target}`, which may be skipped ({why}), "
                   f"and runs anyway (trigger `{trigger}`): the value is then null",
                   ctx.locate_name(site.path, site.text, ref), node_id=reader,
                   help=f"test `nodes.{target}.status == 'completed'` in the same template, "
                   f"or give a default: `nodes.{target}.output or {{}}`")


def check_unread_approvals(ctx: Context, reads: Reads) -> None:
    """W106: an approval with a form whose answer no template reads changes nothing. (One
    without a form is a plain gate: resuming it is the decision.)"""
    read = {ref.attrs[0] for _, ref in reads.nodes}
    for node_id, node in ctx.workflow.nodes.items():
        if node.approval is not None and node.approval.form and node_id not in read:
            ctx.report("W106", f"the answer of approval `{node_id}` is never read: a "
                       "rejection would change nothing", ctx.key_span("nodes", node_id),
                       node_id=node_id,
                       help=f"guard the next step with it, e.g. `when: \"{{{{ nodes.{node_id}"
                       ".output.approved }}\"`, or pass it to a task")
