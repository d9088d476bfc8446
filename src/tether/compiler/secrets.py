"""Templates reading secrets: only declared ones, and never where the value would be stored.

A secret's value comes from the environment of the process running a node and never reaches
the store; the runtime masks it wherever it could. The compiler refuses what masking would
only hide: reading an undeclared name, and reading a secret into a value the run stores and
shows (an approval's reason or context, the workflow's output, a sub-workflow's inputs, an
agent's instructions or prompt: E802), and reading one into a value that becomes run data (a
switch's value, a fail node's message, ``for_each``/``matrix`` items: E803). A task's ``with:``
may read secrets: the runtime stores those inputs as placeholders (``runtime/secrets.py``).
Conditions (``when``, ``until``, ``loop.while``) may too: they yield a decision, not the value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.compiler.context import Context, Where
from tether.dsl.expressions import Reference
from tether.dsl.patterns import SECRET_RE
from tether.suggest import closest, did_you_mean

if TYPE_CHECKING:
    from tether.compiler.references import Site


def check_secret(ctx: Context, site: Site, ref: Reference, span: Where, used: set[str]) -> None:
    """Check one ``secrets.NAME`` read; record the names read in ``used``."""
    declared = list(ctx.workflow.doc.secrets or ())
    reader = site.reader
    if not ref.attrs:
        used.update(declared)  # a mistake reported below; its secrets are not unused
        ctx.report("E801", "a template must name the secret it reads", span, node_id=reader,
                   help="write `secrets.NAME` with a declared name")
        return
    name = ref.attrs[0]
    used.add(name)
    if name not in declared:
        near = closest(name, declared)
        used.update([near] if near else [])
        ctx.report("E801", f"secret `{name}` is not declared", span, node_id=reader,
                   help=did_you_mean(name, declared) or f"declare it: `secrets: [{name}]`")
    if site.stored is not None:
        ctx.report("E802", f"secret `{name}` is read into {site.stored}, which the run "
                   "stores and shows", span, node_id=reader,
                   help="pass the secret to the task that needs it (`with:`); secrets never "
                   "reach the store")
        return
    place = data_place(site)
    if place is not None:
        ctx.report("E803", f"secret `{name}` is read into {place}, which becomes data the run "
                   "stores", span, node_id=reader,
                   help="pass the secret to the task that needs it (`with:`): a task input "
                   "is stored as a placeholder and rendered again when the node runs")


def data_place(site: Site) -> str | None:
    """Where the value of a template becomes run data (a node's output, its error, the
    elements of a fan-out), or None: then only a task's ``with:`` holds it, as a placeholder."""
    path = site.path
    if path[:1] == ("title",):  # a templated run title (shown in every list of runs)
        return "the run's title"
    if len(path) < 3 or path[0] != "nodes":
        return None
    node_id, key = path[1], path[2]
    if key == "title":
        return f"the title of node `{node_id}` (shown with each of its checkpoints)"
    if key == "switch":
        return f"the value of switch `{node_id}` (its output)"
    if key == "fail":
        return f"the message of fail node `{node_id}` (its error)"
    if key in ("for_each", "matrix"):
        return f"the `{key}` items of node `{node_id}` (each element's input and output)"
    return None


def check_unused_secrets(ctx: Context, used: set[str]) -> None:
    """W102 for each declared secret no template reads."""
    for i, name in enumerate(ctx.workflow.doc.secrets or ()):
        if name not in used and SECRET_RE.match(name):  # an invalid name is E800 already
            ctx.report("W102", f"secret `{name}` is never read", ctx.span("secrets", i),
                       help="remove it, or read it as `{{ secrets." + name + " }}`")
