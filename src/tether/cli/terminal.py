"""Showing data on a terminal without letting the data speak to the terminal.

Execution ids, workflow names, node outputs and error messages are data: they may hold rich
markup (``[/]``, ``[link=...]``), ANSI escapes, line breaks or lone surrogates. Everything the
CLI prints goes through one of these helpers:

- :func:`printable` shows control and format characters as escapes (``\\x1b``, ``\\n``,
  ``\\u202e``), so nothing reaches the terminal raw and one record stays on one line;
- :func:`text` makes a rich :class:`~rich.text.Text`, which rich never reads as markup;
- :func:`dumps` is JSON with the same characters escaped (``\\u001b``; still valid JSON);
- :func:`shell_quote` quotes an argument of a command hint for a POSIX shell.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import unicodedata
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# control, format (bidi overrides, zero-width), surrogate, line and paragraph separators
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object) -> str:
    """``str(value)`` with every control or format character shown as an escape."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _HIDDEN else c for c in text)


def text(value: object, style: str = "") -> Text:
    """A rich Text of ``value`` (never read as markup), control characters escaped."""
    from rich.text import Text

    return Text(printable(value), style=style)


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON text of ``value`` with non-ASCII characters kept, except the ones
    :func:`printable` escapes, which become ``\\uXXXX`` escapes (JSON escapes the ASCII
    control characters itself)."""
    raw = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    if raw.isascii():
        return raw
    return "".join(c if ord(c) < 0x7F or unicodedata.category(c) not in _HIDDEN
                   else _json_escape(c) for c in raw)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def shell_quote(argument: str) -> str:
    """``argument`` quoted for a POSIX shell (``$(...)`` stays literal), shown printable."""
    return printable(shlex.quote(argument))


def shorten(value: Any, width: int = 60) -> str:
    """A one-line, printable rendering of ``value`` cut to ``width`` characters."""
    rendered = value if isinstance(value, str) else dumps(value)
    shown = printable(rendered)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def when(moment: datetime) -> str:
    """A timestamp in local time, to the second."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def console() -> Console:
    """A rich console for stdout; when it is not a terminal, wide enough not to wrap rows."""
    from rich.console import Console

    terminal = Console(soft_wrap=True, highlight=False, emoji=False, markup=False)
    if terminal.is_terminal:
        return terminal
    return Console(soft_wrap=True, width=200, highlight=False, emoji=False, markup=False)


COLOR_CHOICES = ("auto", "always", "never")
"""The values of ``--color``."""


def use_color(choice: str, stream: IO[str] | None = None) -> bool:
    """Whether to colour output for ``--color choice`` written to ``stream`` (stdout).

    ``auto`` colours a terminal unless ``NO_COLOR`` is set (https://no-color.org).
    """
    choice = choice.lower()
    if choice != "auto":
        return choice == "always"
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
