"""Sub-workflows: resolve ``workflow:`` paths, compile the files they name, check ``with:``,
and keep the whole tree of files within the limits of :mod:`tether.compiler.limits`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.compiler.confinement import allowed_roots, inside, not_a_workflow, quotes_the_file
from tether.compiler.context import Context
from tether.compiler.tasks import is_literal
from tether.diagnostics import Diagnostic, Related, Span
from tether.diagnostics.codes import CODES
from tether.jsontypes import article, json_type_name, matches_type
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    from tether.compiler.compile import Compiler
    from tether.compiler.plan import Plan

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
        if not _confined(ctx, node_id, span, path, display):
            continue
        plan = _compile_one(ctx, compiler, node_id, span, path, display)
        if plan is not None:
            plans[node_id] = plan
            _check_inputs(ctx, node_id, plan, node.with_ or {})
    if plans:
        _check_expansion(ctx, compiler, plans)
    return plans


def _confined(ctx: Context, node_id: str, span: Span, path: Path, display: str) -> bool:
    """E706 for a path outside the workflow's directory and the project root (the file is
    not read: see :mod:`tether.compiler.confinement`)."""
    location = ctx.workflow.location
    roots = allowed_roots(location.parent if location is not None else Path.cwd())
    if inside(path, roots):
        return True
    where = " or ".join(f"`{root}`" for root in roots)
    ctx.report("E706", f"workflow file `{display}` is outside the project: a sub-workflow "
               f"must be inside {where}", span, node_id=node_id,
               help="move the file into the project, or set `root` under [tool.tether] in "
               "pyproject.toml to a directory that holds it")
    return False


def _compile_one(ctx: Context, compiler: Compiler, node_id: str, span: Span, path: Path,
                 display: str) -> Plan | None:
    if not path.exists():
        ctx.report("E700", f"workflow file `{display}` does not exist", span,
                   node_id=node_id, help="the path is relative to this file")
        return None
    if path in compiler.stack:
        chain = [*compiler.stack[compiler.stack.index(path):], path]
        names = " -> ".join(p.name for p in chain)
        ctx.report("E702", f"workflow files run each other in a cycle: {names}", span,
                   node_id=node_id)
        return None
    reference = Related(span, f"`{ctx.workflow.file}` runs `{display}`")
    if len(compiler.stack) > compiler.max_depth:
        names = _chain([*(file for file, _ in compiler.chain), ctx.workflow.file, display])
        ctx.report("E705", f"sub-workflows nest more than {compiler.max_depth} levels deep: "
                   f"{names}", span, related=[*(r for _, r in compiler.chain), reference],
                   node_id=node_id, help="flatten the tree of workflow files")
        return None
    compiler.chain.append((ctx.workflow.file, reference))
    try:
        plan, diagnostics = compiler.compile_file(path, display)
    finally:
        compiler.chain.pop()
    errors = [d for d in diagnostics if d.is_error]
    if errors and not_a_workflow(errors):
        ctx.report("E707", f"`{display}` is not a workflow file", span, node_id=node_id,
                   help="`workflow:` runs another workflow file (`tether: 1` at its top); "
                   "what the file holds is not shown")
        return None
    if plan is None or errors:
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        ctx.report("E701", f"workflow file `{display}` has {count}", span,
                   related=_root_causes(errors)[:MAX_NOTES], node_id=node_id,
                   help=f"run `tether check {display}` for the details")
        return None
    return plan


def _root_causes(errors: list[Diagnostic]) -> list[Related]:
    """The errors of a sub-workflow as notes, each once; those of its own sub-workflows
    (E701) are replaced by their notes, so the root cause shows however deep it is."""
    notes: dict[Related, None] = {}
    for error in errors:
        if error.code == "E701" and error.related:
            notes.update(dict.fromkeys(error.related))
        elif quotes_the_file(error):  # the file may not be a workflow: say what, not its text
            notes[Related(error.span, f"{error.code}: {CODES[error.code].title}")] = None
        else:
            notes[Related(error.span, f"{error.code}: {error.message}")] = None
    return list(notes)


def _chain(names: list[str]) -> str:
    """File names (without their directories) joined by arrows; a long chain keeps its
    ends. The notes of the diagnostic give each file's path and line."""
    names = [Path(name).name for name in names]
    shown = names if len(names) <= 8 else [*names[:3], "...", *names[-3:]]
    return " -> ".join(shown)


def _check_expansion(ctx: Context, compiler: Compiler, plans: dict[str, Plan]) -> None:
    """Refuse a workflow whose sub-workflows, embedded once per node, make too many nodes."""
    total = len(ctx.workflow.nodes)
    for node_id, plan in plans.items():
        total += compiler.expanded(plan)
        if total > compiler.max_nodes:
            span = ctx.span("nodes", node_id, "workflow")
            via = f" (run by {_chain([file for file, _ in compiler.chain])})" \
                if compiler.chain else ""
            ctx.report("E705", f"with its sub-workflows, `{ctx.workflow.file}` has more than "
                       f"{compiler.max_nodes:,} nodes{via}", span,
                       related=[r for _, r in compiler.chain],
                       node_id=node_id,
                       help="each `workflow:` node embeds a copy of its file; run a large "
                       "fan-out with `for_each` on one node instead of many nodes")
            return


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
