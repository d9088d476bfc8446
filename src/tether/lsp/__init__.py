"""The language server (``tether lsp``): tether's checks, completion and navigation in editors.

Modules: :mod:`~tether.lsp.server` (pygls wiring), :mod:`~tether.lsp.analysis` (a document's
diagnostics and its index of node ids), :mod:`~tether.lsp.reporting` (LSP diagnostics and
quick fixes), :mod:`~tether.lsp.navigation` (definition, references, rename, outline),
:mod:`~tether.lsp.hover`, :mod:`~tether.lsp.completion`, :mod:`~tether.lsp.paths` (template
paths), :mod:`~tether.lsp.tasks` (task sources read with ``ast``), :mod:`~tether.lsp.graph`
and :mod:`~tether.lsp.positions` (UTF-16 positions). Importing this package imports nothing
else: pygls is needed only by the server module.
"""
