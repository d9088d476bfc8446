"""A workflow's ``concurrency`` key: its template, limit and conflict policy (E880-E882).

The key is rendered when a run is submitted (or started in place), before any node runs:
the only name it may read is ``inputs`` (its declared inputs). The rendered key is stored
with the run; the store's claim lets at most ``limit`` runs with the same key run at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.compiler.context import Context
from tether.dsl.ast import Workflow
from tether.suggest import did_you_mean
from tether.templating import has_markup

if TYPE_CHECKING:  # the plan models are imported only to build a plan (`check` builds none)
    from tether.compiler.plan import OnConflict, PlanConcurrency

# The policies, as PlanConcurrency's `on_conflict` spells them (a test keeps the two equal).
POLICIES: tuple[str, ...] = ("queue", "cancel_running", "cancel_new", "reject")

MAX_LIMIT = 1_000_000
"""The largest ``limit`` (anything above is no limit worth stating)."""


def check_concurrency(ctx: Context) -> None:
    """Report what is wrong with the workflow's concurrency key, if it has one."""
    spec = ctx.workflow.doc.concurrency
    if spec is None:
        return
    for problem in key_problems(spec.key, ctx.workflow):
        ctx.report("E880", f"concurrency key: {problem}", ctx.span("concurrency", "key"),
                   help="the key reads the run's inputs, e.g. `{{ inputs.branch }}`")
    if spec.limit is not None and not 1 <= spec.limit <= MAX_LIMIT:
        ctx.report("E881", f"concurrency limit must be a positive integer (at most "
                   f"{MAX_LIMIT:,}), not {spec.limit}", ctx.span("concurrency", "limit"),
                   help="how many runs with the same key may run at once, e.g. `1`")
    if spec.on_conflict is not None and spec.on_conflict not in POLICIES:
        suggestion = did_you_mean(spec.on_conflict, POLICIES)
        ctx.report("E882", f"`{spec.on_conflict[:100]}` is not a conflict policy",
                   ctx.span("concurrency", "on_conflict"),
                   help=suggestion or "one of: " + ", ".join(f"`{p}`" for p in POLICIES))


def key_problems(key: str, workflow: Workflow) -> list[str]:
    """What is wrong with the key template: its syntax, a read of another name than
    ``inputs``, an input the workflow does not declare."""
    if not has_markup(key):
        return [] if key else ["the key is empty"]
    from jinja2 import TemplateSyntaxError, meta, nodes

    from tether.templating import ENV

    try:
        tree = ENV.parse(key)
    except TemplateSyntaxError as exc:
        return [f"the template cannot be read: {exc.message}"]
    names = meta.find_undeclared_variables(tree)
    problems = [f"reads `{name}`, which does not exist when a run is submitted (only "
                "`inputs`)" for name in sorted(names - {"inputs"})]
    declared = workflow.inputs
    used = sorted({n.attr for n in tree.find_all(nodes.Getattr)
                   if isinstance(n.node, nodes.Name) and n.node.name == "inputs"})
    for name in used:
        if name not in declared:
            hint = did_you_mean(name, declared)
            problems.append(f"reads input `{name}`, which is not declared"
                            + (f" ({hint})" if hint else ""))
    return problems


def key_inputs(workflow: Workflow) -> frozenset[str]:
    """The inputs the concurrency key reads (they count as read: no W101)."""
    spec = workflow.doc.concurrency
    if spec is None or not has_markup(spec.key):
        return frozenset()
    from jinja2 import TemplateSyntaxError, nodes

    from tether.templating import ENV

    try:
        tree = ENV.parse(spec.key)
    except TemplateSyntaxError:
        return frozenset()
    return frozenset(n.attr for n in tree.find_all(nodes.Getattr)
                     if isinstance(n.node, nodes.Name) and n.node.name == "inputs")


def plan_concurrency(workflow: Workflow) -> PlanConcurrency | None:
    """The plan's concurrency key: the document's, with the defaults filled in."""
    spec = workflow.doc.concurrency
    if spec is None:
        return None
    from tether.compiler.plan import ON_CONFLICT, PlanConcurrency

    policy: OnConflict = "queue"
    for known in ON_CONFLICT:
        if spec.on_conflict == known:
            policy = known
    return PlanConcurrency(key=spec.key, limit=spec.limit or 1, on_conflict=policy)
