"""The syntax side of the ``.flow`` front end: the grammar, the statement splitter, and the
mapping of Lark's errors to located, worded E102 diagnostics.

A statement starts at column 1; an indented line, or any line inside an open bracket,
continues it. :func:`split_statements` cuts the text into statements in one linear scan
(noting unclosed strings, templates and brackets, and nesting too deep to parse); each
statement is then parsed on its own by one shared Lark LALR parser (:func:`parser`). Lark's
exceptions are mapped here (:func:`report_syntax_error`, :func:`split_keyword`) and go no
further.

The reader (:mod:`tether.dsl.flow_reader`) uses the names in ``__all__``: the parser and
splitter, the error mapping, and the tables that tie the grammar's rules to the document's
keys (``CLAUSE_KEYS``, ``NODE_STATEMENTS``, ...).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, assert_never

from tether.diagnostics import Span
from tether.dsl.parser_cache import table_file
from tether.dsl.source import MAX_DEPTH, Path, position
from tether.kinds import NodeKind
from tether.suggest import did_you_mean

if TYPE_CHECKING:  # Lark is imported when a statement needs the grammar (flow_direct reads
    from lark import Lark, Token, Tree  # the common ones), not before
    from lark.exceptions import UnexpectedInput


class Reporter(Protocol):
    """What the error mapping needs of the reader: the text, its name, and a way to report."""

    text: str
    file: str

    def error(self, code: str, message: str, span: Span, *,
              help: str | None = None) -> None: ...


CLAUSES = ("after", "when", "trigger", "for_each", "concurrency", "retry", "timeout",
           "idempotent", "loop", "reason", "context", "form", "on_timeout", "model",
           "instructions", "prompt", "tools", "max_turns", "output", "handoffs", "approve_tools",
           "max_tool_calls", "title", "until",
           "fail_fast", "matrix", "on", "case", "default", "renamed_from")
STATEMENTS = ("tether", "workflow", "description", "input", "inputs", "secrets", "schedule",
              "task", "approval", "agent", "switch", "noop", "fail", "sleep", "sleep_until",
              "output", "on", "concurrency")
APPROVAL_PARTS = ("reason", "context", "form", "on_timeout")
"""The clauses that give an approval node's ``approval``, one part each."""
AGENT_PARTS = ("model", "instructions", "prompt", "tools", "max_turns", "output", "handoffs",
               "approve_tools", "max_tool_calls")
"""The clauses that give an agent node's ``agent``, one part each (in the writer's order)."""
AGENT_LISTS = ("tools", "handoffs", "approve_tools")
"""The agent parts written as a list of names (like ``after``)."""
SWITCH_PARTS = ("on", "cases", "default")
"""The clauses that give a switch node's ``switch`` (``case`` lines build ``cases``)."""
CLAUSE_KEYS = {"after": "needs", "args": "with", "with_null": "with", "agent_output": "output",
               "switch_on": "on", "switch_case": "cases", "switch_default": "default"}
"""The document key of a clause whose grammar rule has another name (else the rule's name)."""
CLAUSE_WORDS = {"args": "(", "with_null": "with", "agent_output": "output", "switch_on": "on",
                "switch_case": "case", "switch_default": "default"}
"""The word that starts a clause whose grammar rule has another name."""
NODE_STATEMENTS = {f"{kind.value}_stmt": kind for kind in NodeKind}
"""The grammar's node statements and the kind of node each defines."""
HEADER_STATEMENTS: dict[str, tuple[Path, str, str, str]] = {
    "tether_stmt": (("tether",), "tether", "duplicate `tether`", "`tether` is first given"),
    "header": (("name",), "workflow", "duplicate `workflow` header",
               "the workflow is first named"),
    "description_stmt": (("description",), "description", "duplicate `description`",
                         "the description is first given"),
    "schedule_stmt": (("schedule",), "schedule", "duplicate `schedule`",
                      "the schedule is first given"),
    "on_stmt": (("on",), "on", "duplicate `on`", "the triggers are first given"),
    "concurrency_stmt": (("concurrency",), "concurrency", "duplicate `concurrency`",
                         "the concurrency key is first given"),
}
"""Statements given once per file: grammar rule -> (path, keyword, message, note)."""
CLAUSE_PARTS = {"loop_to": ("to", "to"), "loop_while": ("while", "while"),
                "loop_max": ("max_iterations", "max"),
                "on_exhausted": ("on_exhausted", "on_exhausted"), "backoff": ("backoff", "backoff"),
                "strategy": ("strategy", "strategy")}
