"""How deeply a template nests, measured on its tokens before anything parses it.

Jinja2's parser and code generator, and the analysis of the compiler, recurse once per level
of nesting; 120 parentheses or 2,000 ``not`` would end in RecursionError (or in Python's
"too many nested parentheses"). :func:`nesting_problem` lexes the text (an iterative scan) and
refuses more than :data:`MAX_NESTING` open brackets or blocks, or more than
:data:`MAX_OPERATORS` operators in one expression, which no workflow needs.
"""

from __future__ import annotations

MAX_NESTING = 32
MAX_OPERATORS = 100

_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
_OPERATORS = frozenset({"+", "-", "*", "/", "//", "**", "%", "~", ".", "|", "==", "!=",
                        ">", ">=", "<", "<=", "not", "and", "or", "in", "is", "if"})
_BLOCKS = frozenset({"for", "if", "macro", "call", "filter", "with", "block", "autoescape"})


class _Scan:
    def __init__(self) -> None:
        self.brackets = 0
        self.blocks = 0
        self.operators = 0
        self.first_word = True  # the next name is a block's tag
        self.block_words: list[str] = []

    def token(self, kind: str, value: str) -> str | None:
        if kind in ("variable_begin", "block_begin"):
            self.operators, self.first_word, self.block_words = 0, kind == "block_begin", []
        elif kind == "block_end":
            self.end_block()
        elif kind == "operator" and value in _OPEN:
            self.brackets += 1
        elif kind == "operator" and value in _CLOSE:
            self.brackets = max(self.brackets - 1, 0)
        if kind in ("operator", "name") and value in _OPERATORS and not self.first_word:
            self.operators += 1
        if kind in ("name", "operator") and self.block_words is not None:
            self.block_words.append(value)
        if kind == "name":
            self.first_word = False
        return self.problem()

    def end_block(self) -> None:
        tag = self.block_words[0] if self.block_words else ""
        if tag in _BLOCKS or (tag == "set" and "=" not in self.block_words):
            self.blocks += 1
        elif tag.startswith("end"):
            self.blocks = max(self.blocks - 1, 0)

    def problem(self) -> str | None:
        if self.brackets > MAX_NESTING:
            return f"the template nests brackets more than {MAX_NESTING} levels deep"
        if self.blocks > MAX_NESTING:
            return f"the template nests blocks more than {MAX_NESTING} levels deep"
        if self.operators > MAX_OPERATORS:
            return f"an expression of the template has more than {MAX_OPERATORS} operators"
        return None


def nesting_problem(text: str) -> str | None:
    """Why ``text`` is too deeply nested to parse safely, or None."""
    if len(text) <= 2 * MAX_OPERATORS and sum(map(text.count, "([{")) <= MAX_NESTING:
        return None  # too short to break a limit: the common case, without lexing
    from jinja2 import TemplateSyntaxError

    from tether.templating.engine import ENV

    scan = _Scan()
    try:
        for _, kind, value in ENV.lex(text):
            problem = scan.token(kind, value)
            if problem is not None:
                return problem
    except TemplateSyntaxError:
        return None  # the parser reports it, with its own words
    return None
