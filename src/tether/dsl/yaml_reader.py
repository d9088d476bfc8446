"""The YAML front end: text -> plain data + source map, with every problem as a diagnostic.

PyYAML's composer (the C one when available) gives a node graph with marks; walking it
ourselves, instead of constructing Python objects, lets us report duplicate keys (which PyYAML
silently accepts), refuse non-JSON values with their location, bound the expansion of aliases
and the nesting depth, and remember the span of every key and value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from tether.diagnostics import Diagnostic, Related, Span, make
from tether.dsl.source import MAX_DEPTH, Path, RawDocument, SourceMap

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader

MAX_VALUES = 1_000_000
# The largest integer Python turns into text (sys.int_info.default_max_str_digits): a longer
# one could be read (as hex, say) but never written into a plan.
MAX_INT_BITS = math.ceil(4300 * math.log2(10))

_STR = "tag:yaml.org,2002:str"
_JSON_SCALARS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    _STR,
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


def _shown(text: str) -> str:
    return text if len(text) <= 30 else text[:27] + "..."


def _span(file: str, node: yaml.Node) -> Span:
    return _marks_span(file, node.start_mark, node.end_mark)


def _marks_span(file: str, start: Any, end: Any) -> Span:
    line, end_line, end_col = start.line, end.line, end.column
    if end_col:
        return _new_span(Span, (file, line + 1, start.column + 1, end_line + 1, end_col))
    if end_line > line:  # block values end at the next line's start
        return _new_span(Span, (file, line + 1, start.column + 1, end_line, 1))
    return _new_span(Span, (file, line + 1, start.column + 1, end_line + 1, 1))


_new_span = tuple.__new__  # a Span of all five fields, without the named tuple's __new__


class _Walker:
    """Walks the composed node graph. An alias composes to the very node of its anchor, so a
    node met a second time is an alias use: the k-th such meeting (outside an expansion) is
    the k-th alias in the text (``aliases``, from the event stream), and every value inside
    the expansion is located at the alias, with the anchor kept for a note."""

    def __init__(self, source: SourceMap, aliases: list[Span] | None = None) -> None:
        self.source = source
        self.file = source.file
        self.diagnostics: list[Diagnostic] = []
        self.count = 0
        self.constructor = SafeConstructor()
        self.too_complex = False
        self.seen: set[int] = set()
        self.aliases = aliases or []
        self.used = 0
        self.expansion: Span | None = None  # the alias whose expansion is being walked

    def error(self, code: str, message: str, node: yaml.Node, help: str | None = None) -> None:
        self.diagnostics.append(make(code, message, _span(self.file, node), help=help))

    def value(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.count += 1
        if self.too_complex:
            return None
        if depth > MAX_DEPTH or self.count > MAX_VALUES:
            self.too_complex = True
            reason = (
                f"the document is nested more than {MAX_DEPTH} levels deep"
                if depth > MAX_DEPTH
                else f"the document expands to more than {MAX_VALUES:,} values (YAML aliases)"
            )
            self.error("E103", reason, node, help="flatten the document or drop the aliases")
            return None
        if self.aliases and self.expansion is None and id(node) in self.seen and \
                self.used < len(self.aliases):
            alias = self.aliases[self.used]
            self.used += 1
            self.source.anchors[alias] = _span(self.file, node)
            self.expansion = alias
            try:
                return self.value(node, path, depth)
            finally:
                self.expansion = None
        if self.aliases:
            self.seen.add(id(node))
        self.source.values.setdefault(path, self.expansion or _span(self.file, node))
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.unsupported_tag(node)
            return [self.value(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        return self.scalar(node)

    def mapping(self, node: yaml.MappingNode, path: Path, depth: int,
                skip: frozenset[str] = frozenset()) -> dict[str, Any]:
        if node.tag != _MAP:
            self.unsupported_tag(node)
        result: dict[str, Any] = {}
        first_seen: dict[str, yaml.Node] = {}
        merged: dict[str, Any] = {}
        given = frozenset(str(k.value) for k, _ in node.value
                          if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE)
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged.update(self.merge(value_node, path, depth, given | skip))
                continue
            if isinstance(key_node, yaml.ScalarNode) and str(key_node.value) in skip:
                continue  # merged in, but given by the mapping merging it: never read
            if not isinstance(key_node, yaml.ScalarNode):
                self.error("E202", "a mapping key must be a string", key_node)
                continue
            key = str(key_node.value)
            if key in first_seen:
                self.duplicate(key, key_node, first_seen[key], path)
                continue
            first_seen[key] = key_node
            self.source.keys[(*path, key)] = self.expansion or _span(self.file, key_node)
            result[key] = self.value(value_node, (*path, key), depth + 1)
        for key, value in merged.items():
            result.setdefault(key, value)
        return result

    def merge(self, node: yaml.Node, path: Path, depth: int,
              given: frozenset[str]) -> dict[str, Any]:
        """A YAML merge key (``<<: *base``): mappings whose keys fill in the missing ones.

        A merged alias is an alias use like any other: what it brings in is located at the
        alias (the anchor in a note), and the keys the merging mapping gives itself are not
        read from it (their places are the mapping's own)."""
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                self.error("E202", "a merge key (<<) takes a mapping or a list of mappings", source)
                continue
            for key, value in self.merged_source(source, path, depth, given).items():
                merged.setdefault(key, value)
        return merged

    def merged_source(self, source: yaml.MappingNode, path: Path, depth: int,
                      given: frozenset[str]) -> dict[str, Any]:
        if not (self.aliases and self.expansion is None and id(source) in self.seen and
                self.used < len(self.aliases)):
            if self.aliases:
                self.seen.add(id(source))  # an anchor written in the merge: met from now on
            return self.mapping(source, path, depth + 1, given)
        alias = self.aliases[self.used]
        self.used += 1
        self.source.anchors[alias] = _span(self.file, source)
        self.expansion = alias
        try:
            return self.mapping(source, path, depth + 1, given)
        finally:
            self.expansion = None

    def duplicate(self, key: str, node: yaml.Node, first: yaml.Node, path: Path) -> None:
        related = (Related(_span(self.file, first), f"`{key}` is first defined here"),)
        if path == ("nodes",):
            message, code = f"duplicate node id `{key}`", "E300"
            help = "node ids are unique within a workflow; rename one of the nodes"
        else:
            message, code = f"duplicate key `{key}`", "E104"
            help = "YAML would silently keep only the last value; remove one of them"
        self.diagnostics.append(
            make(code, message, _span(self.file, node), related=related, help=help)
        )

    def scalar(self, node: yaml.Node) -> Any:
        if node.tag == _STR:
            return node.value  # what the constructor gives a string
        if node.tag == _TIMESTAMP:
            return str(node.value)  # a date is data to us, not a datetime
        if node.tag not in _JSON_SCALARS:
            self.unsupported_tag(node)
            return str(node.value)
        try:
            value = self.constructor.construct_object(node)
        except ValueError:  # an integer longer than Python converts (4,300 digits)
            value = None
        if (value is None and node.tag == "tag:yaml.org,2002:int") or (
                isinstance(value, int) and value.bit_length() > MAX_INT_BITS):
            self.error("E105", f"`{_shown(str(node.value))}` is too large to be a JSON number",
                       node, help="quote it to keep it as a string")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.error(
                "E105",
                f"`{node.value}` is not a JSON number",
                node,
                help='quote it to keep it as a string, e.g. "' + str(node.value) + '"',
            )
            return None
        return value

    def unsupported_tag(self, node: yaml.Node) -> None:
        self.error(
            "E105",
            f"the YAML tag `{node.tag}` has no JSON form",
            node,
            help="workflow values are JSON: strings, numbers, booleans, null, lists, mappings",
        )


_CONTEXT_HELP = (
    ("flow mapping", "the `{` opened at {where} is not closed (or a `,` is missing)"),
    ("flow sequence", "the `[` opened at {where} is not closed (or a `,` is missing)"),
    ("quoted scalar", "the quoted string opened at {where} is not closed"),
    ("simple key", "the key at {where} is not followed by `:`"),
    ("block mapping", "this line's indentation does not match the mapping that starts at "
                      "{where}"),
    ("block collection", "this line's indentation does not match the list that starts at "
                         "{where}"),
)


def _syntax_error(file: str, text: str, exc: yaml.MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = (exc.problem or "invalid YAML").strip()
    help = None
    context, context_mark = (exc.context or "").strip(), exc.context_mark
    if context and context_mark is not None:
        where = f"line {context_mark.line + 1}, column {context_mark.column + 1}"
        help = next((h.replace("{where}", where) for key, h in _CONTEXT_HELP if key in context),
                    f"{context} starting at {where}")
    if "Unicode character escape" in problem:  # \ud800: half of a surrogate pair
        help = "a \\uXXXX escape must be a whole character: write the character itself, or " \
            "both halves of its surrogate pair (\\ud83d\\ude00)"
    if mark is not None and text[mark.index:mark.index + 1] == "\t":
        problem = "a tab character cannot indent YAML"
        help = "indent with spaces"
    span = Span(file, line, col, line, col)
    return make("E101", f"YAML syntax error: {problem}", span, help=help)


def _alias_spans(text: str, file: str) -> list[Span]:
    """Where each alias (``*name``) is written, in document order."""
    spans = []
    for event in yaml.parse(text, Loader=_Loader):
        start, end = event.start_mark, event.end_mark
        if isinstance(event, yaml.AliasEvent) and start is not None and end is not None:
            spans.append(Span(file, start.line + 1, start.column + 1, end.line + 1,
                              max(end.column, 1)))
    return spans


class _Decline(Exception):
    """The event reader leaves the document to the composer and the walker."""


class _EventReader:
    """Reads a plain document (one, without anchors, aliases, tags, merge keys, duplicate or
    non-string keys, within the depth limit) from PyYAML's event stream: the data, the spans
    and the diagnostics the walker gives, in its order, without composing a node graph
    (whose Python-level resolver calls and nodes cost as much as the parse). Anything else
    declines, and the composer and the walker read the text again."""

    def __init__(self, text: str, source: SourceMap) -> None:
        self.loader = _Loader(text)
        self.next: Callable[[], Any] = self.loader.get_event  # events, made in C: untyped
        self.walker = _Walker(source)  # for its scalars (E105) and diagnostics
        self.file, self.keys, self.values = source.file, source.keys, source.values
        self.tags: dict[tuple[str, Any], str] = {}

    def document(self) -> Any:
        self.expect(yaml.StreamStartEvent, yaml.DocumentStartEvent)
        data = self.value(self.next(), (), 0)
        self.expect(yaml.DocumentEndEvent, yaml.StreamEndEvent)
        return data

    def expect(self, *kinds: type) -> None:
        for kind in kinds:
            if type(self.next()) is not kind:
                raise _Decline

    def tag(self, event: Any) -> str:
        """A scalar's resolved tag (once per distinct scalar), declining explicit ones."""
        if event.anchor is not None or event.tag is not None:
            raise _Decline
        key = (event.value, event.implicit)
        tag = self.tags.get(key)
        if tag is None:
            tag = self.tags[key] = self.loader.resolve(yaml.ScalarNode, event.value,
                                                       event.implicit)
        return tag

    def value(self, event: Any, path: Path, depth: int) -> Any:
        self.walker.count += 1
        if depth > MAX_DEPTH or self.walker.count > MAX_VALUES:
            raise _Decline
        kind = type(event)
        if kind is yaml.ScalarEvent:
            tag = self.tag(event)
            self.values[path] = _marks_span(self.file, event.start_mark, event.end_mark)
            if tag == _STR:
                return event.value
            return self.walker.scalar(yaml.ScalarNode(tag, event.value, event.start_mark,
                                                      event.end_mark, event.style))
        if kind not in (yaml.MappingStartEvent, yaml.SequenceStartEvent) or \
                event.anchor is not None or event.tag is not None:
            raise _Decline
        self.values[path] = _UNREAD  # the place of the span known at the end
        result: Any
        if kind is yaml.MappingStartEvent:
            result = {}
            while type(end := self.next()) is yaml.ScalarEvent:
                if self.tag(end) == _MERGE or end.value in result:
                    raise _Decline
                name = str(end.value)
                self.keys[(*path, name)] = _marks_span(self.file, end.start_mark, end.end_mark)
                result[name] = self.value(self.next(), (*path, name), depth + 1)
            if type(end) is not yaml.MappingEndEvent:  # a key that is no scalar
                raise _Decline
        else:
            result = []
            while type(end := self.next()) is not yaml.SequenceEndEvent:
                result.append(self.value(end, (*path, len(result)), depth + 1))
        self.values[path] = _marks_span(self.file, event.start_mark, end.end_mark)
        return result


_UNREAD: Any = None


def _read_events(text: str, file: str) -> RawDocument | None:
    """The document read by :class:`_EventReader`, or None when it declines (or the text
    has a syntax error: the composer reports it)."""
    source = SourceMap(file=file, text=text)
    reader = _EventReader(text, source)
    try:
        data = reader.document()
    except (_Decline, yaml.YAMLError, RecursionError):
        return None
    finally:
        reader.loader.dispose()
    return RawDocument(data, source, "yaml", reader.walker.diagnostics)


def read_yaml(text: str, file: str) -> RawDocument:
    """Parse YAML ``text`` (shown as ``file`` in diagnostics) into a :class:`RawDocument`."""
    read = _read_events(text, file)
    if read is not None:
        return read
    return _read_composed(text, file)


def _read_composed(text: str, file: str) -> RawDocument:
    """:func:`read_yaml` by composing the node graph and walking it."""
    source = SourceMap(file=file, text=text)
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        return RawDocument(None, source, "yaml", [_syntax_error(file, text, exc)])
    except yaml.YAMLError as exc:
        span = Span.whole_file(file)
        return RawDocument(None, source, "yaml", [make("E101", f"YAML error: {exc}", span)])
    except RecursionError:
        diag = make("E103", "the document is nested too deeply to read", Span.whole_file(file))
        return RawDocument(None, source, "yaml", [diag])
    if len(nodes) != 1 or nodes[0] is None:
        message = (
            "the file is empty" if not nodes or nodes[0] is None
            else f"the file holds {len(nodes)} YAML documents; a workflow file holds one"
        )
        span = Span.whole_file(file) if len(nodes) < 2 else _span(file, nodes[1])
        return RawDocument(None, source, "yaml", [make("E209", message, span)])
    walker = _Walker(source, _alias_spans(text, file) if "*" in text else None)
    data = walker.value(nodes[0], (), 0)
    return RawDocument(data, source, "yaml", walker.diagnostics)
