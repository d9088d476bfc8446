"""Reading a tool's description from its docstring: the first paragraph, and Google-style
``Args:`` entries as the descriptions of its parameters."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Kwargs):\s*$")
_ANY_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class Docstring:
    """What a docstring says about a tool."""

    summary: str = ""
    parameters: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """The first paragraph (lines joined by spaces) and the ``Args:`` entries of ``doc``.

    ``doc`` should be cleaned already (``inspect.getdoc`` does that).
    """
    if not doc:
        return Docstring()
    lines = doc.strip().splitlines()
    return Docstring(summary=_summary(lines), parameters=_parameters(lines))


def _summary(lines: list[str]) -> str:
    paragraph: list[str] = []
    for line in lines:
        if not line.strip() or _ANY_SECTION.match(line):
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


def _parameters(lines: list[str]) -> dict[str, str]:
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        return {}
    found: dict[str, list[str]] = {}
    base: int | None = None
    current: list[str] | None = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 or (base is not None and indent < base):
            break  # the next section, or the end of this one
        if base is None:
            base = indent
        entry = _ENTRY.match(line.strip()) if indent == base else None
        if entry:
            current = found.setdefault(entry["name"], [])
            current.append(entry["text"].strip())
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in found.items()}
