"""The graph preview: a document's plan drawn as Mermaid text, as ``tether graph`` draws it."""

from __future__ import annotations

from tether.compiler.compile import Compiler
from tether.compiler.graph_render import to_mermaid
from tether.diagnostics.render import summary
from tether.errors import DefinitionError
from tether.lsp.analysis import Analysis

GRAPH_COMMAND = "tether.graph"


class NoGraph(DefinitionError):
    """The document has errors, so no plan (and no graph) can be built from it."""


def graph_preview(analysis: Analysis) -> str:
    """Mermaid text of the document's plan; :class:`NoGraph` names its errors otherwise."""
    workflow = analysis.workflow
    errors = [d for d in analysis.diagnostics if d.is_error]
    if workflow is None or errors:
        raise NoGraph(f"no graph: {analysis.path.name} has errors ({summary(errors)})")
    plan, _ = Compiler().compile_workflow(workflow)
    if plan is None:
        raise NoGraph(f"no graph: {analysis.path.name} could not be compiled")
    return to_mermaid(plan)
