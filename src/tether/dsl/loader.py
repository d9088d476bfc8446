"""Reading workflow files: bytes -> text -> front end -> validated :class:`Workflow`."""

from __future__ import annotations

import os
from pathlib import Path

from tether.diagnostics import Diagnostic, Span, make
from tether.dsl.ast import Syntax, Workflow
from tether.dsl.source import RawDocument, position, with_anchor_notes
from tether.dsl.validate import validate
from tether.errors import WorkflowError
from tether.files import NotRegularFile, read_regular_file

YAML_SUFFIXES = (".yaml", ".yml")
FLOW_SUFFIXES = (".flow",)


def syntax_of(path: str | os.PathLike[str]) -> Syntax | None:
    """The syntax a file name implies, or None for an unknown extension."""
    suffix = Path(path).suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in FLOW_SUFFIXES:
        return "flow"
    return None


def decode(data: bytes, file: str) -> tuple[str | None, list[Diagnostic]]:
    """UTF-8 text of ``data`` (a leading BOM is dropped), or a diagnostic at the bad byte."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        prefix = data[: exc.start].decode("utf-8", errors="replace")
        line, col = position(prefix, len(prefix))
        span = Span(file, line, col, line, col)
        byte = data[exc.start]
        message = f"the file is not valid UTF-8 (byte 0x{byte:02x} at offset {exc.start})"
        return None, [make("E100", message, span, help="save the file as UTF-8")]
    if "\x00" in text:
        line, col = position(text, text.index("\x00"))
        span = Span(file, line, col, line, col)
        return None, [make("E100", "the file contains a NUL character", span,
                           help="workflow files are text; is this a binary file?")]
    return text, []


def parse_text(text: str, file: str, syntax: Syntax) -> RawDocument:
    """Run the front end of ``syntax`` over ``text``."""
    if syntax == "yaml":
        from tether.dsl.yaml_reader import read_yaml

        return read_yaml(text, file)
    from tether.dsl.flow_reader import read_flow

    return read_flow(text, file)


def read_workflow(
    path: str | os.PathLike[str], *, display: str | None = None, syntax: Syntax | None = None,
    light: bool = False,
) -> tuple[Workflow | None, list[Diagnostic]]:
    """Read and validate one file; return the (possibly partial) workflow and all diagnostics.

    ``display`` is the file name used in diagnostics (default: ``path`` as given). ``light``:
    for a check, which builds no plan: the document may be validated without pydantic
    (:mod:`tether.dsl.document_light`).
    """
    file = display if display is not None else os.fspath(path)
    syntax = syntax or syntax_of(path)
    if syntax is None:
        message = f"`{Path(path).name}` is not a workflow file"
        help = "workflow files end in .yaml, .yml or .flow"
        return None, [make("E100", message, Span.whole_file(file), help=help)]
    try:
        data = read_regular_file(path)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return None, [make("E100", f"cannot read the file: {reason}", Span.whole_file(file))]
    except NotRegularFile as exc:
        return None, [make("E100", f"`{Path(file).name}` {exc}", Span.whole_file(file),
                           help="a workflow is a regular file of text")]
    text, problems = decode(data, file)
    if text is None:
        return None, problems
    return workflow_from_text(text, file, syntax, location=Path(path), light=light)


def workflow_from_text(
    text: str, file: str, syntax: Syntax, *, location: Path | None = None, light: bool = False
) -> tuple[Workflow | None, list[Diagnostic]]:
    """Parse and validate ``text``; ``file`` names it in diagnostics (``light``: as in
    :func:`read_workflow`)."""
    raw = parse_text(text, file, syntax)
    validated = validate(raw, light=light) if raw.data is not None or raw.ok else None
    raw.diagnostics[:] = with_anchor_notes(raw.diagnostics, raw.source)
    if validated is None or validated.doc is None:
        return None, raw.diagnostics
    workflow = Workflow(
        doc=validated.doc,
        source=raw.source,
        syntax=syntax,
        location=location.resolve() if location is not None else None,
        broken_nodes=validated.broken_nodes,
        broken_inputs=validated.broken_inputs,
        broken_reads=validated.broken_reads,
        valid=raw.ok,
    )
    return workflow, raw.diagnostics


def load(path: str | os.PathLike[str]) -> Workflow:
    """Read a workflow file; raise :class:`~tether.errors.WorkflowError` if it has errors."""
    workflow, diagnostics = read_workflow(path)
    if workflow is None or any(d.is_error for d in diagnostics):
        raise WorkflowError(diagnostics)
    return workflow

