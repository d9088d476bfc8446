"""Sub-workflows: resolve ``workflow:`` paths, compile the files they name, check ``with:``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.compiler.context import Context
from tether.compiler.plan import Plan
from tether.compiler.tasks import is_literal
from tether.diagnostics import Related
from tether.dsl.loader import read_workflow
from tether.jsontypes import article, json_type_name, matches_type
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    from tether.compiler.compile import Compiler

MAX_NOTES = 10


def resolve(ctx: Context, ref: str) -> tuple[Path, str]:
    """The file a ``workflow:`` reference names, and how diagnostics show it."""
    location = ctx.workflow.location
    base = location.parent if location is not None else Path.cwd()
    display = os.path.normpath(os.path.join(os.path.dirname(ctx.workflow.file), ref))
    return (base / ref).resolve(), display


def compile_subworkflows(ctx: Context, compiler: Compiler) -> dict[str, Plan]:
    """Compile every sub-workflow the workflow references; report the broken ones."""
    plans: dict[str, Plan] = {}
    for node_id, node in ctx.workflow.nodes.items():
        if node.workflow is None:
            continue
        span = ctx.span("nodes", node_id, "workflow")
        path, display = resolve(ctx, node.workflow)
        if not path.is_file():
            ctx.report("E700", f"workflow file `{display}` does not exist", span,
                       node_id=node_id, help="the path is relative to this file")
            continue
        if path in compiler.stack:
            chain = [*compiler.stack[compiler.stack.index(path):], path]
            names = " -> ".join(p.name for p in chain)
            ctx.report("E702", f"workflow files run each other in a cycle: {names}", span,
                       node_id=node_id)
            continue
        workflow, diagnostics = read_workflow(path, display=display)
        plan = None
        if workflow is not None and not any(d.is_error for d in diagnostics):
            plan, more = compiler.compile_workflow(workflow)
            diagnostics = diagnostics + more
        errors = [d for d in diagnostics if d.is_error]
        if plan is None or errors:
            notes = [Related(d.span, f"{d.code}: {d.message}") for d in errors[:MAX_NOTES]]
            count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
            ctx.report("E701", f"workflow file `{display}` has {count}", span,
                       related=notes, node_id=node_id,
                       help=f"run `tether check {display}` for the details")
            continue
        plans[node_id] = plan
        _check_inputs(ctx, node_id, plan, node.with_ or {})
    return plans


def _check_inputs(ctx: Context, node_id: str, plan: Plan, given: dict[str, Any]) -> None:
    declared = {i.name: i for i in plan.inputs}
    for name, value in given.items():
        spec = declared.get(name)
        if spec is None:
            ctx.report("E703", f"workflow `{plan.name}` has no input `{name}`",
                       ctx.key_span("nodes", node_id, "with", name), node_id=node_id,
                       help=did_you_mean(name, list(declared))
                       or f"its inputs: {', '.join(declared) or 'none'}")
        elif is_literal(value) and value is not None and not matches_type(value, spec.type):
            ctx.report("E501", f"input `{name}` of workflow `{plan.name}` must be "
                       f"{article(spec.type)}, not {json_type_name(value)}",
                       ctx.span("nodes", node_id, "with", name), node_id=node_id)
    for name, spec in declared.items():
        if spec.required and name not in given:
            ctx.report("E704", f"workflow `{plan.name}` needs input `{name}`",
                       ctx.key_span("nodes", node_id), node_id=node_id,
                       help=f"add `{name}:` under `with:`")
