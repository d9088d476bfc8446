"""The compiler's entry points: ``compile`` one workflow to a Plan, ``check`` files for CI."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from tether.compiler.agents import check_agents
from tether.compiler.concurrency import check_concurrency
from tether.compiler.context import Context
from tether.compiler.graph import analyse_graph
from tether.compiler.limits import MAX_EXPANDED_NODES, MAX_SUBWORKFLOW_DEPTH, expanded_size
from tether.compiler.lints import (
    check_constant_conditions,
    check_lints,
    check_reachability,
    check_skipped_reads,
    check_unread_approvals,
)
from tether.compiler.references import check_templates
from tether.compiler.renames import check_renames
from tether.compiler.schedules import check_schedule
from tether.compiler.shapes import check_shapes
from tether.compiler.subworkflows import compile_subworkflows
from tether.compiler.tasks import check_tasks
from tether.compiler.webhooks import check_webhook
from tether.diagnostics import Diagnostic, Related, sort_diagnostics
from tether.dsl.ast import Workflow
from tether.dsl.loader import read_workflow, syntax_of
from tether.dsl.source import with_anchor_notes
from tether.errors import WorkflowError
from tether.gc_pause import paused_gc

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

Tasks = Mapping[str, Callable[..., Any]]


Result: TypeAlias = "tuple[Plan | None, list[Diagnostic]]"


class Compiler:
    """Compiles workflows; caches sub-workflow plans and tracks the chain of files open.

    Args:
        tasks: Task functions by name, to check task names and arguments against.
        max_depth: How deep sub-workflows may nest.
        max_nodes: How many nodes a workflow may have with its sub-workflows embedded.
    """

    def __init__(self, tasks: Tasks | None = None, *, max_depth: int = MAX_SUBWORKFLOW_DEPTH,
                 max_nodes: int = MAX_EXPANDED_NODES) -> None:
        self.tasks = tasks
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.stack: list[Path] = []  # the files being compiled, outermost first
        self.chain: list[tuple[str, Related]] = []  # each open file's reference to the next
        # Results by file and depth: a file reached at another depth can meet the depth
        # limit elsewhere. Sizes of plans by id, each measured once.
        self._cache: dict[tuple[Path, int], Result] = {}
        self._sizes: dict[int, int] = {}

    def compile_workflow(self, workflow: Workflow, *, build: bool = True) -> Result:
        """Compile a workflow; the plan is None when any error was found.

        ``build=False`` (checking a file): every check, but no plan is built, and the result
        is not kept for a workflow that embeds the file (which needs its plan).
        """
        if workflow.location is None:
            return self._compile(workflow, build)
        key = (workflow.location, len(self.stack))
        if key in self._cache:
            return self._cache[key]
        self.stack.append(workflow.location)
        try:
            result = self._compile(workflow, build)
        finally:
            self.stack.pop()
        if build:
            self._cache[key] = result
        return result

    def compile_file(self, path: Path, display: str) -> Result:
        """Read and compile a sub-workflow file, once per depth it is reached at."""
        key = (path, len(self.stack))
        if key not in self._cache:
            # the syntax from the name as written: `path` is resolved, symlinks and all
            workflow, diagnostics = read_workflow(path, display=display,
                                                  syntax=syntax_of(display))
            plan = None
            if workflow is not None and not any(d.is_error for d in diagnostics):
                plan, more = self.compile_workflow(workflow)
                diagnostics = diagnostics + more
            self._cache[key] = (plan, diagnostics)
        return self._cache[key]

    def expanded(self, plan: Plan) -> int:
        """The nodes of ``plan`` with its sub-plans embedded, each plan measured once."""
        return expanded_size(plan, self._sizes)

    def _compile(self, workflow: Workflow, build: bool = True) -> Result:
        ctx = Context(workflow)
        graph = analyse_graph(ctx)
        reads = check_templates(ctx, graph)
        check_reachability(ctx, graph)
        check_constant_conditions(ctx)
        subplans = compile_subworkflows(ctx, self)
        if self.tasks is not None:
            check_tasks(ctx, self.tasks)
        check_agents(ctx, self.tasks)
        check_schedule(ctx)
        check_renames(ctx)
        check_webhook(ctx)
        check_concurrency(ctx)
        check_shapes(ctx, reads, self.tasks)
        check_lints(ctx, reads, self.tasks)
        check_skipped_reads(ctx, reads)
        check_unread_approvals(ctx, reads)
        ctx.diagnostics[:] = with_anchor_notes(ctx.diagnostics, workflow.source)
        broken = workflow.broken_nodes or workflow.broken_inputs or not workflow.valid
        if ctx.has_errors or broken or not graph.acyclic or not build:
            return None, ctx.diagnostics
        from tether.compiler.build import build_plan  # (checking a file builds no plan)

        return build_plan(workflow, graph, subplans, ctx.called), ctx.diagnostics

    def check_file(self, path: str | os.PathLike[str]) -> list[Diagnostic]:
        """Every diagnostic of one file (building a plan reports nothing: none is built, so
        the document is read light: validated without pydantic)."""
        with paused_gc():
            workflow, diagnostics = read_workflow(path, light=True)
            if workflow is not None:
                _, more = self.compile_workflow(workflow, build=False)
                diagnostics = diagnostics + more
        return diagnostics


def compile(
    source: str | os.PathLike[str] | Workflow, *, tasks: Tasks | None = None
) -> Plan:
    """Compile a workflow file (or a loaded :class:`Workflow`) to a :class:`Plan`.

    Raises :class:`~tether.errors.WorkflowError` carrying every diagnostic when the workflow
    has errors. Warnings do not prevent compilation.
    """
    return compile_with_warnings(source, tasks=tasks)[0]


def compile_with_warnings(
    source: str | os.PathLike[str] | Workflow, *, tasks: Tasks | None = None
) -> tuple[Plan, list[Diagnostic]]:
    """:func:`compile`, also returning the warnings found."""
    compiler = Compiler(tasks)
    with paused_gc():
        if isinstance(source, Workflow):
            workflow: Workflow | None = source
            diagnostics: list[Diagnostic] = []
        else:
            workflow, diagnostics = read_workflow(source)
        plan = None
        if workflow is not None:
            plan, more = compiler.compile_workflow(workflow)
            diagnostics = diagnostics + more
    if plan is None or any(d.is_error for d in diagnostics):
        raise WorkflowError(sort_diagnostics(diagnostics))
    return plan, sort_diagnostics(diagnostics)


def discover(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The workflow files named by ``paths``: files as given, directories searched.

    In a directory, ``*.flow`` files and ``*.yaml``/``*.yml`` files whose first key is
    ``tether:`` are workflows; hidden directories are skipped.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            found.append(path)
            continue
        for candidate in sorted(path.rglob("*")):
            relative = candidate.relative_to(path).parts
            if any(part.startswith(".") for part in relative[:-1]) or not candidate.is_file():
                continue
            syntax = syntax_of(candidate)
            if syntax == "flow" or (syntax == "yaml" and starts_with_tether_key(candidate)):
                found.append(candidate)
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    return list(unique)


def starts_with_tether_key(path: Path) -> bool:
    """Whether a YAML file's first key is ``tether:`` (read from its first 64 KiB)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    for line in head.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        return stripped.startswith("tether:")
    return False


def check(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    tasks: Tasks | None = None,
) -> list[Diagnostic]:
    """Check workflow files and directories; return every diagnostic, sorted by place."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    compiler = Compiler(tasks)
    diagnostics: list[Diagnostic] = []
    for path in discover(paths):
        diagnostics.extend(compiler.check_file(path))
    return sort_diagnostics(diagnostics)