"""The parts of a ``loop`` (and a retry's ``backoff``): grammar rule -> (key, keyword)."""
CONSTANTS: dict[str, Any] = {"TRUE": True, "FALSE": False, "NULL": None}
"""The values of the grammar's constant terminals."""

_TERMINAL_WORDS = {"ID": "an id", "NAME": "a name", "TASK_NAME": "a task name",
                   "MODEL_REF": "a model (provider:name)",
                   "STRING": "a string", "TEMPLATE": "a template", "NUMBER": "a number",
                   "DURATION": "a duration", "$END": "end of line"}
_VALUE_START = {"STRING", "TEMPLATE", "NUMBER", "TRUE", "FALSE", "NULL", "LSQB", "LBRACE"}
_STARTS = re.compile(
    r"(?:tether|workflow|description|inputs?|secrets|schedule|task|approval|agent|switch|noop"
    r"|fail|sleep|sleep_until|output|on|concurrency)\b(?![ \t]*:)")
MAX_SYNTAX_ERRORS = 100
TOO_DEEP = f"the document is nested more than {MAX_DEPTH} levels deep"
_BLANK = re.compile(r"[ \t\r\f]*(?:#[^\n]*)?(?:\n|\Z)")


@functools.cache
def compiled_lark() -> Any:
    """lark-cython (the LALR lexer and parser compiled, CPython), or None when it is not
    installed (PyPy): then Lark's own parser reads every statement."""
    try:
        import lark_cython  # type: ignore[import-untyped, unused-ignore]
    except ImportError:  # pragma: no cover - PyPy, or lark-cython absent
        return None
    return lark_cython


@functools.cache
def _tree_class() -> type[Tree[Token]]:
    """The class of the parse trees both parsers build (made on first use: it is Lark's)."""
    from lark import Token, Tree

    compiled_lark_module = compiled_lark()
    compiled = None if compiled_lark_module is None else compiled_lark_module.lark_cython.Token

    class _Tree(Tree[Token]):
        """A parse tree whose tokens are Lark's own, whichever parser built it (and whether
        its tables were built or loaded from the cache).

        lark-cython's tokens are not ``str`` (``json.loads`` and ``isinstance(x, Token)``
        refuse them): each is turned into a :class:`lark.Token` with the same positions as
        the rule that holds it is built, so both parsers give equal trees with equal
        positions.
        """

        __slots__ = ()

        def __init__(self, data: Any, children: list[Any], meta: Any = None) -> None:
            for i, child in enumerate(children):
                if type(child) is compiled:
                    children[i] = Token(child.type, child.value, child.start_pos, child.line,
                                        child.column, child.end_line, child.end_column,
                                        child.end_pos)
            if type(data) is compiled:  # a rule's name: no position, as Lark gives it
                data = Token(data.type, data.value)
            elif type(data) is str:  # tables loaded from the cache name rules by plain strings
                data = Token("RULE", data)
            super().__init__(data, children, meta)

    return _Tree


@functools.cache
def _terminals() -> dict[str, str]:
    """The regular-expression terminals of ``flow.lark`` (name -> pattern), read from its
    text: the patterns stay written once, and reading them builds no parser."""
    grammar = resources.files("tether.dsl").joinpath("flow.lark").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^([A-Z_]+)(?:\.\d+)?: /(.*)/$", grammar, re.MULTILINE)}


def terminal_pattern(name: str) -> str:
    """The regular expression of the grammar's terminal ``name`` (``STRING``, ``ID``...)."""
    return _terminals()[name]


def _build(*, compiled: bool) -> Lark:
    """A parser of one statement; its tables are loaded from the user's cache when they are
    there (:mod:`tether.dsl.parser_cache`), else built and saved."""
    from lark import Lark

    grammar = resources.files("tether.dsl").joinpath("flow.lark").read_text(encoding="utf-8")
    # Both parsers build _Tree: the same rule and token types whether the tables were built
    # here or loaded from the cache.
    options: dict[str, Any] = {"_plugins": compiled_lark().plugins,
                               "tree_class": _tree_class()} \
        if compiled else {"tree_class": _tree_class()}
    cache = table_file("flow-compiled" if compiled else "flow")
    if cache is not None:
        options["cache"] = cache
    return Lark(grammar, parser="lalr", lexer="contextual", start="statement",
                propagate_positions=True, maybe_placeholders=False, **options)


