"""The ``.flow`` front end: text -> the same plain data + source map the YAML front end gives.

The text is cut into statements and each is parsed on its own (``flow_syntax.py``: the
grammar, the splitter and the syntax errors), so a broken statement does not hide the errors
of the others.

The parse trees become exactly the data a YAML file of the same meaning gives (``needs``,
``with``, ``approval: {reason, context, form}``, ...), with the span of every key and value
under the same paths, so :mod:`tether.dsl.validate` and the compiler treat both front ends
alike. Lark's exceptions are mapped to E102 diagnostics here and go no further.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
from typing import TYPE_CHECKING, Any, TypeAlias, assert_never

from tether.diagnostics import Diagnostic, Related, Span, make
from tether.dsl.document_rules import FORMAT_VERSION
from tether.dsl.flow_direct import StatementRecord, TaskRecord, read_statement
from tether.dsl.flow_syntax import (
    AGENT_LISTS,
    AGENT_PARTS,
    APPROVAL_PARTS,
    CLAUSE_KEYS,
    CLAUSE_PARTS,
    CLAUSE_WORDS,
    CLAUSES,
    CONSTANTS,
    HEADER_STATEMENTS,
    MAX_SYNTAX_ERRORS,
    NODE_STATEMENTS,
    STATEMENTS,
    SWITCH_PARTS,
    TOO_DEEP,
    Chunk,
    parse_statement,
    refused_help,
    report_syntax_error,
    shorten,
    split_keyword,
    split_statements,
)
from tether.dsl.source import (
    MAX_DEPTH,
    SURROGATE,
    Path,
    RawDocument,
    SourceMap,
    lone_surrogate,
    position,
)
from tether.kinds import KINDS, NodeKind
from tether.suggest import did_you_mean

if TYPE_CHECKING:  # Lark is imported only when a statement needs the grammar; in the tree
    from lark import Token, Tree  # walk below, a token is a `str` and a tree is not

Node: TypeAlias = "Tree[Token] | Token"
Parsed: TypeAlias = "Tree[Token] | TaskRecord | StatementRecord"
"""A statement read: its parse tree, or read straight into data (:mod:`~tether.dsl.flow_direct`)."""

class _Failed(Exception):
    """A statement that cannot be read further (the diagnostic is already recorded)."""


class _Reader:
    """Turns the statements of one file into plain data, spans and diagnostics."""

    def __init__(self, text: str, file: str, *, pure: bool = False, fast: bool = True) -> None:
        self.text, self.file, self.pure, self.fast = text, file, pure, fast
        self.source = SourceMap(file=file, text=text)
        self.diagnostics: list[Diagnostic] = []
        self.data: dict[str, Any] = {"tether": FORMAT_VERSION}  # `tether N` is optional
        self.first: dict[Path, tuple[Span, str]] = {}  # where, and a note saying so
        self.offset = 0  # the line before the current statement
        self.fatal = 0  # errors after which the data is not worth validating
        self.whole: dict[str, bool] = {}  # whether `inputs`/`output` were given whole

    # -- spans and diagnostics -------------------------------------------------------------

    def span(self, node: Node) -> Span:
        """The span of a token or a rule (Lark's end column is exclusive, ours inclusive)."""
        where: Any = node if isinstance(node, str) else node.meta
        return Span(self.file, where.line + self.offset, where.column,
                    where.end_line + self.offset, where.end_column - 1)

    def keyword(self, tree: Tree[Token], word: str) -> Span:
        """The keyword a rule starts with (Lark drops anonymous keywords from the tree)."""
        meta = tree.meta
        line = meta.line + self.offset
        return Span(self.file, line, meta.column, line, meta.column + len(word) - 1)

    def record(self, path: Path, key: Span | None, value: Span) -> None:
        if key is not None:
            self.source.keys[path] = key
        self.source.values.setdefault(path, value)

    def extend(self, path: Path, key: Span, span: Span) -> None:
        """Grow the span of a section (``inputs``, ``nodes``) to cover one more statement."""
        self.source.keys.setdefault(path, key)
        first = self.source.values.get(path, span)
        self.source.values[path] = Span(self.file, first.line, first.col, span.end_line,
                                        span.end_col)

    def error(self, code: str, message: str, span: Span, *, help: str | None = None,
              related: tuple[Related, ...] = ()) -> None:
        self.diagnostics.append(make(code, message, span, help=help, related=related))
        self.fatal += code in ("E102", "E103", "E209")

    def once(self, path: Path, span: Span, message: str, first: str,
             seen: dict[Path, tuple[Span, str]] | None = None) -> bool:
        """Whether ``path`` is given for the first time (in ``seen``); report E104 if not."""
        seen = self.first if seen is None else seen
        if path not in seen:
            seen[path] = (span, first)
            return True
        related = (Related(seen[path][0], f"{seen[path][1]} here"),)
        self.error("E104", message, span, related=related, help="remove one of them")
        return False

    # -- values ----------------------------------------------------------------------------

    def value(self, node: Node, path: Path, key: Span | None = None) -> Any:
        """The data of a value, recording its span (and its items') under ``path``."""
        span = self.span(node)
        if len(path) > MAX_DEPTH:
            self.error("E103", TOO_DEEP, span, help="flatten the document")
            raise _Failed
        self.record(path, key, span)
        if isinstance(node, str):
            return self.scalar(node)
        if node.data == "list":
            return [self.value(item, (*path, i)) for i, item in enumerate(node.children)]
        return self.pairs(node.children, path, "key")

    def pairs(self, pairs: list[Node], path: Path, what: str) -> dict[str, Any]:
        """A mapping from ``key: value`` trees (mapping entries, arguments, output lines)."""
        result: dict[str, Any] = {}
        seen: dict[Path, tuple[Span, str]] = {}
        for pair in pairs:
            assert not isinstance(pair, str)
            key_node, value_node = pair.children
            assert isinstance(key_node, str)
            name, key = self.scalar(key_node), self.span(key_node)
            if self.once((name,), key, f"duplicate {what} `{name}`", f"`{name}` is first given",
                         seen):
                result[name] = self.value(value_node, (*path, name), key)
        return result

    def scalar(self, token: Token) -> Any:
        kind = token.type
        if kind == "STRING":
            return self.string(token)
        if kind == "NUMBER":
            return self.number(token)
        return CONSTANTS[kind] if kind in CONSTANTS else str(token)

    def string(self, token: Token) -> str:
        try:
            value = str(json.loads(token, strict=False))
        except json.JSONDecodeError as exc:
            start = self.span(token)
            col = start.col + exc.pos
            message = f"invalid string: {exc.msg[0].lower()}{exc.msg[1:]}"
            self.error("E102", message, Span(self.file, start.line, col, start.line, col),
                       help='strings use JSON escapes: \\" \\\\ \\n \\t \\uXXXX')
            raise _Failed from exc
        offset = lone_surrogate(str(token)) if SURROGATE.search(value) else None
        if offset is not None:
            start = self.span(token)
            col = start.col + offset
            self.error("E102", f"invalid string: `{str(token)[offset:offset + 6]}` is half of a "
                       "surrogate pair, which no UTF-8 text can hold",
                       Span(self.file, start.line, col, start.line, col + 5),
                       help="write the character itself, or both halves of its pair "
                       "(\\ud83d\\ude00)")
            raise _Failed
        return value

    def number(self, token: Token) -> int | float | None:
        text = str(token)
        try:
            value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:  # more digits than int() converts
            value = math.inf
        if isinstance(value, float) and not math.isfinite(value):
            self.error("E105", f"`{shorten(text)}` is too large to be a JSON number",
                       self.span(token), help="quote it to keep it as a string")
            return None
        return value

    # -- statements ------------------------------------------------------------------------

    def statement(self, tree: Tree[Token]) -> None:
        kind = str(tree.data)
        if kind in NODE_STATEMENTS:
            self.node(tree, NODE_STATEMENTS[kind])
        elif kind in HEADER_STATEMENTS:
            path, word, message, first = HEADER_STATEMENTS[kind]
            key = self.keyword(tree, word)
            if self.once(path, key, message, first):
                self.data[str(path[0])] = self.value(tree.children[0], path, key)
        else:
            getattr(self, kind)(tree)

    def section(self, name: str, key: Span, *, whole: bool) -> bool:
        """Whether a statement may give the ``inputs``/``output``; E104 if they are given twice.

        ``inputs {}`` and ``output VALUE`` give the section whole, once; ``input`` and
        ``output KEY = VALUE`` lines build it up, line by line.
        """
        verb = "are" if name == "inputs" else "is"
        if (name,) not in self.first:
            self.whole[name] = whole
        elif whole or self.whole[name]:
            return self.once((name,), key, f"the {name} {verb} given twice", "")
        self.first.setdefault((name,), (key, f"the {name} {verb} first given"))
        return True

    def input_stmt(self, tree: Tree[Token]) -> None:
        name_token = tree.children[0]
        name, key = str(name_token), self.span(name_token)
        if self.section("inputs", key, whole=False) and self.once(
                ("inputs", name), key, f"duplicate input `{name}`", f"`{name}` is first defined"):
            self.extend(("inputs",), self.keyword(tree, "input"), self.span(tree))
            self.data.setdefault("inputs", {})[name] = self.spec(tree, ("inputs", name))

    def inputs_stmt(self, tree: Tree[Token]) -> None:
        key, node = self.keyword(tree, "inputs"), tree.children[0]
        empty = not isinstance(node, str) and node.data == "map" and not node.children
        if not empty and not (isinstance(node, str) and node.type == "NULL"):
            self.error("E102", "`inputs` takes only `{}` or `null`", self.span(node),
                       help="declare each input on its own line: `input NAME: TYPE`")
        elif self.section("inputs", key, whole=True):
            self.data["inputs"] = self.value(node, ("inputs",), key)

    def secrets_stmt(self, tree: Tree[Token]) -> None:
        """``secrets A, B`` (or ``secrets [A, B]``, ``secrets []``, ``secrets null``)."""
        key = self.keyword(tree, "secrets")
        if not self.once(("secrets",), key, "duplicate `secrets`", "`secrets` is first given"):
            return
        children = tree.children
        self.record(("secrets",), key, self.span(tree))
        if len(children) == 1 and isinstance(children[0], str) and children[0].type == "NULL":
            self.data["secrets"] = None
            return
        if children:
            first, last = self.span(children[0]), self.span(children[-1])
            self.source.values[("secrets",)] = Span(self.file, first.line, first.col,
                                                    last.end_line, last.end_col)
        self.data["secrets"] = [self.value(item, ("secrets", i))
                                for i, item in enumerate(children)]

    def spec(self, tree: Tree[Token], path: Path) -> dict[str, Any]:
        """An input or a form field: ``NAME: TYPE [= VALUE] [enum VALUES] [description STRING]``."""
        name, type_token, *rest = tree.children
        self.record(path, self.span(name), self.span(tree))
        spec = {"type": self.value(type_token, (*path, "type"), self.span(type_token))}
        for part in rest:
            assert not isinstance(part, str)
            key = str(part.data)
            word = "=" if key == "default" else key
            spec[key] = self.value(part.children[0], (*path, key), self.keyword(part, word))
        return spec

    def output_value(self, tree: Tree[Token]) -> None:
        key = self.keyword(tree, "output")
        if self.section("output", key, whole=True):
            self.data["output"] = self.value(tree.children[0], ("output",), key)

    def output_item(self, tree: Tree[Token]) -> None:
        key = self.keyword(tree, "output")
        name_token, value = tree.children
        assert isinstance(name_token, str)
        name, name_span = self.scalar(name_token), self.span(name_token)
        if self.section("output", key, whole=False) and self.once(
                ("output", name), name_span, f"duplicate output key `{name}`",
                f"`{name}` is first given"):
            self.extend(("output",), key, self.span(tree))
            output = self.data.setdefault("output", {})
            output[name] = self.value(value, ("output", name), name_span)

    def node(self, tree: Tree[Token], kind: NodeKind) -> None:
        id_token, *rest = tree.children
        node_id, key, head = str(id_token), self.span(id_token), self.keyword(tree, kind)
        path: Path = ("nodes", node_id)
        if not self.new_node(path, key, head, kind, self.span(tree)):
            return
        self.record(path, key, self.span(tree))
        node: dict[str, Any] = {}
        self.data.setdefault("nodes", {})[node_id] = node
        match kind:
            case NodeKind.APPROVAL | NodeKind.AGENT:  # the head names nothing: all clauses
                node[kind.value] = {}
                self.record((*path, kind.value), head, Span(
                    self.file, head.line, head.col, key.end_line, key.end_col))
            case NodeKind.SWITCH:  # the head names nothing: on, case, default are clauses
                node["switch"] = {}
                self.record((*path, "switch"), head, Span(
                    self.file, head.line, head.col, key.end_line, key.end_col))
            case NodeKind.NOOP:
                node["noop"] = True
                self.record((*path, "noop"), head, head)
            case (NodeKind.TASK | NodeKind.WORKFLOW | NodeKind.FAIL | NodeKind.SLEEP
                  | NodeKind.SLEEP_UNTIL):
                node[kind.value] = self.value(rest.pop(0), (*path, kind.value), head)
            case _:
                assert_never(kind)
        for clause in rest:
            assert not isinstance(clause, str)
            self.clause(clause, node, path, kind)

    def new_node(self, path: Path, key: Span, head: Span, kind: NodeKind, span: Span) -> bool:
        """Whether the node at ``path`` is defined for the first time (E300 if not); if so,
        ``nodes`` grows to cover it."""
        if path in self.first:
            node_id = path[1]
            related = (Related(self.first[path][0], f"`{node_id}` is first defined here"),)
            self.error("E300", f"duplicate node id `{node_id}`", key, related=related,
                       help="node ids are unique within a workflow; rename one of the nodes")
            return False
        self.first[path] = (key, f"`{path[1]}` is first defined")
        self.first[(*path, kind)] = (head, f"`{kind}` is first given")
        self.extend(("nodes",), head, span)
        return True

    def task_record(self, record: TaskRecord) -> None:
        """A ``task`` statement read straight into data (:mod:`tether.dsl.flow_direct`):
        what :meth:`node` makes of its tree."""
        path: Path = ("nodes", record.node_id)
        if self.new_node(path, record.key, record.head, NodeKind.TASK, record.span):
            self.source.keys.update(record.keys)
            self.source.values.update(record.values)
            self.data.setdefault("nodes", {})[record.node_id] = record.node

    def statement_record(self, record: StatementRecord) -> None:
        """Another statement read straight into data: what :meth:`statement` makes of its
        tree (the same checks, in the same order, then the record's spans)."""
        name, kind = record.name, record.kind
        if kind == "approval_stmt":
            path: Path = ("nodes", name)
            if not self.new_node(path, record.key, record.head, NodeKind.APPROVAL, record.span):
                return
            self.data.setdefault("nodes", {})[name] = record.value
        elif kind in HEADER_STATEMENTS:
            path, _, message, first = HEADER_STATEMENTS[kind]
            if not self.once(path, record.head, message, first):
                return
            self.data[str(path[0])] = record.value
        else:
            section = "inputs" if kind == "input_stmt" else "output"
            key, message, first = (("inputs", name), f"duplicate input `{name}`",
                                   f"`{name}` is first defined") if section == "inputs" else (
                ("output", name), f"duplicate output key `{name}`", f"`{name}` is first given")
            where = record.key if section == "inputs" else record.head
            if not (self.section(section, where, whole=False)
                    and self.once(key, record.key, message, first)):
                return
            self.extend((section,), record.head, record.span)
            self.data.setdefault(section, {})[name] = record.value
        self.source.keys.update(record.keys)
        self.source.values.update(record.values)

    def clause(self, tree: Tree[Token], node: dict[str, Any], path: Path,
               kind: NodeKind) -> None:
        name = str(tree.data)
        word = str(tree.children[0]) if name == "kind_null" else CLAUSE_WORDS.get(name, name)
        key_name = CLAUSE_KEYS.get(name, word)
        span = self.span(tree) if name == "args" else self.keyword(tree, word)
        shown = "arguments" if name == "args" else f"`{word}`"
        first = f"{shown} {'are' if name == 'args' else 'is'} first given"
        if name == "switch_case":
            self.switch_case(tree, node, path, kind, span)
            return
        if not self.once((*path, key_name), span, f"duplicate clause {shown}", first):
            return
        spec = KINDS[kind]
        if kind == NodeKind.APPROVAL and key_name == "timeout":  # the approval's own timeout
            self.approval_part(tree, node, (*path, "approval", key_name), kind, span)
        elif not spec.takes(key_name):
            verb = "do" if name == "args" else "does"
            self.error("E208", f"{shown} {verb} not apply to {spec.noun}", span,
                       help=refused_help(kind))
        elif key_name in APPROVAL_PARTS:
            self.approval_part(tree, node, (*path, "approval", key_name), kind, span)
        elif key_name in AGENT_PARTS:
            self.agent_part(tree, node, (*path, "agent", key_name), kind, span)
        elif key_name in SWITCH_PARTS:
            if self.switch_part(kind, f"`{word}`", span):
                node["switch"][key_name] = self.clause_value(tree, (*path, "switch", key_name),
                                                             span)
        else:
            node[key_name] = self.clause_value(tree, (*path, key_name), span)

    def approval_part(self, tree: Tree[Token], node: dict[str, Any], path: Path,
                      kind: NodeKind, span: Span) -> None:
        """``reason``, ``context`` or ``form``: a part of an approval node's ``approval``."""
        match kind:
            case NodeKind.APPROVAL:
                node["approval"][path[-1]] = self.clause_value(tree, path, span)
            case (NodeKind.TASK | NodeKind.WORKFLOW | NodeKind.AGENT | NodeKind.SWITCH
                  | NodeKind.NOOP | NodeKind.FAIL | NodeKind.SLEEP | NodeKind.SLEEP_UNTIL):
                self.error("E208", f"`{path[-1]}` does not apply to {KINDS[kind].noun}", span,
                           help="`reason`, `context` and `form` belong to `approval` nodes")
            case _:
                assert_never(kind)

    def agent_part(self, tree: Tree[Token], node: dict[str, Any], path: Path,
                   kind: NodeKind, span: Span) -> None:
        """``model``, ``prompt``, ``tools``...: a part of an agent node's ``agent``."""
        match kind:
            case NodeKind.AGENT:
                node["agent"][path[-1]] = self.clause_value(tree, path, span)
            case (NodeKind.TASK | NodeKind.WORKFLOW | NodeKind.APPROVAL | NodeKind.SWITCH
                  | NodeKind.NOOP | NodeKind.FAIL | NodeKind.SLEEP | NodeKind.SLEEP_UNTIL):
                self.error("E208", f"`{path[-1]}` does not apply to {KINDS[kind].noun}", span,
                           help=f"`{path[-1]}` belongs to `agent` nodes")
            case _:
                assert_never(kind)

    def switch_part(self, kind: NodeKind, shown: str, span: Span) -> bool:
        """Whether a switch clause (``on``, ``case``, ``default``) may stand here; E208 if
        not."""
        if kind == NodeKind.SWITCH:
            return True
        self.error("E208", f"{shown} does not apply to {KINDS[kind].noun}", span,
                   help="`on`, `case` and `default` belong to `switch` nodes")
        return False

    def switch_case(self, tree: Tree[Token], node: dict[str, Any], path: Path,
                    kind: NodeKind, span: Span) -> None:
        """``case KEY: a, b``: one entry of the switch's ``cases`` (one line per case)."""
        if not self.switch_part(kind, "`case`", span):
            return
        key_token, *members = tree.children
        assert isinstance(key_token, str)
        key = self.scalar(key_token)
        key = key if isinstance(key, str) else json.dumps(key)
        cases_path: Path = (*path, "switch", "cases")
        if not self.once((*cases_path, key), self.span(key_token), f"duplicate case `{key}`",
                         f"case `{key}` is first given"):
            return
        self.extend(cases_path, span, self.span(tree))
        cases = node["switch"].setdefault("cases", {})
        case_path: Path = (*cases_path, key)
        self.record(case_path, self.span(key_token), self.span(tree))
        if members:
            first, last = self.span(members[0]), self.span(members[-1])
            self.source.values[case_path] = Span(self.file, first.line, first.col,
                                                 last.end_line, last.end_col)
        cases[key] = [self.value(item, (*case_path, i)) for i, item in enumerate(members)]

    def clause_value(self, tree: Tree[Token], path: Path, key: Span) -> Any:
        """The data of a clause; ``null`` stands for YAML's explicit ``key: null``."""
        children, name = tree.children, str(tree.data)
        if children and isinstance(children[0], str) and children[0].type == "NULL":
            return self.value(children[0], path, key)
        if name == "args":
            self.record(path, key, key)
            return self.pairs(children, path, "argument")
        if name in ("after", "retry", "loop", "form", "switch_default", "renamed_from") \
                or name in AGENT_LISTS:
            self.record(path, key, self.span(tree))
            method = "cl_after" if name in AGENT_LISTS else "cl_" + name
            return getattr(self, method)(children, path, key)
        if not children:  # a bare `idempotent`
            self.record(path, key, key)
            return True
        return self.value(children[-1], path, key)

    def cl_after(self, children: list[Node], path: Path, key: Span) -> Any:
        if children:
            first, last = self.span(children[0]), self.span(children[-1])
            self.source.values[path] = Span(self.file, first.line, first.col, last.end_line,
                                            last.end_col)
        return [self.value(item, (*path, i)) for i, item in enumerate(children)]

    cl_switch_default = cl_after
    cl_renamed_from = cl_after

    def cl_retry(self, children: list[Node], path: Path, key: Span) -> Any:
        count, *backoff = children
        retry = {"max_attempts": self.value(count, (*path, "max_attempts"), key)}
        return retry | self.cl_loop(backoff, path, key)

    def cl_loop(self, children: list[Node], path: Path, key: Span) -> Any:
        """The parts of a `loop` (or the `backoff` of a `retry`), each with its keyword."""
        parts: dict[str, Any] = {}
        for part in children:
            assert not isinstance(part, str)
            name, word = CLAUSE_PARTS[str(part.data)]
            parts[name] = self.value(part.children[0], (*path, name), self.keyword(part, word))
        return parts

    def cl_form(self, children: list[Node], path: Path, key: Span) -> Any:
        fields = children[0]
        assert not isinstance(fields, str)
        self.source.values[path] = self.span(fields)
        form: dict[str, Any] = {}
        for item in fields.children:
            assert not isinstance(item, str)
            name_token = item.children[0]
            name = str(name_token)
            if self.once((*path, name), self.span(name_token), f"duplicate form field `{name}`",
                         f"`{name}` is first defined"):
                form[name] = self.spec(item, (*path, name))
        return form


def _parse_chunk(reader: _Reader, chunk: Chunk) -> Parsed | None:
    if chunk.indented:
        line = reader.text[chunk.start:chunk.end]
        col = len(line) - len(line.lstrip(" \t\r\f")) + 1
        span = Span(reader.file, chunk.line, col, chunk.line, col)
        reader.error("E102", "unexpected indentation: a statement starts at column 1", span,
                     help="an indented line continues the statement above it")
        return None
    deep = next((p for p in chunk.problems if p.code == "E103"), None)
    if deep is not None:  # not worth building a parse tree for
        reader.error("E103", deep.message, deep.span, help=deep.help)
        return None
    text = reader.text[chunk.start:chunk.end]
    if reader.fast:
        record = read_statement(text, reader.file, chunk.line - 1)
        if record is not None:
            return record
    from lark.exceptions import UnexpectedInput

    try:
        tree = parse_statement(text, pure=reader.pure)
    except UnexpectedInput as exc:
        report_syntax_error(reader, chunk, exc)
        return None
    split = split_keyword(text, tree)
    if split is not None:
        start, word = split
        at_line, col = position(reader.text, chunk.start + start)
        span = Span(reader.file, at_line, col, at_line, col + len(word) - 1)
        help = did_you_mean(word, CLAUSES) or did_you_mean(word, STATEMENTS)
        reader.error("E102", f"unknown word `{word}`", span, help=help)
        return None
    return tree


def _check_order(reader: _Reader, parsed: list[tuple[Chunk, Parsed | None]]) -> None:
    """``tether N`` may only come first, and ``workflow NAME`` right after it."""
    kinds = [(chunk.line, None if tree is None else "task_stmt" if isinstance(
        tree, TaskRecord) else tree.kind if isinstance(tree, StatementRecord)
        else str(tree.data)) for chunk, tree in parsed]
    for line, kind in kinds[1:]:
        if kind == "tether_stmt":
            reader.error("E102", "`tether` must be the first statement",
                         Span(reader.file, line, 1, line, len("tether")))
    line, kind = kinds[1 if kinds[0][1] == "tether_stmt" and len(kinds) > 1 else 0]
    if kind not in ("header", "tether_stmt", None):
        reader.error("E102", "a .flow file starts with `workflow NAME`",
                     Span(reader.file, line, 1, line, 1),
                     help="name the workflow first, for example `workflow refund`")


def read_flow(text: str, file: str, *, pure: bool = False, fast: bool = True) -> RawDocument:
    """Parse ``.flow`` ``text`` (shown as ``file`` in diagnostics) into a :class:`RawDocument`.

    Args:
        text: The source text.
        file: The name diagnostics show.
        pure: Parse with Lark's own parser even when lark-cython is installed (both give
            the same result; the tests compare them).
        fast: Read the common ``task`` statements directly (:mod:`tether.dsl.flow_direct`),
            the grammar reading the rest; false: the grammar reads every statement.

    Returns:
        The data a YAML file of the same meaning gives, with its source map and diagnostics.
        The data is None when the text has a syntax error (E102) or is nested too deeply
        (E103): half a document would only produce misleading follow-up errors.
    """
    reader = _Reader(text, file, pure=pure, fast=fast)
    # Parse trees are many small objects that all live until the end; the cyclic garbage
    # collector would scan them again and again (a 10,000-node file reads a third faster).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _read(reader)
    except RecursionError:
        reader.error("E103", "the document is nested too deeply to read", Span.whole_file(file))
    finally:
        if collecting:
            gc.enable()
    data = None if reader.fatal else reader.data
    return RawDocument(data, reader.source, "flow", reader.diagnostics)


def _read(reader: _Reader) -> None:
    parsed: list[tuple[Chunk, Parsed | None]] = []
    for chunk in split_statements(reader.text, reader.file):
        if reader.fatal >= MAX_SYNTAX_ERRORS:
            reader.error("E102", f"more than {MAX_SYNTAX_ERRORS} errors; the rest of the file "
                         "is not read", Span(reader.file, chunk.line, 1, chunk.line, 1))
            break
        parsed.append((chunk, _parse_chunk(reader, chunk)))
    if not parsed:
        reader.error("E209", "the file is empty", Span.whole_file(reader.file))
        return
    _check_order(reader, parsed)
    for chunk, tree in parsed:
        if isinstance(tree, TaskRecord):
            reader.task_record(tree)
        elif isinstance(tree, StatementRecord):
            reader.statement_record(tree)
        elif tree is not None:
            reader.offset = chunk.line - 1
            with contextlib.suppress(_Failed):
                reader.statement(tree)
    end_line, end_col = position(reader.text, len(reader.text.rstrip()) - 1)
    reader.source.values[()] = Span(reader.file, parsed[0][0].line, 1, end_line, end_col)

