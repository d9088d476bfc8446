"""Format conversion: read a workflow in one syntax, write it canonically in either.

``tether fmt`` is a thin shell over these functions. Only a workflow without errors is
written: converting a broken file would silently drop what could not be read. Comments are
not carried over (neither writer keeps them).
"""

from __future__ import annotations

import os
from typing import Literal

from tether.dsl.ast import Syntax
from tether.dsl.document import WorkflowDoc
from tether.dsl.flow_writer import write_flow
from tether.dsl.loader import read_workflow, workflow_from_text
from tether.dsl.yaml_writer import write_yaml
from tether.errors import WorkflowError

Target = Literal["yaml", "flow"]


def write(doc: WorkflowDoc, to: Target) -> str:
    """The canonical text of ``doc`` in the syntax ``to``."""
    if to == "yaml":
        return write_yaml(doc)
    if to == "flow":
        return write_flow(doc)
    raise ValueError(f"unknown syntax {to!r}; expected 'yaml' or 'flow'")


def format_source(text: str, file: str, syntax: Syntax, to: Target | None = None) -> str:
    """Parse and validate ``text``, then write it canonically.

    Args:
        text: The workflow source.
        file: The name shown in diagnostics.
        syntax: The syntax of ``text``: ``"yaml"`` or ``"flow"``.
        to: The syntax to write; by default the same as ``syntax``.

    Returns:
        The canonical text.

    Raises:
        WorkflowError: The source has errors; it carries every diagnostic.
    """
    workflow, diagnostics = workflow_from_text(text, file, syntax)
    if workflow is None or any(d.is_error for d in diagnostics):
        raise WorkflowError(diagnostics)
    return write(workflow.doc, to or syntax)


def format_file(path: str | os.PathLike[str], to: Target | None = None) -> str:
    """Read the workflow file at ``path`` and return its canonical text.

    Args:
        path: A ``.yaml``, ``.yml`` or ``.flow`` file.
        to: The syntax to write; by default the file's own.

    Returns:
        The canonical text (the file itself is not changed).

    Raises:
        WorkflowError: The file cannot be read or has errors; it carries every diagnostic.
    """
    workflow, diagnostics = read_workflow(path)
    if workflow is None or any(d.is_error for d in diagnostics):
        raise WorkflowError(diagnostics)
    return write(workflow.doc, to or workflow.syntax)


_QUOTES = {"yaml": "\"'", "flow": "\""}


def count_comments(text: str, syntax: Syntax) -> int:
    """How many comments ``text`` holds (which formatting would drop).

    A ``#`` starts a comment at the start of a line or after whitespace, outside quotes (and,
    in ``.flow``, outside ``{{ }}``). Approximate for exotic YAML (block scalars holding
    ``#``): it errs on the side of finding a comment.
    """
    count = 0
    for line in text.splitlines():
        quote: str | None = None
        depth = 0
        previous = " "
        for index, char in enumerate(line):
            if quote is not None:
                if char == quote and previous != "\\":
                    quote = None
            elif char in _QUOTES[syntax]:
                quote = char
            elif syntax == "flow" and line.startswith("{{", index):
                depth += 1
            elif syntax == "flow" and line.startswith("}}", index) and depth:
                depth -= 1
            elif char == "#" and depth == 0 and previous in " \t":
                count += 1
                break
            previous = char
    return count