@functools.cache
def parser() -> Lark:
    """Lark's own parser of one statement, built once per process: the reference, and the
    one whose exceptions become diagnostics."""
    return _build(compiled=False)


@functools.cache
def _compiled_parser() -> Lark | None:
    return None if compiled_lark() is None else _build(compiled=True)


def grammar() -> Lark:
    """A parser to read the grammar's terminals from: the compiled one when there is one, so
    a file without syntax errors builds only one parser's tables."""
    return _compiled_parser() or parser()


def parse_statement(text: str, *, pure: bool = False) -> Tree[Token]:
    """The parse tree of one statement: by lark-cython when installed (unless ``pure``), else
    by Lark's own parser; both give the same tree.

    A statement the compiled parser refuses is parsed again by Lark's own, so a syntax error
    is always Lark's :class:`UnexpectedInput` (with its interactive parser) and is reported
    the same way with or without lark-cython.
    """
    from lark.exceptions import UnexpectedInput

    compiled = None if pure else _compiled_parser()
    if compiled is not None:
        try:
            return compiled.parse(text)
        except UnexpectedInput:
            pass
    return parser().parse(text)


@functools.cache
def _scanner() -> re.Pattern[str]:
    """The statement splitter's tokens; strings and templates use the grammar's own patterns
    (read from its text: a file the fast path reads whole builds no parser at all)."""
    string, template = terminal_pattern("STRING"), terminal_pattern("TEMPLATE")
    return re.compile(
        rf"(?P<inert>(?:[^\"{{}}\[\]()#\n]+|{template}|{string})+)|(?P<comment>#[^\n]*)"
        r"|(?P<open>[\[({])|(?P<close>[\])}])|(?P<newline>\n)|(?P<quote>\")"
    )


class _Problem(NamedTuple):
    offset: int
    span: Span
    code: str
    message: str
    help: str | None = None


@dataclass
class Chunk:
    """One statement's text: ``text[start:end]``, starting at column 1 of ``line``."""

    start: int
    line: int
    end: int = 0
    indented: bool = False
    problems: list[_Problem] = field(default_factory=list)
    unclosed: _Problem | None = None


def _starts_statement(text: str, pos: int, current: Chunk | None, depth: int) -> bool:
    char = text[pos]
    if char in " \t\r\f#\n":
        return current is None and _BLANK.match(text, pos) is None
    if current is None or depth == 0:
        return True
    # An unclosed bracket would swallow the rest of the file; a statement keyword at column 1
    # is the likelier truth.
    return _STARTS.match(text, pos) is not None


def split_statements(text: str, file: str) -> Iterator[Chunk]:
    """Cut ``text`` into statements, noting unclosed strings, templates and brackets.

    One pass over the text; a generator, so reading can stop early (too many errors) without
    scanning ahead. Long because it is one state machine: the line, the brackets, the chunk.
    """
    scan = _scanner().match
    current: Chunk | None = None
    outer = (0, 0, 0)  # the outermost open bracket: offset, line, column (E102 if unclosed)
    depth, line, line_start, pos, at_line_start = 0, 1, 0, 0, True
    while pos < len(text):
        if at_line_start and _starts_statement(text, pos, current, depth):
            if current is not None:
                current.end, current.unclosed = pos, _unclosed(text, file, *outer) \
                    if depth else None
                yield current
            current = Chunk(pos, line, indented=text[pos] in " \t\r\f")
            depth = 0
        at_line_start = False
        match = scan(text, pos)
        assert match is not None  # the alternatives cover every character
        kind, start, pos = match.lastgroup, match.start(), match.end()
        if kind == "newline":
            line, line_start, at_line_start = line + 1, pos, True
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "open" and not text.startswith("{{", start):
            depth += 1
            col = start - line_start + 1
            if depth == 1:
                outer = (start, line, col)
            elif depth == MAX_DEPTH + 1 and current is not None:
                current.problems.append(_Problem(start, _point(file, line, col), "E103",
                                                 TOO_DEEP, "flatten the document"))
        elif kind in ("open", "quote") and current is not None:
            message = ("this `{{` has no matching `}}` on the same line" if kind == "open"
                       else 'this string has no closing `"` on the same line')
            where = _point(file, line, start - line_start + 1)
            current.problems.append(_Problem(start, where, "E102", message))
            newline = text.find("\n", pos)
            pos = len(text) if newline < 0 else newline
    if current is not None:
        current.end, current.unclosed = len(text), _unclosed(text, file, *outer) \
            if depth else None
        yield current


