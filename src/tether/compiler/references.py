"""Template checks: syntax, and every name a template reads against what exists and is upstream."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from tether import templating
from tether.compiler.agents import callers_in_graph
from tether.compiler.context import Context, Where
from tether.compiler.graph import Graph
from tether.compiler.needs_reads import check_needs_read
from tether.compiler.secrets import check_secret
from tether.diagnostics import Span
from tether.dsl.expressions import Analysis, Reference, analyse
from tether.dsl.source import Path
from tether.suggest import did_you_mean
from tether.trigger import TRIGGER_FIELDS

if TYPE_CHECKING:
    from tether.dsl.document import AgentSpec, NodeSpec

NODE_FIELDS = ("output", "status")
ROOTS = ("inputs", "nodes", "secrets", "item", "iteration", "run", "needs", "trigger")
RUN_FIELDS = ("id", "workflow", "started_at", "attempt", "parent_id")


@dataclass
class Reads:
    """What the templates of a workflow read: the inputs and secrets (for the unused-name
    lints) and every read of a node (for the checks of output shapes and skipped nodes)."""

    inputs: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)
    nodes: list[tuple[Site, Reference]] = field(default_factory=list)
    items: list[tuple[Site, Reference]] = field(default_factory=list)


class Site(NamedTuple):
    """One string that may hold a template, and what it may read (a named tuple: there is
    one per string of the workflow, and it is built quicker than a frozen dataclass)."""

    path: Path
    text: str
    reader: str | None  # the node reading, or None for the workflow's output
    condition: bool = False  # must be a single expression (when, while, for_each)
    item: bool = False  # `item` is in scope
    iteration: bool = False  # `iteration` is in scope
    reads_self: bool = False  # the loop's `while` (or `until`) may read its own node
    stored: str | None = None  # where the value is stored and shown, if it is
    callers: tuple[str, ...] = ()  # an agent run only when called: the graph agents calling it
    setting: bool = False  # a numeric setting: reads only inputs
    in_when: bool = False  # the node's `when` (decided once, before its elements)


def strings(value: Any, path: Path) -> list[tuple[Path, str]]:
    """Every string inside a JSON value, with its path (a list: no generator per level)."""
    found: list[tuple[Path, str]] = []
    if value is not None:
        _strings(value, path, found)
    return found


def _strings(value: Any, path: Path, found: list[tuple[Path, str]]) -> None:
    if isinstance(value, str):
        found.append((path, value))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _strings(item, (*path, i), found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(item, (*path, key), found)


def sites(ctx: Context, graph: Graph) -> Iterator[Site]:
    """Every template site of the workflow."""
    for node_id, node in ctx.workflow.nodes.items():
        base: Path = ("nodes", node_id)
        in_loop = bool(graph.enclosing.get(node_id))
        item = node.for_each is not None or node.matrix is not None
        inputs = f"the inputs of sub-workflow node `{node_id}`" if node.workflow else None
        for path, text in strings(node.with_, (*base, "with")):
            yield Site(path, text, node_id, item=item, iteration=in_loop, stored=inputs)
        if node.when is not None:
            yield Site((*base, "when"), node.when, node_id, condition=True, iteration=in_loop,
                       in_when=item)
        if isinstance(node.for_each, str):
            yield Site((*base, "for_each"), node.for_each, node_id, condition=True,
                       iteration=in_loop)
        else:
            for path, text in strings(node.for_each, (*base, "for_each")):
                yield Site(path, text, node_id, iteration=in_loop)
        for path, text in strings(node.matrix, (*base, "matrix")):
            yield Site(path, text, node_id, iteration=in_loop)
        yield from _kind_sites(node, base, node_id, in_loop, item)
        if node.title is not None:
            yield Site((*base, "title"), node.title, node_id, item=item, iteration=in_loop,
                       stored=f"the title of node `{node_id}` (shown in progress and the "
                       "console)")
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


def _kind_sites(node: NodeSpec, base: Path, node_id: str, in_loop: bool,
                item: bool) -> Iterator[Site]:
    """The templates of switches, fail nodes, polling and numeric settings."""
    if node.switch is not None:
        yield Site((*base, "switch", "on"), str(node.switch.on), node_id, condition=True,
                   iteration=in_loop)
    if node.fail is not None:
        yield Site((*base, "fail"), node.fail, node_id, iteration=in_loop)
    if node.until is not None:
        yield Site((*base, "until"), node.until, node_id, condition=True, item=item,
                   iteration=in_loop, reads_self=True)
    for key, value in (("concurrency", node.concurrency), ("timeout", node.timeout)):
        if isinstance(value, str) and (key == "concurrency" or "{{" in value):
            yield Site((*base, key), value, node_id, condition=True, setting=True)
    approval = node.approval
    if approval is not None and isinstance(approval.timeout, str) and "{{" in approval.timeout:
        yield Site((*base, "approval", "timeout"), approval.timeout, node_id, condition=True,
                   setting=True)
    for key, text in (("sleep", node.sleep), ("sleep_until", node.sleep_until)):
        if text is not None:
            yield Site((*base, key), text, node_id, iteration=in_loop)
    if node.loop is not None and isinstance(node.loop.max_iterations, str):
        yield Site((*base, "loop", "max_iterations"), node.loop.max_iterations, node_id,
                   condition=True, setting=True)


_REFUSED_MESSAGES = {
    "E420": ("templates cannot `{% include %}` another template",
             "a template has no files to read: write the text here, or build it in a task"),
    "E421": ("templates cannot `{% {word} %}` macros from another template",
             "define the macro in this template, or compute the value in a task"),
    "E422": ("templates cannot `{% extends %}` another template",
             "a template has no files to read: write the whole text here"),
    "E423": ("the `attr` filter is refused",
             "read the attribute with `.name` or `['name']`, which `check` can see"),
    "E424": ("`attr('{word}')` reaches for a private attribute",
             "the template sandbox refuses names starting with an underscore"),
}


def _report_refused(ctx: Context, site: Site, refused: tuple[tuple[str, str], ...]) -> None:
    """E420-E424: what the runtime sandbox refuses, reported at the word that does it."""
    for code, word in refused:
        message, help_text = _REFUSED_MESSAGES[code]
        ctx.report(code, message.replace("{word}", word),
                   ctx.locate(site.path, site.text, word), node_id=site.reader,
                   help=help_text)


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
        offset = syntax_error_offset(site.text, analysis.error)
        span = ctx.at_offset(site.path, site.text, offset, 1) if offset is not None else \
            ctx.locate(site.path, site.text, "{{")
        if analysis.error_line > 1 and offset is None:
            span = Span(span.file, span.line + analysis.error_line - 1, 1)
        ctx.report("E400", f"template syntax error: {analysis.error}", span, node_id=node_id)
        return
    if site.condition and analysis.kind != "expression":
        ctx.report("E409", f"`{site.path[-1]}` must be a single `{{{{ ... }}}}` expression",
                   ctx.span(*site.path), node_id=node_id,
                   help="text around the expression, or several expressions, make a string, "
                   "which is always true")
    _report_refused(ctx, site, analysis.refused)
    for name in analysis.unsafe:
        ctx.report("E408", f"templates cannot read private attributes such as `{name}`",
                   ctx.locate(site.path, site.text, name), node_id=node_id,
                   help="the template sandbox refuses names starting with an underscore")
    for name in analysis.unknown_filters:
        ctx.report("E410", f"unknown filter `{name}`", ctx.locate(site.path, site.text, name),
                   node_id=node_id,
                   help=_available(name, "filters", sorted(templating.ENV.filters)))
    for name in analysis.unknown_tests:
        ctx.report("E410", f"unknown test `{name}`", ctx.locate(site.path, site.text, name),
                   node_id=node_id,
                   help=_available(name, "tests", sorted(templating.ENV.tests)))
    for ref in analysis.references:
        _check_reference(ctx, graph, site, ref, reads)


def _available(name: str, what: str, known: list[str]) -> str:
    """Did-you-mean, then the whole list of what exists."""
    close = did_you_mean(name, known)
    listed = f"available {what}: " + ", ".join(known)
    return f"{close} ({listed})" if close else listed


_PYTHON_ONLY = re.compile(r"~")
_DASHED_READ = re.compile(r"\bnodes\.([A-Za-z][\w]*(?:-[A-Za-z_][\w]*)+)")


def syntax_error_offset(text: str, message: str = "") -> int | None:
    """Where in ``text`` a broken ``{{ expression }}`` goes wrong: the token Jinja2 names
    (``got 'b'``) at or after the place Python's parser (whose expression syntax Jinja2's
    follows) stops; None when it cannot tell."""
    offset = _python_offset(text)
    if offset is None and "unexpected '}'" in message and "}}" in text:
        return text.index("}}")  # a bracket left open: the expression ends before it closes
    got = re.search(r"got '([^']+)'", message)
    if got and got.group(1) not in ("end of print statement", "end of statement block"):
        start = text.find("{{") + 2 if offset is None else offset
        found = text.find(got.group(1), max(start, 0))
        if found >= 0:
            return found
    return offset


def _python_offset(text: str) -> int | None:
    for block in re.finditer(r"\{\{(.*?)\}\}", text, re.DOTALL):
        inner = block.group(1)
        if "\n" in inner:
            continue
        source = _PYTHON_ONLY.sub("+", inner)  # `a ~ b` joins strings; same length in Python
        source = re.sub(r"\bis\s+not\b|\bis\b", lambda m: " " * len(m.group()), source) \
            if "is " in source else source
        try:
            ast.parse("(" + source + "\n)", mode="eval")
        except SyntaxError as exc:
            column = (exc.offset or 1) - 2  # the "(" added in front
            if exc.lineno == 1 and 0 <= column <= len(inner):
                return block.start(1) + min(max(column, 0), max(len(inner) - 1, 0))
            if exc.lineno == 2:  # the expression ended early: point at the closing braces
                return block.end(1)
    return None


def _check_reference(ctx: Context, graph: Graph, site: Site, ref: Reference,
                     reads: Reads) -> None:
    span = ctx.name_at(site.path, site.text, ref)
    reader = site.reader
    if site.setting and ref.root not in ("inputs", "run"):
        ctx.report("E414", f"`{site.path[-1]}` of node `{reader}` reads `{ref.root}`; a "
                   "numeric setting is computed from the inputs", span, node_id=reader,
                   help="compute it from `inputs.<name>` (it is decided when the node starts)")
        return
    if ref.root == "inputs":
        _check_input(ctx, ref, span, reader, reads.inputs)
    elif ref.root == "secrets":
        check_secret(ctx, site, ref, span, reads.secrets)
    elif ref.root == "nodes":
        if _check_node_read(ctx, graph, site, ref, span):
            reads.nodes.append((site, ref))
    elif ref.root == "run":
        _check_run_read(ctx, ref, span, reader)
    elif ref.root == "trigger":
        _check_trigger_read(ctx, ref, span, reader)
    elif ref.root == "needs":
        check_needs_read(ctx, ref, span, reader, graph.needs.get(reader or "", []))
    elif ref.root == "item":
        if site.in_when:
            ctx.report("E406", "`item` is not defined in `when`: `when` is decided once for "
                       "the node, before its elements run", span, node_id=reader,
                       help="to leave out some elements, filter the list: `for_each: "
                       "\"{{ inputs.urls | reject('none') | list }}\"`, or use `select` / "
                       "`selectattr`")
        elif not site.item:
            where = "in `for_each` itself" if site.path[-1:] == ("for_each",) else \
                "outside a node with `for_each`"
            ctx.report("E406", f"`item` is not defined {where}", span, node_id=reader,
                       help="`item` is the current element of the node's `for_each` list")
        else:
            reads.items.append((site, ref))
    elif ref.root == "iteration":
        if not site.iteration:
            ctx.report("E407", "`iteration` is only defined inside a loop", span,
                       node_id=reader, help="`iteration` counts the passes of the enclosing loop")
    elif ref.root in analysis_calls(site) and ref.root not in templating.ENV.globals:
        report_unknown_function(ctx, ref.root, span, reader)
    elif ref.root not in templating.ENV.globals and not _dashed_id_part(site.text, ref.root):
        ctx.report("E401", f"unknown name `{ref.root}`", span, node_id=reader,
                   help=_unknown_name_help(ref, site))


def _unknown_name_help(ref: Reference, site: Site) -> str:
    if ref.root == "matrix":  # GitHub Actions' `matrix.os`
        axis = ref.attrs[0] if ref.attrs else "<axis>"
        where = "" if site.item else " (in a node with `matrix:`)"
        return f"a matrix combination is `item`{where}: write `item.{axis}`"
    return did_you_mean(ref.root, ROOTS) or \
        "templates read `inputs.<name>`, `nodes.<id>.output`, `run.<field>` and " \
        "`trigger.<field>`"


def _dashed_id_part(text: str, name: str) -> bool:
    """Whether ``name`` is a part of a dashed node id (``nodes.coverage-combine``), which
    Jinja2 reads as a subtraction: the unknown node is reported (E403, with the subscript to
    write), not each part after a dash as an unknown name."""
    return any(name in match.group(1).split("-")[1:]
               for match in _DASHED_READ.finditer(text))


def analysis_calls(site: Site) -> tuple[str, ...]:
    return analyse(site.text).calls


def report_unknown_function(ctx: Context, name: str, span: Where, reader: str | None) -> None:
    """E412: a call of a name that is not a template function, with what is available."""
    functions = sorted(n for n, v in templating.ENV.globals.items() if callable(v))
    close = did_you_mean(name, functions)
    filters = difflib.get_close_matches(name, sorted(templating.ENV.filters), n=1, cutoff=0.6)
    if close is None and filters:
        close = f"`{name}` is not a function; did you mean the filter `x | {filters[0]}`?"
    listed = "functions: " + ", ".join(f"`{f}`" for f in functions) + \
        "; and every Jinja2 filter, written `value | filter`"
    ctx.report("E412", f"unknown function `{name}`", span, node_id=reader,
               help=f"{close} ({listed})" if close else listed)


def _check_run_read(ctx: Context, ref: Reference, span: Where, reader: str | None) -> None:
    if ref.attrs and ref.attrs[0] not in RUN_FIELDS:
        field = ref.attrs[0]
        ctx.report("E413", f"`run` has no field `{field}`", span, node_id=reader,
                   help=did_you_mean(field, RUN_FIELDS)
                   or "the run's fields: " + ", ".join(f"`{f}`" for f in RUN_FIELDS))


def _check_trigger_read(ctx: Context, ref: Reference, span: Where, reader: str | None) -> None:
    """E415: ``trigger.<field>`` names a field of what started the run (``payload`` is open
    below it; ``headers`` holds only the headers the workflow's webhook lists)."""
    if ref.attrs and ref.attrs[0] not in TRIGGER_FIELDS:
        field = ref.attrs[0]
        close = did_you_mean(field, TRIGGER_FIELDS) or \
            f"a webhook's body is read as `trigger.payload.{field}`"
        ctx.report("E415", f"`trigger` has no field `{field}`", span, node_id=reader,
                   help=close + " (the trigger's fields: " + ", ".join(
                       f"`{f}`" for f in TRIGGER_FIELDS) + ")")
    elif ref.attrs[:1] == ("headers",) and len(ref.attrs) > 1:
        on = ctx.workflow.doc.on
        hook = on.webhook if on is not None else None
        kept = [h.lower() for h in (hook.headers or []) if isinstance(h, str)] if hook else []
        header = ref.attrs[1]
        if header.lower() not in kept:
            ctx.report("E415", f"`trigger.headers` never holds `{header}`: " + (
                "a run keeps only the headers its webhook lists" if hook else
                "this workflow has no webhook"), span, node_id=reader,
                help=f"add `{header}` to `on.webhook.headers`" if hook else
                "`trigger.headers` is a webhook's (`on: webhook`, `headers: [...]`)")


def _check_input(ctx: Context, ref: Reference, span: Where, reader: str | None,
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
                     span: Where) -> bool:
    """Check one read of ``nodes``; True when it reads an existing node's output or status
    from where it may."""
    reader = site.reader
    if not ref.attrs:
        if ref.dynamic:
            ctx.report("E403", "a template must name the node it reads with a fixed id", span,
                       node_id=reader, help="write `nodes.<id>.output`")
        else:
            ctx.report("E404", "a template cannot read all of `nodes`", span, node_id=reader,
                       help="read the nodes you need one by one: `nodes.<id>.output`")
        return False
    target = ref.attrs[0]
    nodes = ctx.workflow.nodes
    if target not in nodes:
        if target in ctx.workflow.broken_nodes:
            _check_broken_read(ctx, graph, target, reader, span)
        else:
            ctx.report("E403", f"unknown node `{target}`", span, node_id=reader,
                       help=_unknown_node_help(target, site.text, list(nodes)))
        return False
    if target in ctx.called and target != reader:
        callers = ", ".join(f"`{c}`" for c in ctx.called[target])
        ctx.report("E910", f"`{target}` is an agent that runs only when called (by {callers}): "
                   "it has no output of its own to read", span, node_id=reader,
                   help="read the output of the agent that calls it")
        return False
    if len(ref.attrs) > 1 and ref.attrs[1] not in NODE_FIELDS:
        field = ref.attrs[1]
        ctx.report("E405", f"node `{target}` has no field `{field}`", span, node_id=reader,
                   help=did_you_mean(field, NODE_FIELDS)
                   or f"did you mean `nodes.{target}.output.{field}`?")
        return False
    if reader is None or reader in graph.cyclic or target in graph.cyclic:
        # upstream is not judged while a cycle stands (E302 says why), but the read is kept:
        # its field (E604) and what it reads (W105, W106) are checked in the same pass
        return True
    if site.callers or reader in ctx.called:
        return _check_called_read(ctx, graph, site, target, span)
    if graph.is_upstream(target, reader) or graph.share_loop(target, reader):
        return True
    if target == reader and site.reads_self:
        return False
    if target == reader:
        ctx.report("E404", f"node `{reader}` reads its own output", span, node_id=reader,
                   help="a node's output exists only after it ran")
        return False
    ctx.report("E404", f"node `{reader}` reads `{target}`, which is not upstream of it",
               span, node_id=reader, help=_not_upstream_help(graph, target, reader))
    return False


def _not_upstream_help(graph: Graph, target: str, reader: str) -> str:
    """Add the need, unless ``target`` runs after ``reader``: that need would be a cycle."""
    if not graph.is_upstream(reader, target):
        return f"add `{target}` to the `needs` of `{reader}` so it runs first"
    how = "needs" if reader in graph.needs.get(target, ()) else "runs after"
    return (f"`{target}` {how} `{reader}`, so it cannot also run before it (that would be a "
            f"cycle): read `{target}` in a node that needs it, or in the workflow's `output`")


def _check_broken_read(ctx: Context, graph: Graph, target: str, reader: str | None,
                       span: Where) -> None:
    """A read of a node set aside for schema errors: still not-upstream if nothing needs it."""
    if reader is None or reader in graph.cyclic or graph.reads_broken(target, reader):
        return
    ctx.report("E404", f"node `{reader}` reads `{target}`, which is not upstream of it",
               span, node_id=reader,
               help=f"add `{target}` to the `needs` of `{reader}` so it runs first")


def _check_called_read(ctx: Context, graph: Graph, site: Site, target: str,
                       span: Where) -> bool:
    """A template of an agent run only when called reads a node: it must be upstream of
    every graph agent that calls it. True when it is."""
    reader = site.reader
    for caller in site.callers:
        if caller in graph.cyclic:
            continue
        if target == caller:
            ctx.report("E404", f"agent `{reader}` reads `{target}`, which calls it: its output "
                       "does not exist yet", span, node_id=reader,
                       help="pass what it needs in the request instead")
            return False
        if not (graph.is_upstream(target, caller) or graph.share_loop(target, caller)):
            ctx.report("E404", f"agent `{reader}` reads `{target}`, which is not upstream of "
                       f"`{caller}`, the agent that calls it", span, node_id=reader,
                       help=f"add `{target}` to the `needs` of `{caller}` so it runs first")
            return False
    return True


def _unknown_node_help(target: str, text: str, known: list[str]) -> str | None:
    """Did-you-mean; for ``nodes.build`` in ``nodes.build-linux``, the subscript to write."""
    dashed = [n for n in known if n.startswith(target + "-") and n in text.replace(" ", "")]
    if dashed:
        return f"an id with `-` is read as `nodes['{dashed[0]}']`"
    return did_you_mean(target, known)
