"""What values look like, where the workflow or its tasks say: lists for ``for_each``, the
keys of its elements, the fields of a task's annotated output.

- E502: ``for_each`` (or a matrix axis) over an input declared ``string``, ``integer``,
  ``number``, ``boolean`` or ``object`` fails at run time;
- E503: ``item.<key>`` where the elements are known (a literal list, a matrix's axes, a task
  returning a list of a ``TypedDict``/dataclass/pydantic model) and none of them has the key;
- W108: ``item.<key>`` read bare where only some elements of a literal list have the key (the
  others fail at run time); a template that guards it (``default``, ``get``, ``in``,
  ``is defined``) is not reported;
- E604 (with task modules): ``nodes.<id>.output.<field>`` of a task whose return type is a
  ``TypedDict``, a dataclass or a pydantic model must name one of its fields.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tether.compiler.context import Context, Where
from tether.compiler.references import Reads, Site
from tether.dsl.expressions import Reference, analyse
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    from tether.dsl.document import NodeSpec

Tasks = Mapping[str, Callable[..., Any]]
_NOT_LISTS = ("string", "integer", "number", "boolean", "object")


def fields_of(annotation: Any) -> dict[str, Any] | None:
    """The fields of a TypedDict, dataclass or pydantic model (``X | None`` unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return fields_of(args[0]) if len(args) == 1 else None
    if not isinstance(annotation, type):
        return None
    try:
        if typing.is_typeddict(annotation) or dataclasses.is_dataclass(annotation):
            return dict(typing.get_type_hints(annotation))
        model_fields = getattr(annotation, "model_fields", None)
        if isinstance(model_fields, dict):
            return {name: info.annotation for name, info in model_fields.items()}
    except Exception:  # unresolvable annotations: nothing is known
        return None
    return None


def _return_type(fn: Callable[..., Any] | None) -> Any:
    if fn is None:
        return None
    try:
        import inspect

        return typing.get_type_hints(inspect.unwrap(fn)).get("return")
    except Exception:  # unresolvable annotations: nothing is known
        return None


def _element_type(annotation: Any) -> Any:
    """``T`` of ``list[T]`` (or ``tuple[T, ...]``), else None."""
    if typing.get_origin(annotation) in (list, tuple):
        args = typing.get_args(annotation)
        return args[0] if args else None
    return None


def check_shapes(ctx: Context, reads: Reads, tasks: Tasks | None) -> None:
    """E502, E503 and (with tasks) E604; see the module docstring."""
    for node_id, node in ctx.workflow.nodes.items():
        _check_list_source(ctx, node_id, node)
    elements: dict[str, _Elements] = {}
    for node_id, node in ctx.workflow.nodes.items():
        known = _element_keys(ctx, node, tasks)
        if known is not None:
            elements[node_id] = known
    got: set[Site] = set()  # sites whose `item.get('key')` calls were checked
    for site, ref in reads.items:
        found = elements.get(site.reader or "")
        if found is None or not ref.attrs:
            continue
        if ref.attrs[0] == "get" and found.keys is not None and "get" not in found.keys:
            if site not in got:
                got.add(site)
                _check_get_keys(ctx, site, found)
            continue
        _check_item_key(ctx, site, ref, found)
    if tasks is not None:
        for site, ref in reads.nodes:
            _check_output_field(ctx, site, ref, tasks)


def _input_read(text: Any) -> str | None:
    """The input an expression is exactly (``{{ inputs.urls }}``), if it is one."""
    if not isinstance(text, str):
        return None
    analysis = analyse(text)
    if analysis.kind != "expression" or len(analysis.references) != 1:
        return None
    ref = analysis.references[0]
    inner = text.strip()[2:-2].strip() if text.strip().startswith("{{") else ""
    if ref.root == "inputs" and len(ref.attrs) == 1 and inner.replace(" ", "") in (
            f"inputs.{ref.attrs[0]}", f"inputs['{ref.attrs[0]}']", f'inputs["{ref.attrs[0]}"]'):
        return ref.attrs[0]
    return None


def _check_list_source(ctx: Context, node_id: str, node: NodeSpec) -> None:
    sources: list[tuple[tuple[str | int, ...], Any]] = [(("for_each",), node.for_each)]
    for axis, value in (node.matrix or {}).items():
        if axis not in ("include", "exclude"):
            sources.append((("matrix", axis), value))
    for path, text in sources:
        name = _input_read(text)
        spec = ctx.workflow.inputs.get(name) if name else None
        if name is not None and spec is not None and spec.type in _NOT_LISTS:
            ctx.report("E502", f"`{'.'.join(map(str, path))}` of node `{node_id}` runs over "
                       f"input `{name}`, which is declared `{spec.type}`, not a list",
                       ctx.span("nodes", node_id, *path), node_id=node_id,
                       related=[_note(ctx, name)],
                       help=f"declare `{name}` with `type: array`, or give the list itself")


def _note(ctx: Context, name: str) -> Any:
    from tether.diagnostics import Related

    return Related(ctx.key_span("inputs", name), f"`{name}` is declared here")


class _Elements(NamedTuple):
    """What is known of the elements: the keys some element has (None: they are not
    mappings), what they are (for the message), how many elements lack each optional key,
    and how many there are."""

    keys: set[str] | None
    what: str
    lacking: Mapping[str, int] | None = None
    total: int = 0


def _element_keys(ctx: Context, node: NodeSpec, tasks: Tasks | None) -> _Elements | None:
    """What is known of the elements of the node's list; None when nothing is."""
    if node.matrix is not None:
        axes = {k for k in node.matrix if k not in ("include", "exclude")}
        for extra in node.matrix.get("include") or ():
            if isinstance(extra, dict):
                axes |= set(extra)
        return _Elements(axes, "the matrix's combinations")
    items = node.for_each
    if isinstance(items, list) and items:
        if all(isinstance(i, dict) for i in items):
            return _literal_elements(items)
        if not any(isinstance(i, dict | list) for i in items):
            return _Elements(None, "the elements of the `for_each` list (scalars)")
        return None
    if isinstance(items, str) and tasks is not None:
        analysis = analyse(items)
        refs = analysis.references
        if len(refs) == 1 and refs[0].root == "nodes" and refs[0].attrs[1:] == ("output",):
            source = ctx.workflow.nodes.get(refs[0].attrs[0])
            if source is not None and source.task is not None and source.for_each is None:
                element = _element_type(_return_type(tasks.get(source.task)))
                fields = fields_of(element)
                if fields is not None:
                    return _Elements(set(fields), f"the elements `{source.task}` returns")
    return None


def _literal_elements(items: list[Any]) -> _Elements:
    """The keys of a literal list of mappings: a key some element lacks is optional (read
    it with ``default``, ``get`` or ``in``), not unknown."""
    some: set[str] = set().union(*(set(i) for i in items))
    always = set.intersection(*(set(i) for i in items))
    lacking = {k: sum(1 for i in items if k not in i) for k in some - always}
    return _Elements(some, "the elements of the `for_each` list", lacking, len(items))


# Mapping methods a template may call on `item` (``item.get('name', 'x')``).
_METHODS = frozenset({"get", "items", "keys", "values"})
# ``item.get('name'`` names its key as a literal: checked like ``item.name``.
_GET_KEY = re.compile(r"\bitem\.get\(\s*['\"]([^'\"]*)['\"]")
# What makes a read of an optional key safe: Jinja2's `default` filter (or its alias `d`),
# a `get`, a membership or definedness test in the same template (a textual test, so that a
# guarded read is never reported).
_GUARD = re.compile(r"\|\s*d(?:efault)?\b|\.get\s*\(|\bin\s+item\b|\bis\s+(?:not\s+)?defined\b")


def _check_item_key(ctx: Context, site: Site, ref: Reference, found: _Elements) -> None:
    key, keys = ref.attrs[0], found.keys
    if keys is not None and key not in keys and key in _METHODS:
        return
    if keys is not None and key in keys:
        if found.lacking and key in found.lacking and not _GUARD.search(site.text):
            _warn_optional(ctx, site, ref, key, found)
        return
    _report_key(ctx, site, f"item.{key}", key, found,
                ctx.locate_name(site.path, site.text, ref))


def _check_get_keys(ctx: Context, site: Site, found: _Elements) -> None:
    """``item.get('key', ...)``: each literal key must be one some element has."""
    for match in _GET_KEY.finditer(site.text):
        key = match.group(1)
        if found.keys is not None and key not in found.keys:
            span = ctx.at_offset(site.path, site.text, match.start(), match.end() - match.start())
            _report_key(ctx, site, f"item.get('{key}')", key, found, span)


def _report_key(ctx: Context, site: Site, shown: str, key: str, found: _Elements,
                span: Where) -> None:
    keys = found.keys
    message = f"`{shown}`: {found.what} have no key `{key}`" if keys is not None else \
        f"`{shown}`: {found.what} have no keys"
    help = (did_you_mean(key, sorted(keys)) or "their keys: " + ", ".join(
        f"`{k}`" for k in sorted(keys))) if keys else "read `item` itself"
    ctx.report("E503", message, span, node_id=site.reader, help=help)


def _warn_optional(ctx: Context, site: Site, ref: Reference, key: str,
                   found: _Elements) -> None:
    lacking = (found.lacking or {}).get(key, 0)
    ctx.report("W108", f"`item.{key}`: {lacking} of the {found.total} elements of the "
               f"`for_each` list have no key `{key}`; those fail at run time",
               ctx.locate_name(site.path, site.text, ref), node_id=site.reader,
               help=f"give a default: `item.{key} | default(...)`, or `item.get('{key}')`")


def _check_output_field(ctx: Context, site: Site, ref: Reference, tasks: Tasks) -> None:
    if len(ref.attrs) < 3 or ref.attrs[1] != "output":
        return
    target = ctx.workflow.nodes.get(ref.attrs[0])
    if target is None or target.task is None or target.for_each is not None or \
            target.matrix is not None:
        return
    annotation = _return_type(tasks.get(target.task))
    for depth, field in enumerate(ref.attrs[2:]):
        fields = fields_of(annotation)
        if fields is None:
            return
        if field not in fields:
            chain = ".".join(ref.attrs[2:2 + depth]) + "." if depth else ""
            ctx.report("E604", f"the output of task `{target.task}` has no field "
                       f"`{chain}{field}`", ctx.locate_name(site.path, site.text, ref),
                       node_id=site.reader,
                       help=did_you_mean(field, list(fields)) or "its fields: " + ", ".join(
                           f"`{f}`" for f in fields))
            return
        annotation = fields[field]