def _unclosed(text: str, file: str, offset: int, line: int, col: int) -> _Problem:
    """E102 for the bracket at ``offset``, never closed (made only when it is not)."""
    return _Problem(offset, _point(file, line, col), "E102",
                    f"`{text[offset]}` is never closed",
                    "close it, or indent the lines that continue the statement")


def refused_help(kind: NodeKind) -> str | None:
    """The help line of a clause that a node of ``kind`` does not take."""
    match kind:
        case NodeKind.APPROVAL:
            return "an approval node takes `reason`, `context` and `form`"
        case NodeKind.WORKFLOW:
            return "retries and timeouts belong to the tasks of the sub-workflow"
        case NodeKind.AGENT:
            return ("an agent node takes `model`, `instructions`, `prompt`, `tools`, "
                    "`max_turns`, `output`, `handoffs`, `approve_tools` and "
                    "`max_tool_calls`")
        case NodeKind.SWITCH:
            return "a switch node takes `on`, `case` and `default`"
        case NodeKind.NOOP | NodeKind.FAIL | NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            return f"a {kind.value} node takes `after`, `when`, `trigger`, `title` and `loop`"
        case NodeKind.TASK:
            return None
        case _:
            assert_never(kind)


def _point(file: str, line: int, col: int) -> Span:
    return Span(file, line, col, line, col)


