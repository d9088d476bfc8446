"""``tether lsp``: the language server for editors (the ``tether[lsp]`` extra).

pygls is imported only when the command runs, so no other command pays for it; without it,
the command says which extra to install and exits 2.
"""

from __future__ import annotations

import click

INSTALL_HINT = "pip install 'tether[lsp]'"


def register(group: click.Group) -> None:
    """Add ``lsp`` to ``group``."""
    group.add_command(lsp)


@click.command()
@click.option("--stdio", is_flag=True, help="Talk over standard input and output (the "
              "default and only transport; accepted because editors often pass it).")
def lsp(stdio: bool) -> None:
    """Run the language server for YAML workflows and .flow files over stdio.

    Diagnostics as `tether check` reports them, completion, hover, go to definition,
    references, rename and a graph preview; see docs/editors.md for editor set-ups.
    """
    del stdio  # stdio is the only transport
    try:
        from tether.lsp.server import serve
    except ImportError as exc:
        if not _is_missing_extra(exc):
            raise
        click.echo(f"error: `tether lsp` needs pygls and lsprotocol ({exc}): {INSTALL_HINT}",
                   err=True)
        raise click.exceptions.Exit(2) from exc
    serve()


def _is_missing_extra(exc: ImportError) -> bool:
    """Whether ``exc`` comes from the extra's packages (missing or broken), not from ours."""
    name = exc.name or ""
    return name.split(".")[0] in ("pygls", "lsprotocol") or not name
