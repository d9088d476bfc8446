"""Templates reading secrets: only declared ones, and never where the value would be stored.

A secret's value comes from the environment of the process running a node and never reaches
the store; the runtime masks it wherever it could. The compiler refuses what masking would
only hide: reading an undeclared name, and reading a secret into a value the run stores and
shows (an approval's reason or context, the workflow's output, a sub-workflow's inputs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.compiler.context import Context, Where
from tether.dsl.document import SECRET_RE
from tether.dsl.expressions import Reference
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


def check_unused_secrets(ctx: Context, used: set[str]) -> None:
    """W102 for each declared secret no template reads."""
    for i, name in enumerate(ctx.workflow.doc.secrets or ()):
        if name not in used and SECRET_RE.match(name):  # an invalid name is E800 already
            ctx.report("W102", f"secret `{name}` is never read", ctx.span("secrets", i),
                       help="remove it, or read it as `{{ secrets." + name + " }}`")