def describe_terminal(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    pattern = parser().get_terminal(name).pattern
    return f"`{pattern.value}`" if pattern.type == "str" else "a token"


def _expected(names: set[str]) -> str:
    words: list[str] = []
    if names >= _VALUE_START:
        names, words = names - _VALUE_START, ["a value"]
    clauses = {name for name in names if name.lower() in CLAUSES}
    if len(clauses) > 3:
        names = names - clauses - {"WITH", "TASK", "APPROVAL", "WORKFLOW", "AGENT", "SWITCH",
                                   "NOOP", "FAIL", "SLEEP", "SLEEP_UNTIL", "SWITCH_ON",
                                   "SWITCH_CASE", "SWITCH_DEFAULT"}
        words.append("a clause (" + ", ".join(c for c in CLAUSES if c.upper() in clauses) + ")")
    words += sorted(describe_terminal(name) for name in names - {"$END"})
    words += ["end of line"] if "$END" in names else []
    return words[0] if len(words) == 1 else "one of: " + ", ".join(words)


def shorten(value: str) -> str:
    value = value.replace("\n", " ")
    return value if len(value) <= 30 else value[:27] + "..."


def report_syntax_error(reader: Reporter, chunk: Chunk, exc: UnexpectedInput) -> None:
    """Report a Lark error as E102, or the scanner's better explanation of it."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    interactive = getattr(exc, "interactive_parser", None)
    accepts_of: Callable[[], set[str]] | None = getattr(interactive, "accepts", None)
    accepts = accepts_of() if accepts_of else set(getattr(exc, "expected", ()) or ())
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        token = exc.token  # Lark gives it the position of the last token: point just after
        line, col, end, offset = token.end_line, token.end_column, token.end_column, token.end_pos
        found = "end of line"
    elif isinstance(exc, UnexpectedToken):  # tokens never span lines
        token = exc.token
        line, col, end, offset = token.line, token.column, token.end_column - 1, token.start_pos
        found = f"`{shorten(str(token))}`"
    else:
        assert isinstance(exc, UnexpectedCharacters)
        line, col, end, offset = exc.line, exc.column, exc.column, exc.pos_in_stream
        found = f"`{exc.char}`"
    offset = (offset or 0) + chunk.start
    problem = next((p for p in chunk.problems if p.offset <= offset), None)
    if problem is None and found == "end of line":
        problem = chunk.unclosed
    if problem is not None:
        reader.error(problem.code, problem.message, problem.span, help=problem.help)
        return
    line = (line or 1) + chunk.line - 1
    word_start, word = _word_around(reader.text, offset)
    inside = offset < len(reader.text) and (reader.text[offset].isalnum()
                                            or reader.text[offset] == "_")
    typo = _typo_before(reader.text[chunk.start:offset])
    if typo is not None and not (inside and word_start < offset):
        word_start, word, inside = chunk.start + typo[0], typo[1], True
        line, col = position(reader.text, word_start)
        offset = word_start + 1
        col += 1
    if inside and word_start < offset:  # the lexer split a misspelt keyword (retrys: retry s)
        col = (col or 1) - (offset - word_start)
        span = Span(reader.file, line, col, line, col + len(word) - 1)
        help = did_you_mean(word, CLAUSES) or did_you_mean(word, STATEMENTS)
        reader.error("E102", f"unknown word `{word}`", span, help=help)
        return
    span = Span(reader.file, line, col or 1, line, end or 1)
    reader.error("E102", f"unexpected {found}; expected {_expected(accepts)}", span,
                 help=_syntax_help(found, accepts, first=(line, col) == (chunk.line, 1)))


def _typo_before(text: str) -> tuple[int, str] | None:
    """A keyword with one or two extra letters (``afterr``) before a syntax error, if any:
    the lexer read it as the keyword and a name, and the error shows up later."""
    for match in _KEYWORD_PREFIX.finditer(text):
        if len(match.group(2)) <= 2 and not _in_literal(text, match.start()):
            return match.start(), match.group(0)
    return None


def _word_around(text: str, offset: int) -> tuple[int, str]:
    """The identifier-like word of ``text`` that contains ``offset``, and where it starts."""
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    end = offset
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return start, text[start:end]


# Clause words of other tools that no spelling distance finds (GitHub Actions' `if`).
_OTHER_TOOLS = {"if": "when", "depends_on": "after", "needs": "after"}


def _syntax_help(found: str, accepts: set[str], *, first: bool) -> str | None:
    word = found.strip("`")
    if first and word in CLAUSES:
        return "indent the line to continue the statement above it"
    if not re.fullmatch(r"[A-Za-z_]\w*", word):
        return None
    keywords = [w.strip("`") for w in map(describe_terminal, accepts) if re.fullmatch(r"`\w+`", w)]
    if word in _OTHER_TOOLS and _OTHER_TOOLS[word] in keywords:
        return f"did you mean `{_OTHER_TOOLS[word]}`? (GitHub Actions' `if` is tether's `when`)" \
            if word == "if" else f"did you mean `{_OTHER_TOOLS[word]}`?"
    close = did_you_mean(word, keywords)
    if close is None and accepts >= _VALUE_START:
        return f'quote a string (`"{word}"`) or write a template (`{{{{ {word} }}}}`)'
    return close


_KEYWORD_PREFIX = re.compile(
    r"(?<![\w.])(after|agent|approval|approve_tools|backoff|concurrency|context|description"
    r"|false|for_each|form|handoffs|idempotent|input|inputs|instructions|loop|max_tool_calls|max|max_turns"
    r"|model|null|on_exhausted|output|prompt|reason|retry|schedule|secrets|task|tether|timeout"
    r"|tools|to"
    r"|trigger|true|when|while|with|workflow|title|until|renamed_from|fail_fast|matrix|strategy|switch"
    r"|noop|on_timeout|sleep)(\w+)"
)


def split_keyword(text: str, tree: Tree[Token]) -> tuple[int, str] | None:
    """A word the contextual lexer split into a keyword and a name (``afterr`` -> after r).

    Keywords are literal terminals, which need no word boundary: where the parser accepts
    only keywords, ``afterr a`` lexes as ``after`` then the id ``r``. Such a split shows as a
    token of the tree that starts right where a keyword inside one word ends.
    """
    from lark import Token

    starts = {token.start_pos for token in tree.scan_values(lambda v: isinstance(v, Token))}
    for match in _KEYWORD_PREFIX.finditer(text):
        if match.start(2) in starts and not _in_literal(text, match.start()):
            return match.start(), match.group(0)
    return None


def _in_literal(text: str, offset: int) -> bool:
    """Whether ``offset`` is inside a quoted string or a template (a rough, safe test)."""
    before = text[:offset]
    return before.count('"') % 2 == 1 or before.count("{{") > before.count("}}")


__all__ = [
    "AGENT_LISTS",
    "AGENT_PARTS",
    "APPROVAL_PARTS",
    "CLAUSES",
    "CLAUSE_KEYS",
    "CLAUSE_PARTS",
    "CLAUSE_WORDS",
    "CONSTANTS",
    "HEADER_STATEMENTS",
    "MAX_SYNTAX_ERRORS",
    "NODE_STATEMENTS",
    "STATEMENTS",
    "SWITCH_PARTS",
    "TOO_DEEP",
    "Chunk",
    "Reporter",
    "compiled_lark",
    "describe_terminal",
    "grammar",
    "parse_statement",
    "parser",
    "refused_help",
    "report_syntax_error",
    "shorten",
    "split_keyword",
    "split_statements",
    "terminal_pattern",
]
